/**
 * The router served for real (@hono/node-server on port 0) in front of a fake model server that is a real HTTP
 * server on port 0, where `en` is held until the test lets it go and every other language answers at once:
 * - a flood of one language does not delay another (each language has its own connections and its own short line);
 * - overload is answered 503 + Retry-After at once, and the router holds no more than its bounds;
 * - after the model server refused at admission, the lane keeps no line for that Retry-After;
 * - a client that disconnects cancels its upstream request (the fake sees the connection close), and one that
 *   disconnects while waiting in the line never reaches the model server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { createAdaptorServer } from '@hono/node-server';
import { pino } from 'pino';
import { Pool } from 'undici';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRouterApp } from '../app.js';
import { Upstream } from '../upstream/upstream.js';
import { until } from '../../harness/polling.js';

const CONNECTIONS = 4;
const QUEUE = 8;
const OVERLOADED_MESSAGE = 'Model en is overloaded: 320 requests wait (expected wait 5100 ms), retry in 2 s.';

interface HeldUpstream {
  url: string;
  /** `en` requests the fake holds, oldest first. */
  held: { req: IncomingMessage; res: ServerResponse; body: string }[];
  /** Bodies of every request that reached the fake, by language. */
  arrived: Map<string, string[]>;
  /** Most `en` requests in flight at the fake at once. */
  maxEnInFlight: number;
  /** `en` requests whose connection closed before they were answered. */
  closedUnanswered: string[];
  releaseAll(): void;
  /** Answer the oldest held `en` request as the model server refuses at admission: 503 OVERLOADED, Retry-After 2. */
  refuseOldest(): void;
  close(): Promise<void>;
}

