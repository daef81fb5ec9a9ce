/**
 * Issue 6.6 — security defaults, on real processes: the management and metrics APIs listen on loopback by
 * default and no front (nginx or built-in) ever reaches them, whatever the path, method, Host header or request
 * target; token authorization (TorchServe's key file) answers 401 without a key and works with the generated
 * ones, the router included, across a model-server restart that rotates them; every port refuses a body over its
 * limit with 413; `POST /models?url=` cannot load anything outside the model store; nginx shows no version.
 */
import { mkdirSync, readFileSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ENV_DEFAULTS, loadConfig } from '../../common/config.js';
import { findNginx } from '../../front/nginx.js';
import { manifestPath } from '../../model-server/store/manifest.js';
import { send } from '../../harness/load.js';
import { stopAll, type ManagedProcess } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { ROOT } from '../../harness/processes.js';
import { rawRequest } from '../../harness/raw-http.js';
import { apiKeys, startFronts, startStack, translateBody, type Stack } from '../../harness/stack.js';

const nginx = findNginx(process.env);
if (!nginx)
  console.warn('security.test: nginx is not installed; the nginx front is NOT tested (apt-get install nginx-light)');
const ROUTER_MAX = 16_384;
const MODEL_SERVER_MAX = 32_768;

afterAll(stopAll);

