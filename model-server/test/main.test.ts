import { fork, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveEntry } from '../../common/entry.js';
import type { ListeningMessage } from '../main.js';
import { archiveModels } from '../tools/archiver.js';
import { call } from '../../harness/http.js';
import { until } from '../../harness/polling.js';

const MAIN = resolveEntry(import.meta.url, '../main');
const dirs: string[] = [];

interface Started {
  child: ChildProcess;
  ports: ListeningMessage['ports'];
  dir: string;
  exited: Promise<{ code: number | null; stderr: string }>;
}

/** Fork the real entry in a temp project folder; resolve when it reports its ports over IPC. */
function startMain(env: Record<string, string>, dotenv = ''): Promise<Started> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-main-'));
  dirs.push(dir);
  mkdirSync(path.join(dir, 'model'));
  archiveModels({
    modelDir: path.join(dir, 'model'),
    store: path.join(dir, 'model_store'),
    names: ['echo'],
    handler: 'echo',
  });
  if (dotenv) writeFileSync(path.join(dir, '.env'), dotenv);
  const child = fork(MAIN.file, [], {
    cwd: dir,
    execArgv: MAIN.execArgv,
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: {
      ...process.env,
      INFERENCE_ADDRESS: '127.0.0.1:0',
      MANAGEMENT_ADDRESS: '127.0.0.1:0',
      METRICS_ADDRESS: '127.0.0.1:0',
      LOG_LEVEL: 'warn',
      ...env,
    },
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<{ code: number | null; stderr: string }>((resolve) =>
    child.once('exit', (code) => resolve({ code, stderr })),
  );
  return new Promise((resolve, reject) => {
    child.once('message', (m: ListeningMessage) => resolve({ child, ports: m.ports, dir, exited }));
    void exited.then(({ code, stderr: err }) => reject(new Error(`model server exited with ${code}: ${err}`)));
  });
}

describe('model-server/main (the real process)', () => {
  const cleanup: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const fn of cleanup.splice(0)) await fn();
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const track = (s: Started) =>
    cleanup.push(async () => {
      if (s.child.exitCode === null) s.child.kill('SIGKILL');
      await s.exited.catch(() => undefined);
    });

  it('reports its ports, serves, and on SIGTERM finishes the queued job before exiting 0', async () => {
    const s = await startMain({ BATCH_POLICY: 'torchserve' });
    track(s);
    const mgmt = `http://127.0.0.1:${s.ports.management}`;
    const inf = `http://127.0.0.1:${s.ports.inference}`;
    expect((await call(`${inf}/ping`)).body).toEqual({ status: 'Healthy' });
    const reg = await call(`${mgmt}/models?url=echo&batch_size=8&max_batch_delay=20000`, { method: 'POST' });
    expect(reg.status).toBe(200);
    // This job would wait 20 s for company; a drain sends it at once.
    const pending = call(`${inf}/predictions/echo`, { body: { src_text: 'last words' } });
    await until(
      'the job to be queued',
      async () => (await call(`${mgmt}/models/echo`)).body[0].jobQueueStatus.pendingRequests === 1,
    );
    s.child.kill('SIGTERM');
    expect(await pending).toMatchObject({ status: 200, body: { translated: 'last words' } });
    expect((await s.exited).code).toBe(0);
  });

  it('token authorization: keys written to the key file, 401 without them, /ping open', async () => {
    const s = await startMain({ TOKEN_AUTH: 'true', KEY_FILE: './keys/key_file.json' });
    track(s);
    const file = path.join(s.dir, 'keys', 'key_file.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const keys = JSON.parse(readFileSync(file, 'utf8'));
    const mgmt = `http://127.0.0.1:${s.ports.management}`;
    const inf = `http://127.0.0.1:${s.ports.inference}`;
    expect(await call(`${mgmt}/models`)).toMatchObject({
      status: 401,
      body: {
        code: 401,
        type: 'InvalidKeyException',
        message: 'Token Authorization failed. Token either incorrect, expired, or not provided correctly',
      },
    });
    // The inference key does not open the management API.
    const wrong = { authorization: `Bearer ${keys.inference.key}` };
    expect((await call(`${mgmt}/models`, { headers: wrong })).status).toBe(401);
    const auth = { authorization: `Bearer ${keys.management.key}` };
    expect((await call(`${mgmt}/models?url=echo`, { method: 'POST', headers: auth })).status).toBe(200);
    expect((await call(`${inf}/ping`)).status).toBe(200);
    expect((await call(`${inf}/predictions/echo`, { body: { src_text: 'x' } })).status).toBe(401);
    const ok = await call(`${inf}/predictions/echo`, {
      body: { src_text: 'x' },
      headers: { authorization: `Bearer ${keys.inference.key}` },
    });
    expect(ok).toMatchObject({ status: 200, body: { translated: 'x' } });
    expect((await call(`http://127.0.0.1:${s.ports.metrics}/metrics`)).status).toBe(200);
  });

  it('reads .env, and a bad value stops the start with a message naming the variable', async () => {
    const failed = startMain({}, 'MAX_BATCH_DELAY_MS=soon\nJOB_QUEUE_SIZE=0\n');
    const err = await failed.then(
      () => undefined,
      (e: Error) => e,
    );
    expect(err?.message).toMatch(/exited with 1/);
    expect(err?.message).toContain('MAX_BATCH_DELAY_MS="soon"');
    expect(err?.message).toContain('JOB_QUEUE_SIZE="0"');
  });
});