async function startHeldUpstream(): Promise<HeldUpstream> {
  let inFlight = 0;
  const state: HeldUpstream = {
    url: '',
    held: [],
    arrived: new Map(),
    maxEnInFlight: 0,
    closedUnanswered: [],
    releaseAll: () => {
      for (const { res, body } of state.held.splice(0)) if (!res.destroyed) answer(res, 'en', body);
    },
    refuseOldest: () => {
      const { res } = state.held.shift()!;
      res
        .writeHead(503, {
          'content-type': 'application/json',
          'retry-after': '2',
          'x-error-code': 'OVERLOADED',
          'x-reached-worker': 'false',
        })
        .end(JSON.stringify({ code: 503, type: 'ServiceUnavailableException', message: OVERLOADED_MESSAGE }));
    },
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
  const server: Server = createServer((req, res) => {
    const lang = /^\/predictions\/(\w+)$/.exec(req.url ?? '')?.[1] ?? '?';
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      state.arrived.set(lang, [...(state.arrived.get(lang) ?? []), body]);
      if (lang !== 'en') return answer(res, lang, body);
      inFlight++;
      state.maxEnInFlight = Math.max(state.maxEnInFlight, inFlight);
      res.on('close', () => {
        inFlight--;
        if (!res.writableFinished) state.closedUnanswered.push(body);
      });
      state.held.push({ req, res, body });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return state;
}

function answer(res: ServerResponse, lang: string, body: string): void {
  const text = (JSON.parse(body) as { src_text: string }).src_text;
  res
    .writeHead(200, { 'content-type': 'application/json', 'x-model-name': lang })
    .end(JSON.stringify({ translated: text }));
}

let upstreamServer: HeldUpstream;
let upstream: Upstream;
let router: Server;
let routerUrl: string;

/** A router on port 0 in front of `upstreamUrl`, with its own lanes. */
async function startRouter(upstreamUrl: string): Promise<{ upstream: Upstream; router: Server; url: string }> {
  const upstream = new Upstream({ url: upstreamUrl, connections: CONNECTIONS, queue: QUEUE, timeoutMs: 10_000 });
  const app = createRouterApp(
    { maxBodyBytes: 4096, languages: ['en', 'ko', 'fr'], logBodies: false },
    { upstream, logger: pino({ level: 'silent' }) },
  );
  const router = createAdaptorServer({ fetch: app.fetch }) as Server;
  await new Promise<void>((resolve) => router.listen(0, '127.0.0.1', resolve));
  return { upstream, router, url: `http://127.0.0.1:${(router.address() as AddressInfo).port}` };
}

async function stopRouter(r: { upstream: Upstream; router: Server }): Promise<void> {
  r.router.closeAllConnections();
  await new Promise((resolve) => r.router.close(resolve));
  await r.upstream.close();
}

beforeAll(async () => {
  upstreamServer = await startHeldUpstream();
  ({ upstream, router, url: routerUrl } = await startRouter(upstreamServer.url));
});
afterAll(async () => {
  upstreamServer.releaseAll();
  await stopRouter({ upstream, router });
  await upstreamServer.close();
});
afterEach(async () => {
  upstreamServer.releaseAll();
  await until(
    'en idle',
    () => upstream.stats.en === undefined || upstream.stats.en.active + upstream.stats.en.waiting === 0,
    5_000,
    5,
  );
});

interface Reply {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

async function post(pool: Pool, tgt: string, text: string, signal?: AbortSignal): Promise<Reply> {
  const res = await pool.request({
    method: 'POST',
    path: '/',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ src_lang: 'xx', src_text: text, tgt_lang: tgt }),
    signal,
  });
  return { status: res.statusCode, headers: res.headers, body: await res.body.text() };
}

describe('one lane per target language', () => {
  it('a flood of en does not delay ko or fr; the flood past its bounds is refused 503 + Retry-After at once', async () => {
    const pool = new Pool(routerUrl, { connections: 64 });
    try {
      // 40 en clients: 4 reach the model server, 8 wait in the router, 28 are refused at once.
      const refused: Reply[] = [];
      const flood = Array.from({ length: 40 }, (_, i) =>
        post(pool, 'en', `en ${i}`).then((r) => {
          if (r.status !== 200) refused.push(r);
          return r;
        }),
      );
      await until(
        'the refusals past the connections and the line',
        () => refused.length === 40 - CONNECTIONS - QUEUE,
        5_000,
        5,
      );
      expect(upstreamServer.held).toHaveLength(CONNECTIONS);
      expect(upstream.stats.en).toMatchObject({ active: CONNECTIONS, waiting: QUEUE });
      for (const r of refused) {
        expect(r.status).toBe(503);
        expect(r.headers['retry-after']).toBe('1');
        expect(JSON.parse(r.body)).toEqual({
          code: 503,
          type: 'ServiceUnavailableException',
          message: `Router queue of model en is full (${CONNECTIONS} in flight, ${QUEUE} waiting), retry later.`,
        });
      }

      // While en is stuck, other languages go straight through, many at once.
      const started = performance.now();
      const others = await Promise.all(
        Array.from({ length: 10 }, (_, i) => post(pool, i % 2 ? 'ko' : 'fr', `other ${i}`)),
      );
      expect(performance.now() - started).toBeLessThan(2_000);
      expect(others.map((r) => r.status)).toEqual(Array(10).fill(200));
      expect(upstreamServer.held).toHaveLength(CONNECTIONS);

      // Let en go: every admitted en request is answered, never more than CONNECTIONS at the model server.
      const releaser = setInterval(() => upstreamServer.releaseAll(), 5);
      try {
        const answered = await Promise.all(flood);
        expect(answered.filter((r) => r.status === 200)).toHaveLength(CONNECTIONS + QUEUE);
      } finally {
        clearInterval(releaser);
      }
      expect(upstreamServer.maxEnInFlight).toBe(CONNECTIONS);
    } finally {
      await pool.close();
    }
  });

  it('holds no more than its bounds under 1,000 concurrent clients of one language', async () => {
    const pool = new Pool(routerUrl, { connections: 1_000 });
    try {
      const before = upstream.stats.en?.refused ?? 0;
      let refused = 0;
      const flood = Array.from({ length: 1_000 }, (_, i) =>
        post(pool, 'en', `many ${i}`).then((r) => {
          if (r.status === 503) refused++;
          return r;
        }),
      );
      // Everyone past the bounds is answered while the admitted ones are still held.
      await until(
        'the refusals past the connections and the line',
        () => refused === 1_000 - CONNECTIONS - QUEUE,
        20_000,
        5,
      );
      expect(upstream.stats.en).toMatchObject({ active: CONNECTIONS, waiting: QUEUE });
      expect(upstream.stats.en!.refused - before).toBe(refused);
      expect(upstreamServer.held).toHaveLength(CONNECTIONS);
      const releaser = setInterval(() => upstreamServer.releaseAll(), 5);
      try {
        const statuses = (await Promise.all(flood)).map((r) => r.status);
        expect(statuses.filter((s) => s === 200)).toHaveLength(CONNECTIONS + QUEUE);
        expect(statuses.filter((s) => s !== 200 && s !== 503)).toEqual([]);
      } finally {
        clearInterval(releaser);
      }
    } finally {
      await pool.close();
    }
  });
});

/**
 * Past the refusal's 2 s Retry-After, every connection held by an admitted job: a line would only hold a request until
 * one ends, so it is refused at once and told to come back in a second.
 */
async function expectNoLinePastRetryAfter(pool: Pool): Promise<void> {
  await sleep(2_100);
  const started = performance.now();
  const late = await post(pool, 'en', 'late');
  expect(performance.now() - started).toBeLessThan(500);
  expect([late.status, late.headers['retry-after']]).toEqual([503, '1']);
}

/** The lane admits again: a request finding every connection busy waits in the line, and is answered. */
async function expectLineAgain(upstream: Upstream, pool: Pool): Promise<void> {
  const again = Array.from({ length: CONNECTIONS + 1 }, (_, i) => post(pool, 'en', `again ${i}`));
  await until('one waits in the line', () => upstream.stats.en?.waiting === 1, 5_000, 5);
  upstreamServer.releaseAll();
  await until('the waiter reaches the model server', () => upstreamServer.held.length === 1, 5_000, 5);
  upstreamServer.releaseAll();
  expect((await Promise.all(again)).map((r) => r.status)).toEqual(Array(CONNECTIONS + 1).fill(200));
}

describe('a lane whose model server refuses at admission', () => {
  /**
   * `test` on a router of its own (a refusal closes its lane's line, which the other tests must not inherit), with
   * every `en` connection of it held at the model server by `held`.
   */
  async function withLaneHeld(
    test: (own: { upstream: Upstream; pool: Pool; held: Promise<Reply>[] }) => Promise<void>,
  ): Promise<void> {
    const own = await startRouter(upstreamServer.url);
    const pool = new Pool(own.url, { connections: 64 });
    try {
      const held = Array.from({ length: CONNECTIONS }, (_, i) => post(pool, 'en', `held ${i}`));
      await until('the connections busy', () => upstreamServer.held.length === CONNECTIONS, 5_000, 5);
      await test({ upstream: own.upstream, pool, held });
    } finally {
      await pool.close();
      await stopRouter(own);
    }
  }

  it('keeps no line for its Retry-After: the waiters and those finding no free connection get that refusal at once', async () => {
    await withLaneHeld(async ({ upstream, pool, held }) => {
      const waiters = Array.from({ length: 3 }, (_, i) => post(pool, 'en', `waiting ${i}`));
      await until('the line', () => upstream.stats.en?.waiting === 3, 5_000, 5);

      const started = performance.now();
      upstreamServer.refuseOldest();
      const refusal = {
        code: 503,
        type: 'ServiceUnavailableException',
        message: OVERLOADED_MESSAGE,
      };
      const first = await held[0]!;
      expect([first.status, first.headers['retry-after'], JSON.parse(first.body)]).toEqual([503, '2', refusal]);
      // The line is refused with the model server's answer instead of waiting for a connection, and never sent.
      for (const w of await Promise.all(waiters)) {
        expect([w.status, w.headers['retry-after'], JSON.parse(w.body)]).toEqual([503, '2', refusal]);
      }
      expect(performance.now() - started).toBeLessThan(1_000);
      expect(upstreamServer.arrived.get('en')!.filter((b) => b.includes('waiting'))).toEqual([]);

      // A request that finds a free connection still goes to the model server; the next finds none and is refused.
      const through = post(pool, 'en', 'through');
      await until('through at the model server', () => upstreamServer.held.length === CONNECTIONS, 5_000, 5);
      const next = await post(pool, 'en', 'next');
      expect([next.status, next.headers['retry-after'], JSON.parse(next.body)]).toEqual([503, '2', refusal]);
      expect(upstream.stats.en).toMatchObject({ active: CONNECTIONS, waiting: 0 });
      upstreamServer.releaseAll();
      expect((await through).status).toBe(200);
      expect((await Promise.all(held.slice(1))).map((r) => r.status)).toEqual(Array(CONNECTIONS - 1).fill(200));
    });
  });
  it('stays closed past the Retry-After until the model server answers on the lane again, then lines up again', async () => {
    await withLaneHeld(async ({ upstream, pool, held }) => {
      upstreamServer.refuseOldest();
      expect((await held[0]!).status).toBe(503);
      const refilled = post(pool, 'en', 'refill');
      await until('the connections busy again', () => upstreamServer.held.length === CONNECTIONS, 5_000, 5);
      // With no answer since, the connections are still held by admitted jobs.
      await expectNoLinePastRetryAfter(pool);
      // An answer on the lane: it admits again, so a request finding no free connection waits in the line.
      upstreamServer.releaseAll();
      expect((await Promise.all([...held.slice(1), refilled])).map((r) => r.status)).toEqual(
        Array(CONNECTIONS).fill(200),
      );
      await expectLineAgain(upstream, pool);
    });
  });

  it('stays closed while only jobs admitted before the refusal are answered', async () => {
    await withLaneHeld(async ({ upstream, pool, held }) => {
      upstreamServer.refuseOldest();
      expect((await held[0]!).status).toBe(503);
      // Jobs admitted before the refusal finish (under sustained overload one batch does, every batch), and their
      // connections fill again with requests sent after it: those answers say nothing about admission now.
      upstreamServer.releaseAll();
      expect((await Promise.all(held.slice(1))).map((r) => r.status)).toEqual(Array(CONNECTIONS - 1).fill(200));
      const refilled = Array.from({ length: CONNECTIONS }, (_, i) => post(pool, 'en', `refill ${i}`));
      await until('the connections busy again', () => upstreamServer.held.length === CONNECTIONS, 5_000, 5);
      await expectNoLinePastRetryAfter(pool);
      // Answers to requests sent after the refusal: it admits again, and a request finding no free connection waits.
      upstreamServer.releaseAll();
      expect((await Promise.all(refilled)).map((r) => r.status)).toEqual(Array(CONNECTIONS).fill(200));
      await expectLineAgain(upstream, pool);
    });
  });
});

describe('a client that disconnects cancels its upstream request', () => {
  it('in flight: the model server sees its connection close at once', async () => {
    const pool = new Pool(routerUrl, { connections: 1 });
    const abort = new AbortController();
    try {
      const request = post(pool, 'en', 'abandoned in flight', abort.signal).catch((err: unknown) => err);
      await until(
        'the request held upstream',
        () => upstreamServer.held.some((h) => h.body.includes('abandoned in flight')),
        5_000,
        5,
      );
      const abortedAt = performance.now();
      abort.abort();
      await until(
        'the upstream to see it closed unanswered',
        () => upstreamServer.closedUnanswered.some((b) => b.includes('abandoned in flight')),
        5_000,
        5,
      );
      expect(performance.now() - abortedAt).toBeLessThan(1_000);
      expect(await request).toMatchObject({ name: 'AbortError' });
      await until('no en request active', () => upstream.stats.en!.active === 0, 5_000, 5);
    } finally {
      await pool.destroy();
    }
  });

  it('waiting in the line: it leaves the line and never reaches the model server', async () => {
    const pool = new Pool(routerUrl, { connections: 8 });
    const abort = new AbortController();
    try {
      const busy = Array.from({ length: CONNECTIONS }, (_, i) => post(pool, 'en', `busy ${i}`));
      await until('every connection held', () => upstreamServer.held.length === CONNECTIONS, 5_000, 5);
      const waiting = post(pool, 'en', 'abandoned waiting', abort.signal).catch((err: unknown) => err);
      await until('one en request waiting', () => upstream.stats.en!.waiting === 1, 5_000, 5);
      abort.abort();
      await until('no en request waiting', () => upstream.stats.en!.waiting === 0, 5_000, 5);
      expect(await waiting).toMatchObject({ name: 'AbortError' });
      const releaser = setInterval(() => upstreamServer.releaseAll(), 5);
      try {
        await Promise.all(busy);
      } finally {
        clearInterval(releaser);
      }
      expect(upstreamServer.arrived.get('en')!.some((b) => b.includes('abandoned waiting'))).toBe(false);
    } finally {
      await pool.destroy();
    }
  });
});
