/**
 * The router process as pm2 runs it: config from the environment, port 0 reported over IPC, and the drain on
 * SIGTERM — in-flight requests finish (told `Connection: close`), new connections are refused, idle
 * keep-alive connections do not keep it alive, the exit code is 0.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';
import { until } from '../../test/support/polling.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
// The tsx loader by absolute URL: the children run in a temp cwd (no stray .env), where `--import tsx` would not resolve.
const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

let fake: FakeModelServer;
let cwd: string;

beforeAll(async () => {
  fake = await startFakeModelServer();
  cwd = mkdtempSync(path.join(tmpdir(), 'router-main-'));
});
afterAll(async () => {
  await fake.close();
  rmSync(cwd, { recursive: true, force: true });
});

interface Started {
  child: ChildProcess;
  port: number;
  exited: Promise<number | null>;
  stderr: () => string;
}

async function startRouter(env: Record<string, string>): Promise<Started> {
  let stderr = '';
  const child = fork(path.join(ROOT, 'router/main.ts'), [], {
    cwd,
    execArgv: ['--import', TSX],
    env: { PATH: process.env.PATH, LOG_LEVEL: 'warn', SETUP_CONFIG: path.join(ROOT, 'setup_config.json'), ...env },
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    child.on('message', (m: { type?: string; port?: number }) => m?.type === 'listening' && resolve(m.port!));
    void exited.then((code) => reject(new Error(`router exited ${code}: ${stderr}`)));
  });
  return { child, port, exited, stderr: () => stderr };
}

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
    const child = fork(path.join(ROOT, 'router/main.ts'), [], {
      cwd,
      execArgv: ['--import', TSX],
      env: { PATH: process.env.PATH, ROUTER_MAX_BODY_BYTES: 'lots' },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((resolve) => child.once('exit', resolve));
    expect(code).toBe(2);
    expect(stderr).toContain('ROUTER_MAX_BODY_BYTES="lots": expected an integer');
  });

  it('drains on SIGTERM: the in-flight request finishes, new connections are refused, exit 0', async () => {
    const router = await startRouter({ ROUTER_ADDRESS: '127.0.0.1:0', INFERENCE_ADDRESS: fake.url });
    const busy = new http.Agent({ keepAlive: true });
    const idle = new http.Agent({ keepAlive: true });
    try {
      // A keep-alive connection that stays idle through the drain must not keep the process alive.
      expect((await request(router.port, idle, 'warm')).status).toBe(200);
      const inFlight = request(router.port, busy, '!slow 700');
      // The fake records the request when it arrives: the router has accepted it and forwarded it.
      await until(
        'the slow request at the model server',
        () => fake.seen.some((s) => (s.body as { src_text: string }).src_text === '!slow 700'),
        5_000,
        10,
      );
      router.child.kill('SIGTERM');
      const answered = await inFlight;
      expect(answered.status).toBe(200);
      expect(JSON.parse(answered.body)).toEqual({ translated: 'ko:007 wols!' });
      expect(answered.headers.connection).toBe('close');
      await expect(request(router.port, new http.Agent(), 'late')).rejects.toMatchObject({ code: 'ECONNREFUSED' });
      expect(await router.exited).toBe(0);
    } finally {
      busy.destroy();
      idle.destroy();
      router.child.kill('SIGKILL');
    }
  });
});
