/**
 * @module harness/linear-time — whether a function's time grows linearly with its input, in a way a noisy shared
 * machine cannot fail: the same work on an input of size n and of size 4n, samples of the two interleaved, each size
 * timed by its fastest sample (noise only ever adds time), measured again while the ratio is over its bound. Linear
 * work gives about 4×, quadratic 16× or more once its quadratic term dominates.
 *
 * Sizes: a few thousand characters, each sample repeating the run to last some milliseconds. Larger inputs cross
 * V8's cost steps between n and 4n — a Map past a few thousand entries costs several times more per entry, a string
 * past 128 KiB goes to the large-object space, objects that outgrow the young generation are copied and promoted —
 * which add up to ×2 to linear work. A super-linear cost shows at these sizes already.
 */

/** Time of one run at n and at `factor` × n, each from the fastest of its samples, in ms. */
export interface Growth {
  readonly n: number;
  /** Runs in a sample of the large input (a sample of the small one has `factor` times as many). */
  readonly repeats: number;
  readonly smallMs: number;
  readonly largeMs: number;
  /** largeMs ÷ smallMs. */
  readonly ratio: number;
}

export interface GrowthOptions {
  /** The larger input's size ÷ the smaller's. Default 4. */
  factor?: number;
  /** Samples of each size per round. Default 3. */
  samples?: number;
  /** Rounds at most while the ratio is over `maxRatio`. Default 4. */
  rounds?: number;
  /** The ratio that passes. Default 5 (linear: 4). */
  maxRatio?: number;
  /**
   * The least time a sample takes, ms: the large input's run is repeated to last it, and the small input's `factor`
   * times as often, so that both samples of linear work last as long and are as likely to be interrupted by another
   * process (the fastest of longer samples is slower under load). Default 10.
   */
  minSampleMs?: number;
}

/** `run` timed on `input(n)` and `input(factor × n)` (the inputs are built before any timing). */
export function timeGrowth<T>(
  input: (n: number) => T,
  run: (input: T) => unknown,
  n: number,
  { factor = 4, samples = 3, rounds = 4, maxRatio = 5, minSampleMs = 10 }: GrowthOptions = {},
): Growth {
  const small = input(n);
  const large = input(factor * n);
  /** ms a run, over `count` runs. */
  const time = (value: T, count: number) => {
    const started = performance.now();
    for (let i = 0; i < count; i++) run(value);
    return (performance.now() - started) / count;
  };
  // Warm-up: compiled code, lazily built tables and a heap grown to the large input's needs are paid for before the
  // clock counts; the last runs set the repeats.
  time(small, 1);
  let largeRunMs = Infinity;
  for (let i = 0; i < 3; i++) largeRunMs = Math.min(largeRunMs, time(large, 1));
  const repeats = Math.max(1, Math.ceil(minSampleMs / Math.max(largeRunMs, 0.001)));
  let smallMs = Infinity;
  let largeMs = Infinity;
  for (let round = 0; round < rounds; round++) {
    for (let i = 0; i < samples; i++) {
      smallMs = Math.min(smallMs, time(small, factor * repeats));
      largeMs = Math.min(largeMs, time(large, repeats));
    }
    if (largeMs <= maxRatio * smallMs) break;
  }
  return { n, repeats, smallMs, largeMs, ratio: largeMs / smallMs };
}

/**
 * `timeGrowth`, failing when the time grew more than `maxRatio` (default 5) from n to 4n in each of `attempts`
 * (default 3) measurements: a super-linear cost fails every one, a load that came and went at most one.
 * @throws Error naming both times and the ratio of the last attempt
 */
export function expectLinearTime<T>(
  input: (n: number) => T,
  run: (input: T) => unknown,
  n: number,
  options: GrowthOptions & { attempts?: number } = {},
): Growth {
  const { factor = 4, maxRatio = 5, attempts = 3 } = options;
  let growth = timeGrowth(input, run, n, options);
  for (let attempt = 1; attempt < attempts && growth.ratio > maxRatio; attempt++) {
    growth = timeGrowth(input, run, n, options);
  }
  if (growth.ratio > maxRatio) {
    throw new Error(
      `time grew ${growth.ratio.toFixed(1)}× from n = ${n} (${growth.smallMs.toFixed(2)} ms a run) to ${factor}n ` +
        `(${growth.largeMs.toFixed(2)} ms a run), more than ${maxRatio}×`,
    );
  }
  return growth;
}

/** `unit` repeated to at least `n` characters, between `prefix` and `suffix`. */
export function repeatTo(unit: string, n: number, prefix = '', suffix = ''): string {
  return prefix + unit.repeat(Math.max(1, Math.ceil(n / unit.length))) + suffix;
}
