/**
 * The router's status routes in-process (`app.request`) against a fake model server metrics API that is a real
 * HTTP server: the page, the document passed through, many readers sharing one fetch, an unreachable model
 * server; and the client's Cache-Control reaching the model server with a translation.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorBody } from '../../harness/error-body.js';
import { createRouterApp } from '../app.js';
import { StatusSource } from '../status.js';
import { Upstream } from '../upstream/upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const DOCUMENT = JSON.stringify({
  time: '2026-11-24T12:00:00.000Z',
  models: [{ name: 'ko', queueDepth: 3, cacheHitRatio: 0.5, cacheHits: 4, cacheMisses: 4 }],
  cache: { enabled: true, maxBytes: 1024, bytes: 512, entries: 4 },
});
/** What a stranger may see: whether a sentence was cached before is no business of theirs. */
const PUBLIC_DOCUMENT = JSON.stringify({
  time: '2026-11-24T12:00:00.000Z',
  models: [{ name: 'ko', queueDepth: 3 }],
  cache: { enabled: true },
});

let metrics: Server;
let metricsUrl: string;
let reads = 0;
let fake: FakeModelServer;
const logger = pino({ level: 'silent' });

beforeAll(async () => {
  metrics = createServer((req, res) => {
    if (req.url !== '/status.json') return void res.writeHead(404).end();
    reads += 1;
    // Slow enough that concurrent readers overlap.
    setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end(DOCUMENT), 50);
  });
  await new Promise<void>((resolve) => metrics.listen(0, '127.0.0.1', resolve));
  metricsUrl = `http://127.0.0.1:${(metrics.address() as AddressInfo).port}`;
  fake = await startFakeModelServer();
});
afterAll(async () => {
  await new Promise((resolve) => metrics.close(resolve));
  await fake.close();
});

function router(statusUrl: string, maxAgeMs = 500, cacheCounters = false) {
  const upstream = new Upstream({ url: fake.url, connections: 2, timeoutMs: 5_000 });
  const status = new StatusSource({ url: statusUrl, maxAgeMs, timeoutMs: 1_000, cacheCounters });
  const app = createRouterApp(
    { maxBodyBytes: 4096, languages: ['ko', 'en'], logBodies: false },
    { upstream, logger, status },
  );
  return { app, close: () => Promise.all([upstream.close(), status.close()]) };
}

describe('GET /status', () => {
  it('is the page: one HTML document that reads /status.json and names no other address', async () => {
    const r = router(metricsUrl);
    try {
      const res = await r.app.request('/status');
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/html; charset=UTF-8');
      expect(res.headers.get('x-request-id')).toBeTruthy();
      const html = await res.text();
      expect(html).toContain('<title>mt-serve status</title>');
      expect(html).toContain('fetch("/status.json"');
      expect(html).not.toMatch(/https?:\/\/(?!www\.w3\.org\/2000\/svg)/);
      expect(html).not.toMatch(/:\d{4,5}\b/);
      for (const method of ['POST', 'PUT', 'DELETE']) {
        expect((await r.app.request('/status', { method })).status).toBe(405);
        expect((await r.app.request('/status.json', { method })).status).toBe(405);
      }
    } finally {
      await r.close();
    }
  });
});

describe('GET /status.json', () => {
  it("passes the model server's document through without the cache's counters, one fetch for concurrent readers, reused briefly", async () => {
    const r = router(metricsUrl, 300);
    try {
      reads = 0;
      const answers = await Promise.all(Array.from({ length: 10 }, () => r.app.request('/status.json')));
      for (const res of answers) {
        expect(res.status).toBe(200);
        expect(res.headers.get('content-type')).toBe('application/json');
        expect(res.headers.get('cache-control')).toBe('no-store');
        expect(await res.text()).toBe(PUBLIC_DOCUMENT);
      }
      expect(reads).toBe(1);
      await r.app.request('/status.json');
      expect(reads).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 350));
      await r.app.request('/status.json');
      expect(reads).toBe(2);
    } finally {
      await r.close();
    }
  });

  it('keeps the cache counters with CACHE_DISCLOSE', async () => {
    const r = router(metricsUrl, 0, true);
    try {
      expect(await (await r.app.request('/status.json')).text()).toBe(DOCUMENT);
    } finally {
      await r.close();
    }
  });

  it('answers 502 JSON when the model server does not answer, without its address', async () => {
    const r = router('http://127.0.0.1:1');
    try {
      const res = await r.app.request('/status.json');
      await expectErrorBody(res, 502, 'BadGatewayException', 'Model server status is unavailable.');
    } finally {
      await r.close();
    }
  });
});

describe('Cache-Control', () => {
  it('reaches the model server with the translation (no-cache makes it skip its cache); absent, it is not sent', async () => {
    const r = router(metricsUrl);
    try {
      const post = (headers: Record<string, string>) =>
        r.app.request('/', {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko' }),
        });
      const before = fake.seen.length;
      expect((await post({ 'cache-control': 'no-cache' })).status).toBe(200);
      expect((await post({})).status).toBe(200);
      const [bypass, plain] = fake.seen.slice(before);
      expect(bypass!.headers['cache-control']).toBe('no-cache');
      expect(plain!.headers['cache-control']).toBeUndefined();
    } finally {
      await r.close();
    }
  });
});
