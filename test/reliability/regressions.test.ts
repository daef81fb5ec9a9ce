/**
 * Regression tests for the bugs the reliability drills found, one `describe` per bug, each named after it. They
 * run in-process where the bug lived in-process (fast, exact); the drills in this folder cover the same paths
 * end to end.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { answerClientErrors } from '../../common/client-error.js';
import { ServeError } from '../../common/errors.js';
import { createLogger } from '../../common/logger.js';
import { createRequestParser } from '../../common/translation-contract.js';
import { findNginx, spawnNginx, writeNginxConfig } from '../../front/nginx.js';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { BatchQueue } from '../../model-server/wlm/batch-queue.js';
import { Job } from '../../model-server/wlm/job.js';
import { expectErrorBody } from '../../harness/error-body.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { TranslationHandler, type TranslationInput } from '../../model-server/worker/handlers/translation.js';
import { createRouterApp } from '../../router/app.js';
import { Upstream } from '../../router/upstream/upstream.js';
import { createServer, type Socket } from 'node:net';
import { freePort } from '../../harness/ports.js';
import { stopAll } from '../../harness/process-registry.js';
import { ROOT } from '../../harness/processes.js';
import { until } from '../../harness/polling.js';
import { send } from '../../harness/load.js';
import { startFront } from '../../harness/stack.js';
import { rawRequest } from '../../harness/raw-http.js';

const log = createLogger('test', 'silent');
const invalidUtf8 = Buffer.concat([
  Buffer.from('{"src_lang":"en","src_text":"caf'),
  Buffer.from([0xc3, 0x28]),
  Buffer.from('","tgt_lang":"ko"}'),
]);
const job = (model = 'ko') =>
  new Job({ id: `j-${Math.random()}`, model, version: '1.0', body: {}, responseTimeoutMs: 60_000 });

describe('bug: an array larger than the whole job queue was answered 503 + Retry-After, though no retry can succeed', () => {
  it('refuses it with 413 naming the count and the capacity; 503 stays for a queue that is full right now', () => {
    const queue = new BatchQueue(4);
    const tooMany = [job(), job(), job(), job(), job()];
    expect(() => queue.enqueue(tooMany)).toThrow(
      expect.objectContaining({
        code: 'PAYLOAD_TOO_LARGE',
        status: 413,
        message: 'Request has 5 texts; the job queue of model ko holds at most 4: split it into smaller requests.',
        retryAfterS: undefined,
      }),
    );
    const fits = [job(), job(), job()];
    queue.enqueue(fits);
    const later = [job(), job()];
    expect(() => queue.enqueue(later)).toThrow(expect.objectContaining({ code: 'QUEUE_FULL', retryAfterS: 1 }));
    for (const j of [...tooMany, ...fits, ...later]) j.reject(new ServeError('SHUTTING_DOWN'));
  });
});

describe('bug: a body of invalid UTF-8 was decoded with U+FFFD in place of the bad bytes and translated', () => {
  it('the router answers 400 "not valid UTF-8" without calling the model server', async () => {
    // Nothing listens on this port: the request must be refused before the upstream is tried.
    const upstream = new Upstream({ url: `http://127.0.0.1:${await freePort()}`, connections: 1, timeoutMs: 1_000 });
    const app = createRouterApp({ maxBodyBytes: 4096, languages: ['ko'], logBodies: false }, { upstream, logger: log });
    const res = await app.request('/', {
      method: 'POST',
      body: invalidUtf8,
      headers: { 'content-type': 'application/json' },
    });
    await expectErrorBody(res, 400, 'BadRequestException', 'Request body is not valid UTF-8.');
    await upstream.close();
  });

  it('the model server inference API answers 400 "not valid UTF-8"', async () => {
    const t: TestServer = await startTestServer();
    try {
      expect((await call(`${t.management}/models?url=echo`, { method: 'POST' })).status).toBe(200);
      const res = await fetch(`${t.inference}/predictions/echo`, { method: 'POST', body: invalidUtf8 });
      await expectErrorBody(res, 400, 'BadRequestException', 'Request body is not valid UTF-8.');
    } finally {
      await t.close();
    }
  });
});

describe('bug: the translation handler translated empty texts and silently truncated texts longer than the model reads', () => {
  let dir: string;
  const handler = new TranslationHandler();
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-regression-tiny-'));
    makeDemoModel('tiny', dir);
    await handler.initialize({
      modelDir: dir,
      device: { kind: 'cpu' },
      options: { intraOpThreads: 1, numBeams: 1, maxNewTokens: 8 },
      log,
    });
  });
  afterAll(async () => {
    await handler.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const prepare = (text: string) => () => handler.preprocess({ id: 'x', model: 'ko', body: { srcLang: 'en', text } });

  it('refuses empty and whitespace-only texts with 400 at the edge, so the handler never gets one', () => {
    for (const text of ['', '  \n\t', '\u3000']) {
      expect(() => createRequestParser()({ src_lang: 'en', src_text: text })).toThrow(
        expect.objectContaining({ code: 'BAD_REQUEST', message: 'Field "src_text" is empty.' }),
      );
    }
  });

  it('a text longer than the model reads is split into parts that fit and translated whole, never cut', async () => {
    // The tiny model reads 128 tokens; this is several windows long and has no sentence end to split at.
    const text = Array.from({ length: 400 }, (_, i) => `word${i % 7}`).join(' ');
    const input: TranslationInput = await prepare(text)();
    expect(input.rows.length).toBeGreaterThan(2);
    expect(input.rows.every((row) => !row.truncated)).toBe(true);
    expect(input.parts!.pieces.join(' ')).toBe(text);
    const answers: unknown[] = [];
    await handler.inference([input], (_, result) => answers.push(result));
    expect(answers).toHaveLength(1);
    expect(answers[0]).toMatchObject({ translated: expect.any(String) });
    // A text that fits is one row, as before.
    expect((await prepare('a short sentence.')()).rows).toHaveLength(1);
  });
});

describe('bug: a request the HTTP parser rejects got a bare 400/431 with no body from the router and the model server', () => {
  let server: http.Server;
  let port: number;
  beforeAll(async () => {
    server = http.createServer((_req, res) => res.end('{}'));
    answerClientErrors(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it.each([
    ['garbage request line', 'HELLO\r\n\r\n', 'Malformed HTTP request: invalid method.'],
    [
      'oversized headers',
      `GET / HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(20_000)}\r\n\r\n`,
      'Malformed HTTP request: the request headers are too large.',
    ],
    [
      'bad Content-Length',
      'POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ten\r\n\r\n',
      'Malformed HTTP request: invalid Content-Length header.',
    ],
  ])('%s → JSON 400 naming it, connection closed', async (_name, bytes, message) => {
    const reply = await rawRequest(port, bytes);
    expect(reply.status).toBe(400);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.headers.connection).toBe('close');
    expect(JSON.parse(reply.body)).toEqual({ code: 400, type: 'BadRequestException', message });
  });
});

const nginx = findNginx(process.env);
describe.skipIf(!nginx)(
  'bug: nginx answered an unparseable request line with an HTML 500, and oversized headers or URIs with HTML pages',
  () => {
    let dir: string;
    let port: number;
    let stopNginx: () => Promise<void>;
    beforeAll(async () => {
      dir = mkdtempSync(path.join(tmpdir(), 'mt-regression-nginx-'));
      port = await freePort();
      // The router is never reached by these requests: nginx answers them itself.
      const files = writeNginxConfig(path.join(ROOT, 'nginx/nginx.conf'), {
        listen: { host: '127.0.0.1', port },
        router: { host: '127.0.0.1', port: await freePort() },
        maxBodyBytes: 4096,
        runDir: path.join(dir, 'run'),
        logDir: path.join(dir, 'logs'),
      });
      const child = spawnNginx(nginx!, files);
      const exited = new Promise((resolve) => child.once('exit', resolve));
      stopNginx = async () => {
        child.kill('SIGTERM');
        await exited;
      };
      await until('nginx to listen', () =>
        rawRequest(port, 'GET /_mt_error/400 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n', 1_000).then(
          (r) => r.status === 400,
          () => false,
        ),
      );
    });
    afterAll(async () => {
      await stopNginx?.();
      rmSync(dir, { recursive: true, force: true });
    });

    it.each([
      ['unparseable request line', 'HELLO THERE\r\n\r\n'],
      ['oversized header (494)', `GET / HTTP/1.1\r\nHost: x\r\nX: ${'a'.repeat(20_000)}\r\nConnection: close\r\n\r\n`],
      ['URI too long (414)', `GET /${'a'.repeat(20_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`],
      [
        'unknown transfer coding (501)',
        'POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\nConnection: close\r\n\r\n',
      ],
    ])('%s → the front’s JSON 400, no version anywhere', async (_name, bytes) => {
      const reply = await rawRequest(port, bytes);
      expect(reply.status).toBe(400);
      expect(JSON.parse(reply.body)).toEqual({
        code: 400,
        type: 'BadRequestException',
        message: 'Malformed HTTP request.',
      });
      expect(reply.headers.server).toBe('nginx');
    });
  },
);

describe('bug: a request lost with a killed router instance hung at the front for 24 hours (the seed’s proxy timeout)', () => {
  // A "router" that accepts connections and never answers: what the cluster master leaves behind when it was
  // handing a connection to an instance that died (Node's round-robin handoff never closes it).
  const sockets = new Set<Socket>();
  const blackHole = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
  });
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-regression-front-'));
    mkdirSync(path.join(dir, 'logs'));
    await new Promise<void>((resolve) => blackHole.listen(0, '127.0.0.1', resolve));
  });
  afterAll(async () => {
    await stopAll();
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => blackHole.close(() => resolve()));
    rmSync(dir, { recursive: true, force: true });
  });

  it('both fronts answer 504 JSON once the router’s own deadline and the front’s slack have passed', async () => {
    const routerUrl = `http://127.0.0.1:${(blackHole.address() as AddressInfo).port}`;
    // RESPONSE_TIMEOUT_S=1: the router's deadline is 1 + 1 s (ROUTER_TIMEOUT_SLACK_MS); with 1 s of slack the fronts
    // give up after 3 s (whole seconds, as nginx rounds its proxy_read_timeout up to them).
    const env = {
      LOG_LEVEL: 'warn',
      LOG_DIR: path.join(dir, 'logs'),
      RESPONSE_TIMEOUT_S: '1',
      ROUTER_TIMEOUT_SLACK_MS: '1000',
      FRONT_TIMEOUT_SLACK_MS: '1000',
    };
    const kinds = nginx ? (['builtin', 'nginx'] as const) : (['builtin'] as const);
    const replies = await Promise.all(
      kinds.map(async (kind) => {
        const front = await startFront({ dir, env, routerUrl, kind, name: `front-${kind}` });
        return send(front.url, { body: '{"src_lang":"en","src_text":"hi","tgt_lang":"ko"}', deadlineMs: 40_000 });
      }),
    );
    for (const reply of replies) {
      expect(reply).toMatchObject({
        status: 504,
        kind: 'RequestTimeoutException',
        message: 'Router did not answer in time.',
      });
      // Before its deadline no 504; well before the 16 s the default slacks would give.
      expect(reply.latencyMs).toBeGreaterThanOrEqual(3_000);
      expect(reply.latencyMs).toBeLessThan(9_000);
    }
  }, 60_000);
});
