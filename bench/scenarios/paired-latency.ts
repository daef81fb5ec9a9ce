/**
 * @module bench/scenarios/paired-latency — the latency of two servers at concurrency 1, measured interleaved.
 *
 * At concurrency 1 both systems run the same batch-1 decoder, so their latencies differ by a few percent at most —
 * less than this shared machine drifts in the minutes between two arms measured one after the other. So both
 * servers run at once and take turns: workload request i goes to one and then to the other (the first of the pair
 * alternating), one request in flight in all, and each pair's two latencies are compared. Drift then hits both
 * arms alike, and the median of the per-pair ratios is what the target reads.
 */
import { performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import type { BenchContext } from '../lib/context.js';
import { median, quantile } from '../lib/stats.js';
import { translatedCheck, translationRequest } from './load.js';

export interface PairedArm {
  label: string;
  origin: string;
}

export interface PairedLatency {
  /** p50 and p90 latency of each arm, ms, over the pairs (warm-up excluded). */
  p50: [number, number];
  p90: [number, number];
  /** Median over pairs of first-arm latency ÷ second-arm latency for the same request. */
  medianPairRatio: number;
  /** Pairs in which both answered 200 with a translation. */
  pairs: number;
  /** Failed requests by arm label and status (a failed pair is left out of the ratios). */
  errors: Record<string, number>;
}

/**
 * Send `pairs` workload requests to both arms, one at a time, after `warmup` untimed requests to each (the first
 * requests of a fresh engine are slower: allocations, first runs of each graph).
 */
export async function pairedLatency(
  ctx: BenchContext,
  arms: [PairedArm, PairedArm],
  options: { targets: readonly string[]; pairs: number; warmup: number },
): Promise<PairedLatency> {
  const build = translationRequest('front', options.targets);
  const pools = arms.map((a) => new Pool(a.origin, { connections: 1 }));
  const errors: Record<string, number> = {};
  const once = async (arm: number, seq: number): Promise<number | undefined> => {
    const spec = build(seq);
    const started = performance.now();
    try {
      const res = await pools[arm]!.request({
        path: spec.path,
        method: 'POST',
        body: spec.body,
        headers: { 'content-type': 'application/json' },
        signal: ctx.signal,
      });
      const failure = translatedCheck(res.statusCode, Buffer.from(await res.body.arrayBuffer()));
      if (failure === undefined) return performance.now() - started;
      const key = `${arms[arm]!.label} ${failure}`;
      errors[key] = (errors[key] ?? 0) + 1;
    } catch (err) {
      if (ctx.signal.aborted) return undefined;
      const key = `${arms[arm]!.label} ${(err as Error).name}`;
      errors[key] = (errors[key] ?? 0) + 1;
    }
    return undefined;
  };
  const latencies: [number[], number[]] = [[], []];
  const ratios: number[] = [];
  try {
    // Warm-up requests come from far past the timed ones, so no timed sentence was seen before.
    for (let i = 0; i < options.warmup && !ctx.signal.aborted; i++) {
      await once(0, 1_000_000 + i);
      await once(1, 1_000_000 + i);
    }
    for (let i = 0; i < options.pairs && !ctx.signal.aborted; i++) {
      const order = i % 2 === 0 ? [0, 1] : [1, 0];
      const took: (number | undefined)[] = [];
      for (const arm of order) took[arm] = await once(arm, i);
      const [a, b] = took;
      if (a === undefined || b === undefined) continue;
      latencies[0].push(a);
      latencies[1].push(b);
      ratios.push(a / b);
    }
  } finally {
    await Promise.all(pools.map((p) => p.close()));
  }
  return {
    p50: [quantile(latencies[0], 0.5), quantile(latencies[1], 0.5)],
    p90: [quantile(latencies[0], 0.9), quantile(latencies[1], 0.9)],
    medianPairRatio: median(ratios),
    pairs: ratios.length,
    errors,
  };
}
