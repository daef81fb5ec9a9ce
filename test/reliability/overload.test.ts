/**
 * Issue 6.3 — overload far beyond capacity, with real processes (router → model server → a slow worker). The
 * model serves about 80 texts/s (batches of 4, 100 ms each, 2 in flight); 300 clients ask as fast as they can.
 * The queue bound must hold (the excess gets 503 + Retry-After at once), every accepted job must be answered,
 * the latency of accepted jobs must stay bounded by the queue's length, memory must stay flat, and the stack
 * must serve normally as soon as the load drops. Every request is tallied; unanswered must be 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { drive, send } from '../../harness/load.js';
import { statusBytes } from '../../harness/proc-tree.js';
import { stopAll } from '../../harness/process-registry.js';
import { startStack, translateBody, type Stack } from '../../harness/stack.js';

const QUEUE = 32;
const BATCH = 4;
const BATCH_MS = 100;

afterAll(stopAll);

describe('overload far beyond capacity (300 clients against ~80 texts/s)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      languages: ['ko', 'en'],
      handler: 'echo',
      faults: { ko: `slow:${BATCH_MS}`, en: `slow:${BATCH_MS}` },
      env: { JOB_QUEUE_SIZE: String(QUEUE) },
      register: { batchSize: BATCH, maxBatchDelayMs: 5, responseTimeoutS: 30 },
    });
  });
  afterAll(() => stack?.stop());

  it('queue bound holds (503 + Retry-After), every accepted job is answered in bounded time, memory stays flat, then it recovers', async () => {
    const router = stack.routerUrls[0]!;
    const pids = { modelServer: stack.modelServer.pid, router: stack.routers[0]!.pid };
    /** 300 clients as fast as they can for 4 s, with the peak RSS of each process sampled every 100 ms meanwhile. */
    const burst = async (label: string) => {
      const peak = { modelServer: 0, router: 0 };
      const sample = () => {
        peak.modelServer = Math.max(peak.modelServer, statusBytes(pids.modelServer, 'VmRSS'));
        peak.router = Math.max(peak.router, statusBytes(pids.router, 'VmRSS'));
      };
      sample();
      const sampler = setInterval(sample, 100);
      const started = performance.now();
      const tally = await drive({
        url: () => router,
        body: (i) => translateBody(i % 4 === 0 ? 'en' : 'ko', `${label} ${i}`),
        concurrency: 300,
        connections: 300,
        signal: AbortSignal.timeout(4_000),
        deadlineMs: 20_000,
      });
      clearInterval(sampler);
      sample();
      return { tally, peak, elapsedS: (performance.now() - started) / 1000 };
    };
    // Warm up: the first tens of thousands of requests a process takes grow its V8 heap to the size its collector
    // then works in (the router's peak RSS over eight bursts like the measured one: 192, 257, 261, 262, 259, 269, 252,
    // 260 MiB), a price of the load's rate paid once. What requests leave behind is what the bound below is for, so
    // the measured burst's peak is compared with the peak of the burst before it, once that growth is done: a point
    // sample between bursts could land anywhere from its collector's low to its high (up to 70 MiB apart).
    await drive({ url: () => router, body: (i) => translateBody('ko', `warm ${i}`), concurrency: 8, count: 40 });
    await burst('warm burst');
    const { peak: baseline } = await burst('warm burst');

    let maxDepth = 0;
    let stopWatching = false;
    const depthWatch = (async () => {
      for (;;) {
        const res = await fetch(`${stack.management}/models/ko`).catch(() => undefined);
        if (!res) return;
        const [d] = (await res.json()) as [{ jobQueueStatus: { pendingRequests: number } }];
        maxDepth = Math.max(maxDepth, d.jobQueueStatus.pendingRequests);
        if (stopWatching) return;
        // The sampling period of the depth watch during the burst, not a wait for a condition.
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const { tally, peak, elapsedS } = await burst('burst');
    stopWatching = true;
    await depthWatch;
    const grownMiB = (key: keyof typeof peak) => ((peak[key] - baseline[key]) / 2 ** 20).toFixed(1);
    console.info(
      `overload: ${tally} in ${elapsedS.toFixed(1)} s; max queue depth ${maxDepth}/${QUEUE}; peak RSS over the burst before, model server ${grownMiB('modelServer')} MiB, router ${grownMiB('router')} MiB`,
    );

    // Every request is accounted for: answered 200, or refused at once with 503 + Retry-After. Nothing lost.
    expect(tally.unanswered, tally.toString()).toBe(0);
    expect(tally.malformed).toBe(0);
    expect(Object.keys(Object.fromEntries(tally.errors))).toEqual(['503 ServiceUnavailableException']);
    expect(tally.missingRetryAfter).toBe(0);
    // Refused by the queue's bound, or earlier by admission when the expected wait would pass the queue budget.
    for (const message of tally.messages.keys())
      expect(message).toMatch(
        /^(Job queue of model (ko|en) is full \(32 jobs\), retry later\.|Model (ko|en) is overloaded: \d+ requests wait \(expected wait \d+ ms.*retry in \d+ s\.)$/,
      );
    expect(tally.ok + tally.status(503)).toBe(tally.sent);
    // Far beyond capacity: 300 clients against room for 40 (queue + in flight) — the excess is refused all along,
    // and the accepted ones run at about the model's capacity, not more.
    expect(tally.status(503)).toBeGreaterThan(100);
    // Both languages share one engine (one worker, 2 batches in flight): 2 × BATCH texts per BATCH_MS.
    const capacityPerS = 2 * BATCH * (1000 / BATCH_MS);
    expect(tally.ok / elapsedS).toBeLessThanOrEqual(capacityPerS * 1.1);
    expect(tally.ok / elapsedS).toBeGreaterThan(20);
    // The bound held: never more than QUEUE waiting.
    expect(maxDepth).toBeLessThanOrEqual(QUEUE);
    expect(maxDepth).toBeGreaterThan(QUEUE / 2);
    // Accepted latency is bounded by the queues (2 × QUEUE jobs ahead at ~80 texts/s ≈ 1 s, plus the batch) and by
    // nothing else: no job waits anywhere unbounded. The margin is for a shared 2-core machine saturated by this
    // very test; it is still a third of the 30 s response timeout, which no accepted job came near.
    expect(tally.okPercentile(100), tally.toString()).toBeLessThan(10_000);
    // Memory bounded: a refused request costs nothing that stays (10,000-24,000 requests a burst: 100 MiB is 4-10 KB each).
    expect(peak.modelServer - baseline.modelServer).toBeLessThan(100 * 2 ** 20);
    expect(peak.router - baseline.router).toBeLessThan(100 * 2 ** 20);

    // Load drops: normal service at once, at normal latency.
    const after = await drive({
      url: () => router,
      body: (i) => translateBody('ko', `calm ${i}`),
      concurrency: 2,
      count: 20,
    });
    expect(after.toJSON()).toMatchObject({ sent: 20, ok: 20, errors: {}, unanswered: 0 });
    expect(after.okPercentile(100)).toBeLessThan(BATCH_MS * 5);
    const ping = await send(`${stack.inference}/ping`);
    expect(ping.status).toBe(200);
  });
});
