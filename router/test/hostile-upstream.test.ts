/**
 * A model server that misbehaves on purpose (router/test/fake-model-server.ts) cannot hurt the router: its answer
 * body is read up to a bound, a 200 must be JSON, one deadline covers the whole answer however slowly it trickles,
 * and a redirect is the model server's failure (502), never the client's. The router app in-process, with the real
 * undici upstream.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRouterApp } from '../app.js';
import { Upstream } from '../upstream/upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const MAX_RESPONSE_BYTES = 256 * 1024;
const TIMEOUT_MS = 1_000;

let fake: FakeModelServer;
let upstream: Upstream;
let app: ReturnType<typeof createRouterApp>;

beforeAll(async () => {
  fake = await startFakeModelServer();
  upstream = new Upstream({
    url: fake.url,
    connections: 4,
    timeoutMs: TIMEOUT_MS,
    maxResponseBytes: MAX_RESPONSE_BYTES,
  });
  app = createRouterApp(
    { maxBodyBytes: 4096, languages: ['ko'], logBodies: false },
    { upstream, logger: pino({ level: 'silent' }) },
  );
});
afterAll(async () => {
  await upstream.close();
  await fake.close();
});

const send = async (directive: string) => {
  const res = await app.request('/', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ src_lang: 'en', src_text: directive, tgt_lang: 'ko' }),
  });
  return { status: res.status, code: res.headers.get('x-error-code'), body: (await res.json()) as { message: string } };
};

describe('a hostile model server', () => {
  it('a 64 MiB answer is cut at the bound: 502, and the router stops reading it', async () => {
    const before = fake.bodies.length;
    const res = await send(`!huge ${64 * 1024 * 1024}`);
    expect(res).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE' });
    expect(res.body.message).toBe(
      `Model server answered more than ${MAX_RESPONSE_BYTES} bytes (ROUTER_MAX_UPSTREAM_BYTES).`,
    );
    await expect.poll(() => fake.bodies.slice(before)).toEqual(['closed']);
  });

  it('an answer declaring more than the bound is refused before reading it', async () => {
    const res = await send(`!huge-declared ${MAX_RESPONSE_BYTES + 1}`);
    expect(res).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE' });
  });

  it('a 200 that is not JSON, or does not parse, is a 502, never passed on', async () => {
    for (const directive of ['!html', '!badjson']) {
      const res = await send(directive);
      expect(res).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE' });
      expect(res.body.message).toBe('Model server answered 200 with a body that is not JSON.');
    }
  });

  it('a body sent a byte at a time cannot outlive the deadline: 504, however often a byte comes', async () => {
    const started = performance.now();
    // 41 bytes, one every 200 ms: 8 s to send whole, each byte well within any per-chunk timeout.
    const res = await send('!drip 200');
    expect(res).toMatchObject({ status: 504, code: 'REQUEST_TIMEOUT' });
    expect(performance.now() - started).toBeLessThan(6_000);
  });

  it('a redirect is the model server failing (502), not a client error, and is not followed', async () => {
    const res = await send('!redirect');
    expect(res).toMatchObject({ status: 502, code: 'UPSTREAM_UNAVAILABLE' });
    expect(res.body.message).toBe('Model server answered a redirect (302).');
  });

  it('still translates after all that', async () => {
    const res = await app.request('/', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ src_lang: 'en', src_text: 'abc', tgt_lang: 'ko' }),
    });
    expect(await res.json()).toEqual({ translated: 'ko:cba' });
  });
});
