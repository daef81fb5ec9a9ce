/**
 * Goodput under overload (issue 11): closed-loop clients at 10× the concurrency that saturates the engine,
 * honouring `Retry-After`, straight to :9999 and through the front (:7777's path: front → router → model
 * server). Goodput — answers 200 within the deadline — must stay ≥ 0.9 × the peak, the goodput of 1×; refusals are
 * 503 + Retry-After answered at once, at admission; no worker is recycled; nothing is lost; memory stays bounded.
 *
 * The engine is the echo handler holding each batch 100 ms (`slow:100`): its capacity is exact and does not
 * depend on how busy this 2-core machine is, so the levels compare the *serving* stack, which is what is under
 * test (`npm run bench` runs the same scenario on the real engine). One worker holds at most `BATCH` jobs (the
 * pool's cap), so `BATCH` clients saturate it: `BATCH` jobs per 100 ms.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { drive, type Outcome } from '../../harness/load.js';
import { statusBytes } from '../../harness/proc-tree.js';
import { stopAll } from '../../harness/process-registry.js';
import { startStack, translateBody, type Stack } from '../../harness/stack.js';

const BATCH = 8;
const SLOW_MS = 100;
const DEADLINE_MS = 2_000;
/** QUEUE_BUDGET_MS of the stack: short, so that even 10× fits in the queue only in part and admission refuses. */
const QUEUE_BUDGET_MS = 300;
/** Seconds of each level: the first is left out (clients ramping), the rest is measured. */
const RAMP_S = 1;
const MEASURE_S = 3;

interface Level {
  clients: number;
  goodputPerS: number;
  refusals: number;
  refusalP99Ms: number;
  late: number;
  other: string[];
  unanswered: number;
}

/** `clients` closed-loop clients honouring Retry-After, as a user's would, for `seconds`. */
const closedLoop = (url: string, clients: number, seconds: number, onOutcome?: (o: Outcome) => void) =>
  drive({
    url: () => url,
    body: (i) => translateBody('en', `sentence ${i}`),
    concurrency: clients,
    signal: AbortSignal.timeout(seconds * 1000),
    deadlineMs: 10_000,
    honorRetryAfter: true,
    onOutcome,
  });

/** Drive `clients` closed-loop clients for RAMP_S + MEASURE_S; goodput counts 200s in time finished after the ramp. */
async function level(url: string, clients: number): Promise<Level> {
  const started = performance.now();
  const measureFrom = started + RAMP_S * 1000;
  const measureTo = measureFrom + MEASURE_S * 1000;
  let good = 0;
  let late = 0;
  const refusalMs: number[] = [];
  const other: string[] = [];
  const tally = await closedLoop(url, clients, RAMP_S + MEASURE_S, (o) => {
    const now = performance.now();
    if (o.status !== 200 && o.status !== 503) other.push(`${o.status} ${o.kind}: ${o.message}`);
    // Measured as goodput is, after the ramp: all clients connecting and sending at once is not the steady state.
    if (now < measureFrom || now > measureTo) return;
    if (o.status === 503) refusalMs.push(o.latencyMs);
    else if (o.status === 200 && o.latencyMs <= DEADLINE_MS) good += 1;
    else if (o.status === 200) late += 1;
  });
  refusalMs.sort((a, b) => a - b);
  return {
    clients,
    goodputPerS: good / MEASURE_S,
    refusals: refusalMs.length,
    refusalP99Ms: refusalMs.length === 0 ? 0 : refusalMs[Math.floor(0.99 * (refusalMs.length - 1))]!,
    late,
    other,
    unanswered: tally.unanswered,
  };
}

afterAll(stopAll);

