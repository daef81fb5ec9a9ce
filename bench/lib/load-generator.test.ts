import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { runClosedLoop, type ClosedLoopOptions, type LoadResult } from './load-generator.js';

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;

/** A real HTTP server on port 0 that tracks how many requests it holds at once. */
async function startServer(handler: Handler) {
  const state = { inFlight: 0, maxInFlight: 0, received: 0 };
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c));
    req.on('end', () => {
      state.received++;
      state.inFlight++;
      state.maxInFlight = Math.max(state.maxInFlight, state.inFlight);
      res.on('close', () => state.inFlight--);
      handler(req, res, body);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  servers.push(server);
  return { origin: `http://127.0.0.1:${port}`, state };
}

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

const json = (res: ServerResponse, status: number, value: unknown) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(value));
};

describe('runClosedLoop', () => {
  it('sends exactly the requested count, never more than `concurrency` at once, and records each answer', async () => {
    const { origin, state } = await startServer((_req, res, body) =>
      setTimeout(() => json(res, 200, { echo: JSON.parse(body) }), 5),
    );
    const result = await runClosedLoop({
      origin,
      concurrency: 4,
      requests: 40,
      request: (seq) => ({ path: '/', body: JSON.stringify({ seq }), units: 2 }),
    });
    expect(result.completed).toBe(40);
    expect(result.ok).toBe(40);
    expect(result.failed).toBe(0);
    expect(state.received).toBe(40);
    expect(state.maxInFlight).toBe(4);
    expect(new Set(result.records.map((r) => r.seq)).size).toBe(40);
    expect(result.records.every((r) => r.status === 200 && r.bytes > 0 && r.latencyMs >= 4)).toBe(true);
    expect(result.unitsPerS).toBeCloseTo(result.requestsPerS * 2, 6);
    expect(result.latency.count).toBe(40);
    expect(result.latency.p50).toBeGreaterThanOrEqual(4);
    expect(result.latency.p99).toBeGreaterThanOrEqual(result.latency.p50);
  });

  it('tallies failures by status, by network error, and by a failed body check', async () => {
    let n = 0;
    const { origin } = await startServer((_req, res) => {
      const i = n++;
      if (i % 4 === 1) json(res, 503, { code: 503 });
      else if (i % 4 === 2) res.socket?.destroy();
      else if (i % 4 === 3) json(res, 200, { wrong: true });
      else json(res, 200, { translated: 'x' });
    });
    const result = await runClosedLoop({
      origin,
      concurrency: 1,
      requests: 8,
      request: () => ({ path: '/', body: '{}' }),
      check: (status, body) => {
        if (status !== 200) return String(status);
        return 'translated' in JSON.parse(body.toString()) ? undefined : 'bad-body';
      },
    });
    expect(result.completed).toBe(8);
    expect(result.ok).toBe(2);
    expect(result.errorsByStatus['503']).toBe(2);
    expect(result.errorsByStatus['200 bad-body']).toBe(2);
    const network = Object.entries(result.errorsByStatus).filter(([k]) => !/^\d/.test(k));
    expect(network.reduce((s, [, v]) => s + v, 0)).toBe(2);
    expect(result.records.filter((r) => r.status === 0)).toHaveLength(2);
  });

  it('measures a window after the warm-up and counts only answers inside it', async () => {
    const { origin } = await startServer((_req, res) => setTimeout(() => json(res, 200, {}), 10));
    const result = await runClosedLoop({
      origin,
      concurrency: 3,
      warmupMs: 100,
      minWindowMs: 300,
      request: () => ({ path: '/', body: '{}' }),
    });
    expect(result.truncated).toBe(false);
    expect(result.warmupMs).toBeGreaterThanOrEqual(100);
    expect(result.windowMs).toBeGreaterThanOrEqual(300);
    expect(result.windowMs).toBeLessThan(1_000);
    for (const r of result.records) {
      expect(r.endMs).toBeGreaterThanOrEqual(result.warmupMs);
      expect(r.endMs).toBeLessThanOrEqual(result.warmupMs + result.windowMs);
    }
    // 3 clients, ≥10 ms each: at most 300 requests/s; a loaded machine may give much less, never more.
    expect(result.requestsPerS).toBeLessThanOrEqual(300);
    expect(result.requestsPerS).toBeGreaterThan(10);
  });

  /**
   * A closed loop of 8 clients against a processor-sharing server: it holds every request and answers all 8 together,
   * on a tick every 150 ms once all have arrived (so a burst never splits a round, however late a client's request
   * comes in).
   */
  async function burstRun(window: Pick<ClosedLoopOptions, 'minWindowMs' | 'minWindowCompletions' | 'wholeRounds'>) {
    const held: ServerResponse[] = [];
    const { origin } = await startServer((_req, res) => held.push(res));
    const timer = setInterval(() => {
      if (held.length < 8) return;
      for (const res of held.splice(0)) json(res, 200, {});
    }, 150);
    try {
      return await runClosedLoop({
        origin,
        concurrency: 8,
        warmupPerClient: 1,
        request: () => ({ path: '/', body: '{}' }),
        ...window,
      });
    } finally {
      clearInterval(timer);
    }
  }

  /** The window ends at the moment of its last answer (not on a tick after it). */
  function expectEndsWithAnswer(result: LoadResult): void {
    const lastAnswer = Math.max(...result.records.map((r) => r.endMs));
    expect(result.warmupMs + result.windowMs).toBeCloseTo(lastAnswer, 6);
  }

  it('spans whole cycles of a server that answers everything in bursts', async () => {
    const result = await burstRun({ minWindowMs: 1, minWindowCompletions: 16 });
    // The window opens right after one burst and closes with the second burst after it: two cycles, in which every
    // client was answered exactly twice, ending at its last answer. A window cut mid-cycle would hold part of a
    // burst (some clients once or three times) or end after its last answer. (Not a duration or a rate against
    // the 150 ms period: how fast this process reads a burst's 8 answers under load moves both edges by tens of ms.)
    expect(result.completed).toBe(16);
    const perClient = new Map<number, number>();
    for (const r of result.records) perClient.set(r.client, (perClient.get(r.client) ?? 0) + 1);
    expect([...perClient.values()]).toEqual(Array(8).fill(2));
    expectEndsWithAnswer(result);
  });

  it('with wholeRounds, ends a window longer than a cycle with a burst, not on a tick between bursts', async () => {
    // The window must last 400 ms, 2.67 cycles: ended on the time condition it would close ~100 ms after its last
    // burst and spread two bursts over 400 ms (a rate 20% low). It ends with the answers of a whole round instead.
    const result = await burstRun({ minWindowMs: 400, minWindowCompletions: 8, wholeRounds: true });
    expect(result.windowMs).toBeGreaterThanOrEqual(400);
    expect(result.completed % 8).toBe(0);
    expectEndsWithAnswer(result);
  });

  it('drains in-flight requests when asked, so the server is idle when the run resolves', async () => {
    const { origin, state } = await startServer((_req, res) => setTimeout(() => json(res, 200, {}), 40));
    const result = await runClosedLoop({
      origin,
      concurrency: 5,
      minWindowMs: 100,
      onWindowEnd: 'drain',
      request: () => ({ path: '/', body: '{}' }),
    });
    expect(result.ok).toBeGreaterThan(0);
    expect(state.inFlight).toBe(0);
  });

  it('aborts in-flight requests at the end of the window by default, and stops on an outer abort', async () => {
    const { origin } = await startServer(() => undefined); // never answers
    const outer = new AbortController();
    // Armed by the first request, so the 200 ms fall inside the run's own clock however late a loaded machine starts it.
    let armed = false;
    const result = await runClosedLoop({
      origin,
      concurrency: 2,
      minWindowMs: 60_000,
      request: () => {
        if (!armed) setTimeout(() => outer.abort(), 200);
        armed = true;
        return { path: '/' };
      },
      signal: outer.signal,
    });
    expect(result.truncated).toBe(true);
    expect(result.completed).toBe(0);
    expect(Number.isNaN(result.latency.p50)).toBe(true);
    // Nothing answered: only a bound remains — at most 2 requests in ~0.2 s.
    expect(result.answeredTotal).toBe(0);
    expect(result.elapsedMs).toBeGreaterThanOrEqual(190);
    expect(result.requestsPerSUpperBound).toBeCloseTo(2 / (result.elapsedMs / 1000), 6);
  });

  it('rejects contradictory bounds', async () => {
    await expect(
      runClosedLoop({ origin: 'http://127.0.0.1:1', concurrency: 1, request: () => ({ path: '/' }) }),
    ).rejects.toThrow(/exactly one/);
    await expect(
      runClosedLoop({ origin: 'http://127.0.0.1:1', concurrency: 0, requests: 1, request: () => ({ path: '/' }) }),
    ).rejects.toThrow(/concurrency/);
  });
});
