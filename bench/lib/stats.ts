/**
 * @module bench/lib/stats — the statistics every figure is built from: order statistics over samples,
 * medians of repeats, and ratios of medians. Pure functions, no I/O.
 */

/**
 * The q-quantile (0 ≤ q ≤ 1) of `values` by linear interpolation between closest ranks (the "R-7" rule used
 * by numpy and most load tools). NaN for an empty list; the input is not modified.
 */
export function quantile(values: readonly number[], q: number): number {
  if (!(q >= 0 && q <= 1)) throw new RangeError(`quantile must be within [0, 1], got ${q}`);
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const position = (sorted.length - 1) * q;
  const lower = Math.floor(position);
  const upper = Math.ceil(position);
  const low = sorted[lower]!;
  return low + (sorted[upper]! - low) * (position - lower);
}

/** The median (0.5-quantile); NaN for an empty list. */
export function median(values: readonly number[]): number {
  return quantile(values, 0.5);
}

/** Arithmetic mean; NaN for an empty list. */
export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  let sum = 0;
  for (const v of values) sum += v;
  return sum / values.length;
}

/** The latency summary every load figure reports, in the unit of the input (milliseconds throughout bench/). */
export interface LatencySummary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
  mean: number;
}

export function summarize(values: readonly number[]): LatencySummary {
  return {
    count: values.length,
    min: values.length ? Math.min(...values) : Number.NaN,
    p50: quantile(values, 0.5),
    p90: quantile(values, 0.9),
    p99: quantile(values, 0.99),
    max: values.length ? Math.max(...values) : Number.NaN,
    mean: mean(values),
  };
}

/**
 * `numerator / denominator`, NaN when either side is missing or the denominator is zero — so a figure that
 * could not be measured prints as "n/a" instead of Infinity.
 */
export function ratio(numerator: number, denominator: number): number {
  if (!Number.isFinite(numerator) || !Number.isFinite(denominator) || denominator === 0) return Number.NaN;
  return numerator / denominator;
}

/**
 * Median of each numeric field over repeats of the same measurement: `[{a: 1}, {a: 3}, {a: 2}]` → `{a: 2}`.
 * Every repeat must have the same keys; non-finite values are skipped (a repeat that failed to measure a field
 * does not drag the median), and a field no repeat measured is NaN.
 */
export function medianOf<K extends string>(repeats: readonly Record<K, number>[]): Record<K, number> {
  if (repeats.length === 0) throw new RangeError('medianOf needs at least one repeat');
  const out = {} as Record<K, number>;
  for (const key of Object.keys(repeats[0]!) as K[]) {
    out[key] = median(repeats.map((r) => r[key]).filter((v) => Number.isFinite(v)));
  }
  return out;
}

/**
 * The run order for `repeats` repeats of side-by-side measurements: the arms alternate their order on every
 * repeat (A B, B A, A B …) so that a machine that warms up or slows down during the run does not favour one arm.
 */
export function alternatingOrder<T>(arms: readonly T[], repeats: number): T[][] {
  const rounds: T[][] = [];
  for (let r = 0; r < repeats; r++) rounds.push(r % 2 === 0 ? [...arms] : [...arms].reverse());
  return rounds;
}
