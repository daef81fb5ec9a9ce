/**
 * The front process (front/main.ts) both ways — nginx and the built-in proxy — against a fake router that is a
 * real HTTP server: the two must be interchangeable (same routes, same request-id rule, same JSON errors,
 * keep-alive to the router, graceful stop). The nginx half is skipped, saying so, only where nginx is not
 * installed; CI installs it (.ci/run).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { errorBodyText, frontErrors } from '../error-pages.js';
import { findNginx } from '../nginx.js';
import { freePort } from '../../harness/ports.js';
import type { ManagedProcess } from '../../harness/process-registry.js';
import { isListening, ROOT, startEntry } from '../../harness/processes.js';
import { abandonThroughFront, startFakeRouter, type FakeRouter } from './fake-router.js';

const MAX = 4096;
const nginx = findNginx(process.env);
if (!nginx)
  console.warn(
    'front-main.test: nginx is not installed; the nginx front is NOT tested here (apt-get install nginx-light)',
  );

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function send(
  port: number,
  options: { path?: string; body?: string; headers?: Record<string, string>; agent?: http.Agent },
): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        path: options.path ?? '/',
        method: options.body === undefined ? 'GET' : 'POST',
        headers: options.headers,
        agent: options.agent,
      },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    req.end(options.body);
  });
}

describe.each([
  ['builtin', true],
  ['nginx', nginx !== undefined],
] as const)('front: %s', (kind, available) => {
  let dir: string;
  let router: FakeRouter;
  let routerPort: number;
  let frontPort: number;
  let front: ManagedProcess;

  beforeAll(async () => {
    if (!available) return;
    dir = mkdtempSync(path.join(tmpdir(), `front-${kind}-`));
    router = await startFakeRouter();
    routerPort = router.port;
    // Unbound until the front binds it: a port 0 server of a parallel test must not be handed it meanwhile.
    frontPort = await freePort();
    front = startEntry({
      entry: 'front/main.ts',
      cwd: dir,
      env: {
        FRONT: kind,
        FRONT_ADDRESS: `127.0.0.1:${frontPort}`,
        ROUTER_ADDRESS: `127.0.0.1:${routerPort}`,
        ROUTER_MAX_BODY_BYTES: String(MAX),
        LOG_LEVEL: 'warn',
      },
    });
    const listening = await front.message(isListening);
    expect(listening).toMatchObject({ front: kind, port: frontPort });
  });
  afterAll(async () => {
    if (!available) return;
    await front?.stop();
    await router?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!available)('forwards every path to the router, tags the reply, and carries one request id', async () => {
    const reply = await send(frontPort, { body: '{"a":1}', headers: { 'x-request-id': 'client-42' } });
    expect(reply.status).toBe(200);
    expect(reply.headers['x-front']).toBe(kind);
    expect(reply.headers['x-request-id']).toBe('client-42');
    expect(reply.headers['x-error-code']).toBeUndefined();
    const seen = JSON.parse(reply.body) as {
      method: string;
      path: string;
      body: string;
      headers: Record<string, string>;
    };
    expect(seen).toMatchObject({ method: 'POST', path: '/', body: '{"a":1}' });
    expect(seen.headers['x-request-id']).toBe('client-42');
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');

    const fresh = await send(frontPort, { body: '{}', headers: { 'x-request-id': 'has spaces in it' } });
    const id = fresh.headers['x-request-id'] as string;
    expect(id).toMatch(/^[\w-]{16,}$/);
    expect((JSON.parse(fresh.body) as { headers: Record<string, string> }).headers['x-request-id']).toBe(id);

    // Management and metrics paths are just paths on the router (which answers 404): nothing else is behind the front.
    const models = await send(frontPort, { path: '/models?url=ko' });
    expect(JSON.parse(models.body)).toMatchObject({ method: 'GET', path: '/models?url=ko' });
  });

  it.skipIf(!available)('keeps connections to the router alive', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const connections = new Set<number>();
      for (let i = 0; i < 6; i++) {
        const reply = await send(frontPort, { body: `{"i":${i}}`, agent });
        connections.add((JSON.parse(reply.body) as { connection: number }).connection);
      }
      expect(connections.size).toBe(1);
    } finally {
      agent.destroy();
    }
  });

  it.skipIf(!available)('refuses a body over the limit with the shared 413 JSON', async () => {
    const before = router.received.length;
    const reply = await send(frontPort, { body: 'x'.repeat(MAX + 1), headers: { 'content-type': 'application/json' } });
    expect(reply.status).toBe(413);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.body).toBe(errorBodyText(frontErrors(MAX)[413]));
    expect(reply.headers['x-error-code']).toBe('PAYLOAD_TOO_LARGE');
    expect(router.received.length).toBe(before);
    const atLimit = await send(frontPort, { body: 'y'.repeat(MAX) });
    expect(atLimit.status).toBe(200);
  });

  it.skipIf(!available || kind !== 'nginx')(
    'runs its nginx workers as a non-root user, with state inside RUN_DIR',
    () => {
      const master = Number(execFileSync('cat', [path.join(dir, 'run', 'nginx.pid')], { encoding: 'utf8' }).trim());
      const users = execFileSync('ps', ['-o', 'user=', '--ppid', String(master)], { encoding: 'utf8' })
        .trim()
        .split('\n');
      expect(users.length).toBeGreaterThan(0);
      for (const user of users) expect(user.trim()).not.toBe('root');
    },
  );

  it.skipIf(!available)('answers the shared 502 JSON at once when the router is down', async () => {
    await router.close();
    const started = performance.now();
    const reply = await send(frontPort, { body: '{}' });
    expect(performance.now() - started).toBeLessThan(1_000);
    expect(reply.status).toBe(502);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.body).toBe(errorBodyText(frontErrors(MAX)[502]));
    expect(reply.headers['x-error-code']).toBe('UPSTREAM_UNAVAILABLE');
    // The router comes back on the same port: the front recovers at once (nginx must not mark it failed).
    router = await startFakeRouter(routerPort);
    expect((await send(frontPort, { body: '{}' })).status).toBe(200);
  });

  it.skipIf(!available)('a client that disconnects cancels its request at the router at once', async () => {
    for (let i = 0; i < 3; i++) {
      expect(await abandonThroughFront(frontPort, router, `${kind}-gone-${i}`)).toBeLessThan(1_000);
    }
  });

  it.skipIf(!available)('delivers its 413 to a client that sends a large body whole before reading', async () => {
    const body = Buffer.alloc(5 << 20, 0x61);
    for (let i = 0; i < 10; i++) {
      const raw = await new Promise<string>((resolve, reject) => {
        const socket = connect(frontPort, '127.0.0.1', () => {
          socket.write(`POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`);
          socket.write(body);
        });
        let text = '';
        socket.on('data', (d: Buffer) => (text += d.toString()));
        socket.on('error', (err) => reject(new Error(`try ${i}: ${err.message} after ${JSON.stringify(text)}`)));
        socket.on('close', () => resolve(text));
      });
      expect(raw).toMatch(/^HTTP\/1\.1 413 /);
      expect(raw.endsWith(errorBodyText(frontErrors(MAX)[413]))).toBe(true);
    }
  });

  it.skipIf(!available)('stops gracefully on SIGTERM', async () => {
    front.signal('SIGTERM');
    expect(await front.exited).toEqual({ code: 0, signal: null });
  });
});

it('ROOT points at the repository', () => {
  expect(path.basename(path.join(ROOT, 'front'))).toBe('front');
});