describe('goodput under overload: 10× the saturating concurrency, clients honour Retry-After', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      languages: ['en'],
      handler: 'echo',
      faults: { en: `slow:${SLOW_MS}` },
      front: findNginx(process.env) ? 'nginx' : 'builtin',
      // A short budget, so that even 10× fits in the queue only in part and admission has to refuse.
      env: { RESPONSE_TIMEOUT_S: '2', QUEUE_BUDGET_MS: String(QUEUE_BUDGET_MS) },
      register: { batchSize: BATCH, maxBatchDelayMs: 0, responseTimeoutS: 2 },
    });
  });
  afterAll(() => stack?.stop());

  for (const path of ['model server :9999', 'front → router → model server'] as const) {
    it(`${path}: goodput ≥ 0.9 × peak at 10×, fast refusals, no recycled worker, nothing lost`, async () => {
      const url = path === 'model server :9999' ? `${stack.inference}/predictions/en` : `${stack.frontUrl!}/`;
      const pids = [stack.modelServer.pid, stack.routers[0]!.pid];
      const workerPid = async () => {
        const [d] = (await (await fetch(`${stack.management}/models/en`)).json()) as [{ workers: { pid: number }[] }];
        return d.workers[0]!.pid;
      };
      const worker = await workerPid();
      // Warm: the model learns its service rate (trusted after 8 completions, service-rate.ts; 1 s makes ~80).
      await closedLoop(url, BATCH, 1);
      const baseline = pids.map((pid) => statusBytes(pid, 'VmRSS'));
      const levels: Level[] = [];
      // 1× is the peak a saturated stack reaches; 10× the worst overload the drill puts on it. (The bench's figure 7
      // walks the levels between on the real engine.)
      for (const factor of [1, 10]) levels.push(await level(url, factor * BATCH));
      const grown = pids.map((pid, i) => statusBytes(pid, 'VmRSS') - baseline[i]!);
      const peak = Math.max(...levels.map((l) => l.goodputPerS));
      const report = levels
        .map(
          (l) =>
            `${l.clients} clients: ${l.goodputPerS.toFixed(1)}/s good (${(l.goodputPerS / peak).toFixed(2)} of peak), ${l.refusals} refused (p99 ${l.refusalP99Ms.toFixed(1)} ms), ${l.late} late`,
        )
        .join('; ');
      const rss = `RSS grown: model server ${(grown[0]! / 2 ** 20).toFixed(1)} MiB, router ${(grown[1]! / 2 ** 20).toFixed(1)} MiB`;
      console.info(`goodput via ${path}: ${report}; ${rss}`);

      // The engine's capacity is BATCH jobs per SLOW_MS; the stack reaches most of it at its peak.
      expect(peak, report).toBeGreaterThan(0.7 * BATCH * (1000 / SLOW_MS));
      for (const l of levels.slice(1)) {
        expect(l.goodputPerS / peak, report).toBeGreaterThanOrEqual(0.9);
        // Refused at admission, not after waiting in a queue: well inside the queue budget. (The 50 ms p99 target
        // is figure 7 of `npm run bench`: a latency target is a benchmark's to check; this machine runs the load
        // generator, nginx, two routers and the model server on two cores, and a scheduling hiccup of tens of ms
        // decides a p99 of a few hundred refusals.)
        expect(l.refusalP99Ms, report).toBeLessThan(QUEUE_BUDGET_MS);
        expect(l.other, report).toEqual([]);
        expect(l.unanswered, report).toBe(0);
        expect(l.late, report).toBe(0);
      }
      // Overload is refused, not queued: at 10× most clients are turned away at any moment.
      expect(levels.at(-1)!.refusals, report).toBeGreaterThan(0);
      // The worker kept going: never recycled.
      expect(await workerPid()).toBe(worker);
      const metrics = await (await fetch(`${stack.metrics}/metrics`)).text();
      expect(metrics).not.toMatch(/^mt_worker_deaths_total\{[^}]*\} [1-9]/m);
      // Memory bounded: a refused request leaves nothing behind.
      for (const bytes of grown) expect(bytes, rss).toBeLessThan(100 * 2 ** 20);
    });
  }
});
