/**
 * The router process as pm2 runs it: config from the environment, port 0 reported over IPC, and the drain on
 * SIGTERM — in-flight requests finish (told `Connection: close`), new connections are refused, idle
 * keep-alive connections do not keep it alive, the exit code is 0.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { isListening, ROOT, startEntry } from '../../harness/processes.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

let fake: FakeModelServer;
let cwd: string;

beforeAll(async () => {
  fake = await startFakeModelServer();
  cwd = mkdtempSync(path.join(tmpdir(), 'router-main-'));
});
afterAll(async () => {
  await stopAll();
  await fake.close();
  rmSync(cwd, { recursive: true, force: true });
});

/** The router entry in the temp cwd (no stray .env), with `env` as its whole configuration. */
const startRouter = (env: Record<string, string>) =>
  startEntry({
    name: 'router',
    entry: 'router/main.ts',
    cwd,
    env: { LOG_LEVEL: 'warn', SETUP_CONFIG: path.join(ROOT, 'setup_config.json'), ...env },
  });

function request(port: number, agent: http.Agent, text: string) {
  return new Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }>((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, method: 'POST', path: '/', agent, headers: { 'content-type': 'application/json' } },
      (res) => {
        let body = '';
        res.on('data', (d: Buffer) => (body += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify({ src_lang: 'en', src_text: text, tgt_lang: 'ko' }));
  });
}

describe('router main', () => {
  it('reports a bad variable by name and exits 2', async () => {
    const child = startEntry({ name: 'router', entry: 'router/main.ts', cwd, env: { ROUTER_MAX_BODY_BYTES: 'lots' } });
    expect((await child.exited).code).toBe(2);
    expect(child.log()).toContain('ROUTER_MAX_BODY_BYTES="lots": expected an integer');
  });

  it('refuses to start with API keys it cannot read, naming the file and the entry, exit 2', async () => {
    const keys = path.join(cwd, 'bad-keys.json');
    writeFileSync(keys, JSON.stringify({ keys: [{ id: 'a', sha256: 'not-a-hash' }] }));
    const child = startRouter({ ROUTER_ADDRESS: '127.0.0.1:0', INFERENCE_ADDRESS: fake.url, API_KEYS: keys });
    expect((await child.exited).code).toBe(2);
    expect(child.log()).toContain(`API_KEYS ${keys}: keys.0.sha256: sha256 is the key hashed, 64 lowercase hex digits`);
  });

  it('drains on SIGTERM: the in-flight request finishes, new connections are refused, exit 0', async () => {
    const router = startRouter({ ROUTER_ADDRESS: '127.0.0.1:0', INFERENCE_ADDRESS: fake.url });
    const { port } = await router.message(isListening<{ port: number }>);
    const busy = new http.Agent({ keepAlive: true });
    const idle = new http.Agent({ keepAlive: true });
    try {
      // A keep-alive connection that stays idle through the drain must not keep the process alive.
      expect((await request(port, idle, 'warm')).status).toBe(200);
      const inFlight = request(port, busy, '!slow 700');
      // The fake records the request when it arrives: the router has accepted it and forwarded it.
      await until(
        'the slow request at the model server',
        () => fake.seen.some((s) => (s.body as { src_text: string }).src_text === '!slow 700'),
        5_000,
        10,
      );
      router.signal('SIGTERM');
      const answered = await inFlight;
      expect(answered.status).toBe(200);
      expect(JSON.parse(answered.body)).toEqual({ translated: 'ko:007 wols!' });
      expect(answered.headers.connection).toBe('close');
      await expect(request(port, new http.Agent(), 'late')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      expect(await router.exited).toEqual({ code: 0, signal: null });
    } finally {
      busy.destroy();
      idle.destroy();
      router.signal('SIGKILL');
    }
  });
});