describe('security defaults (echo stack, both fronts)', () => {
  let stack: Stack;
  const fronts: { kind: string; url: string; proc: ManagedProcess }[] = [];
  beforeAll(async () => {
    stack = await startStack({
      languages: ['ko', 'en'],
      handler: 'echo',
      env: { ROUTER_MAX_BODY_BYTES: String(ROUTER_MAX), MAX_REQUEST_SIZE: String(MODEL_SERVER_MAX) },
    });
    fronts.push(...(await startFronts(stack, nginx ? ['builtin', 'nginx'] : ['builtin'], 'front-')));
  });
  afterAll(async () => {
    for (const f of fronts) await f.proc.stop();
    await stack?.stop();
  });

  it('management, metrics, inference and router bind 127.0.0.1 by default (config and .env.example); only the front is public', () => {
    const defaults = loadConfig({}, ROOT);
    for (const a of [
      defaults.modelServer.management,
      defaults.modelServer.metrics,
      defaults.modelServer.inference,
      defaults.router.address,
    ]) {
      expect(a.host).toBe('127.0.0.1');
    }
    expect(defaults.front.host).toBe('0.0.0.0');
    const example = readFileSync(path.join(ROOT, '.env.example'), 'utf8');
    expect(example).toMatch(/^MANAGEMENT_ADDRESS=http:\/\/127\.0\.0\.1:8081$/m);
    expect(example).toMatch(/^METRICS_ADDRESS=http:\/\/127\.0\.0\.1:8082$/m);
    expect(ENV_DEFAULTS.MANAGEMENT_ADDRESS).toBe('http://127.0.0.1:8081');
  });

  it('a loopback-bound management port is unreachable on the machine’s other addresses', async () => {
    const external = Object.values(networkInterfaces())
      .flat()
      .find((i) => i && i.family === 'IPv4' && !i.internal)?.address;
    if (!external) {
      console.warn('security.test: no non-loopback IPv4 address here; reachability from outside is NOT tested');
      return;
    }
    const port = new URL(stack.management).port;
    expect((await send(`http://127.0.0.1:${port}/models`)).status).toBe(200);
    const outside = await send(`http://${external}:${port}/models`, { deadlineMs: 3_000 });
    expect(outside).toMatchObject({ status: 0, kind: 'ECONNREFUSED' });
  });

  it('no front reaches the management or metrics API: every path, method, Host and absolute request target ends at the router', async () => {
    const mgmt = new URL(stack.management);
    const metrics = new URL(stack.metrics);
    const attempts: { method: string; path: string; headers?: Record<string, string>; body?: string }[] = [
      { method: 'GET', path: '/models' },
      { method: 'POST', path: '/models?url=ko&model_name=stolen' },
      { method: 'DELETE', path: '/models/ko' },
      { method: 'PUT', path: '/models/ko?min_worker=0&synchronous=true' },
      { method: 'GET', path: '/metrics' },
      { method: 'GET', path: '/predictions/ko' },
      { method: 'OPTIONS', path: '/' },
      { method: 'GET', path: '/models', headers: { host: mgmt.host } },
      { method: 'DELETE', path: '/models/ko', headers: { host: mgmt.host, 'x-forwarded-host': mgmt.host } },
      { method: 'GET', path: '/%2e%2e/models' },
    ];
    for (const front of fronts) {
      for (const a of attempts) {
        const o = await send(`${front.url}${a.path}`, {
          method: a.method,
          ...(a.headers ? { headers: a.headers } : {}),
        });
        // The router's own 404/405, never a management answer.
        expect([404, 405], `${front.kind} ${a.method} ${a.path}: ${o.status} ${o.body}`).toContain(o.status);
        expect(o.kind).toMatch(/^(ResourceNotFoundException|MethodNotAllowedException)$/);
      }
      // Absolute-form request targets naming the management and metrics ports (proxy-style requests).
      for (const target of [`http://${mgmt.host}/models`, `http://${metrics.host}/metrics`]) {
        const reply = await rawRequest(
          Number(new URL(front.url).port),
          `GET ${target} HTTP/1.1\r\nHost: ${new URL(target).host}\r\nConnection: close\r\n\r\n`,
        );
        expect([400, 404], `${front.kind} ${target}: ${reply.status} ${reply.body}`).toContain(reply.status);
        expect(reply.body).not.toMatch(/"models"|mt_requests_total|# HELP/);
      }
    }
    // Nothing changed behind the fronts: ko is registered, with its worker, and nothing named "stolen" exists.
    const ko = (await (await fetch(`${stack.management}/models/ko`)).json()) as [{ workers: unknown[] }];
    expect(ko[0].workers).toHaveLength(1);
    expect((await fetch(`${stack.management}/models/stolen`)).status).toBe(404);
  });

  it('every port refuses a body over its limit with 413 JSON — declared length and chunked alike', async () => {
    const ports = [
      { name: 'router', url: `${stack.routerUrls[0]}/`, max: ROUTER_MAX },
      ...fronts.map((f) => ({ name: `front (${f.kind})`, url: `${f.url}/`, max: ROUTER_MAX })),
      { name: 'inference', url: `${stack.inference}/predictions/ko`, max: MODEL_SERVER_MAX },
      { name: 'management', url: `${stack.management}/models?url=ko`, max: MODEL_SERVER_MAX },
      { name: 'metrics', url: `${stack.metrics}/metrics`, max: MODEL_SERVER_MAX },
    ];
    for (const p of ports) {
      const big = translateBody('ko', 'x'.repeat(p.max));
      for (const body of [big, Readable.from([Buffer.from(big.slice(0, 1000)), Buffer.from(big.slice(1000))])]) {
        const o = await send(p.url, { body, deadlineMs: 10_000 });
        const what = `${p.name} (${typeof body === 'string' ? 'content-length' : 'chunked'})`;
        expect(o.status, `${what}: ${o.body}`).toBe(413);
        expect(JSON.parse(o.body), what).toEqual({
          code: 413,
          type: 'RequestEntityTooLargeException',
          message: `Request body is larger than ${p.max} bytes.`,
        });
      }
    }
    // At the limit is fine (the router's own limit; the front's equals it).
    const atLimit = translateBody('ko', 'y'.repeat(ROUTER_MAX - translateBody('ko', '').length));
    expect(Buffer.byteLength(atLimit)).toBe(ROUTER_MAX);
    for (const url of [stack.routerUrls[0]!, ...fronts.map((f) => f.url)])
      expect((await send(url, { body: atLimit })).status).toBe(200);
  });

  it('POST /models?url= cannot load anything outside the model store', async () => {
    // A manifest outside the store, and a symlink inside the store that points at it.
    const outside = path.join(stack.dir, 'outside');
    mkdirSync(path.join(outside, 'evil', 'MAR-INF'), { recursive: true });
    writeFileSync(manifestPath(path.join(outside, 'evil')), readFileSync(manifestPath(path.join(stack.store, 'ko'))));
    symlinkSync(path.join(outside, 'evil'), path.join(stack.store, 'evil'));
    const urls = [
      '../outside/evil',
      path.join(outside, 'evil'),
      `file://${path.join(outside, 'evil')}`,
      'http://127.0.0.1:1/evil.mar',
      'https://example.com/ko.mar',
      'ko/../../outside/evil',
      '..',
      '.',
      'evil', // the symlink out of the store
      'evil.mar',
      'ko\\..\\..\\outside',
      '%2e%2e%2foutside',
    ];
    for (const url of urls) {
      const o = await send(
        `${stack.management}/models?url=${encodeURIComponent(url)}&model_name=x${urls.indexOf(url)}`,
        { method: 'POST' },
      );
      expect(o.status, `${url}: ${o.body}`).toBe(400);
      expect(o).toMatchObject({
        kind: 'BadRequestException',
        message: `Parameter url must name an entry of the model store, got: ${url}`,
      });
    }
    const models = (await (await fetch(`${stack.management}/models`)).json()) as { models: { modelName: string }[] };
    expect(models.models.map((m) => m.modelName).sort()).toEqual(['en', 'ko']);
  });

  it.skipIf(!nginx)('nginx shows no version: Server header and its own error bodies', async () => {
    const front = fronts.find((f) => f.kind === 'nginx')!;
    const port = Number(new URL(front.url).port);
    const replies = [
      await rawRequest(
        port,
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${translateBody('ko', 'hi').length}\r\nConnection: close\r\n\r\n${translateBody('ko', 'hi')}`,
      ),
      await rawRequest(
        port,
        `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${ROUTER_MAX + 1}\r\nConnection: close\r\n\r\n`,
      ),
      await rawRequest(port, 'GARBAGE\r\n\r\n'),
      await rawRequest(port, `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`),
    ];
    expect(replies.map((r) => r.status)).toEqual([200, 413, 400, 400]);
    for (const r of replies) {
      expect(r.headers.server).toBe('nginx');
      // x-model-server names the model server that answered (host:port, an address by design), not a version.
      const { 'x-model-server': _modelServer, ...headers } = r.headers;
      expect(JSON.stringify({ ...r, headers })).not.toMatch(/nginx\/\d|\d+\.\d+\.\d+/);
    }
  });
});

describe('token authorization (TOKEN_AUTH=true: generated keys, Bearer, 401 without)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ languages: ['ko'], handler: 'echo', env: { TOKEN_AUTH: 'true' } });
  });
  afterAll(() => stack?.stop());

  const UNAUTHORIZED = {
    status: 401,
    kind: 'InvalidKeyException',
    message: 'Token Authorization failed. Token either incorrect, expired, or not provided correctly',
  };

  it('management and inference answer 401 without a key, with a wrong one, or with the other API’s key', async () => {
    const keys = apiKeys(stack.env);
    expect(statSync(stack.env.KEY_FILE!).mode & 0o777).toBe(0o600);
    const predict = `${stack.inference}/predictions/ko`;
    const body = JSON.stringify({ src_lang: 'en', src_text: 'secret' });
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: 'Bearer wrong' },
      { authorization: `Bearer ${keys.management}` },
      { authorization: keys.inference },
    ]) {
      expect(await send(predict, { body, headers })).toMatchObject(UNAUTHORIZED);
    }
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: `Bearer ${keys.inference}` },
      { authorization: `Basic ${keys.management}` },
    ]) {
      expect(await send(`${stack.management}/models`, { headers })).toMatchObject(UNAUTHORIZED);
    }
    expect(await send(predict, { body, headers: { authorization: `Bearer ${keys.inference}` } })).toMatchObject({
      status: 200,
      body: '{"translated":"secret"}',
    });
    expect(
      (await send(`${stack.management}/models`, { headers: { authorization: `Bearer ${keys.management}` } })).status,
    ).toBe(200);
    // TorchServe leaves health and the API description open.
    expect((await send(`${stack.inference}/ping`)).status).toBe(200);
  });

  it('the router authenticates with the generated inference key — also after a model-server restart rotates it', async () => {
    const router = stack.routerUrls[0]!;
    expect(await send(router, { body: translateBody('ko', 'via router') })).toMatchObject({
      status: 200,
      body: '{"translated":"via router"}',
    });
    const before = apiKeys(stack.env);
    await stack.modelServer.stop();
    await stack.restartModelServer();
    const after = apiKeys(stack.env);
    expect(after.inference).not.toBe(before.inference);
    // 503 + Retry-After until the router's probe has read the restarted host's languages ready (~0.5 s).
    await until('the router to send ko to the restarted model server', async () => {
      const o = await send(router, { body: translateBody('ko', 'rotated') });
      expect([200, 503]).toContain(o.status);
      return o.status === 200;
    });
    expect(await send(router, { body: translateBody('ko', 'rotated') })).toMatchObject({
      status: 200,
      body: '{"translated":"rotated"}',
    });
    // The old key no longer opens anything.
    expect(
      await send(`${stack.inference}/predictions/ko`, {
        body: '{"src_text":"x"}',
        headers: { authorization: `Bearer ${before.inference}` },
      }),
    ).toMatchObject(UNAUTHORIZED);
  });
});
