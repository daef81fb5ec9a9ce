/**
 * @module bench/scenarios/baseline — figure 3, the batching gain over what a Node user would write instead: the
 * same clients against (a) mt-serve's full stack with batch_size 64, (b) the same stack with batch_size 1, and
 * (c) a plain Hono server calling the transformers.js translation pipeline once per request on the same model
 * folder (bench/baseline/server.ts), all with the same fixed output length. Each arm runs in fresh processes;
 * the arms alternate their order on every repeat; medians over repeats.
 *
 * Quick runs keep to a few minutes: mt-serve at batch_size 64 is figure 2's one-language stack (the same
 * configuration, measured in the same run); transformers.js at concurrency 64 — which works on all 64 requests at
 * once, so they all finish about a minute later — is measured over one such cycle (64 requests sent together, to
 * the last answer) instead of a warm-up cycle plus whole cycles of window; batch_size 1 at concurrency 64, which
 * answers one sentence at a time and so at a steady rate, over a window shorter than its cycle (throughput only).
 *
 * The concurrency-1 latency target is read on both servers up at once and taking turns (paired-latency.ts): at
 * concurrency 1 the two run the same batch-1 decoder, and arms measured minutes apart differ by the machine's
 * drift, not by the few milliseconds of the stack's hops.
 *
 * The int8 arms: transformers.js with `dtype: 'q8'` and mt-serve at batch_size 64 with MODEL_DTYPE=q8, both on the
 * folder's *_quantized.onnx files, at concurrency 64 (and 1 in full runs), beside the fp32 ones; their
 * concurrency-1 latency is read the same way, the two q8 servers up at once and taking turns.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { startBaseline } from '../lib/baseline.js';
import { startRunStack } from '../lib/stack.js';
import { checkTarget, formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { alternatingOrder, median, ratio } from '../lib/stats.js';
import { measure, type LoadMeasurement } from './load.js';
import { pairedLatency, type PairedLatency } from './paired-latency.js';
import { CEILING_TOKENS_KEY } from './engine.js';
import { SERVED_ONE_LANGUAGE_KEY } from './serving.js';

type Arm = 'mt-serve batch 64' | 'mt-serve batch 1' | 'transformers.js' | 'mt-serve q8 batch 64' | 'transformers.js q8';
const ARMS: Arm[] = [
  'mt-serve batch 64',
  'transformers.js',
  'mt-serve batch 1',
  'mt-serve q8 batch 64',
  'transformers.js q8',
];
/** The arm each one's sentences/s is compared with: the transformers.js arm on the same weights. */
const BASELINE_OF: Record<Arm, Arm> = {
  'mt-serve batch 64': 'transformers.js',
  'mt-serve batch 1': 'transformers.js',
  'transformers.js': 'transformers.js',
  'mt-serve q8 batch 64': 'transformers.js q8',
  'transformers.js q8': 'transformers.js q8',
};
const TARGETS = ['en'];
const READ_BY: Record<LoadMeasurement['method'], string> = {
  window: 'whole cycles',
  cycle: 'one cycle',
  'short window': 'window < a cycle',
};

/** Start one arm in fresh processes: mt-serve's full stack (front on top) or the transformers.js server. */
async function startArm(
  ctx: BenchContext,
  arm: Arm,
  name: string,
): Promise<{ origin: string; metricsUrl?: string; stop: () => Promise<void> }> {
  const { settings } = ctx;
  const modelDir = await ctx.model(settings.speedModel);
  if (arm === 'transformers.js' || arm === 'transformers.js q8') {
    const dtype = arm === 'transformers.js' ? 'fp32' : 'q8';
    const b = await startBaseline({
      workDir: ctx.workDir,
      name: `baseline-${dtype}-${name}`,
      modelDir,
      newTokens: settings.newTokens,
      intraOpThreads: settings.intraOpThreads,
      dtype,
    });
    return {
      origin: b.url,
      stop: async () => {
        await b.process.stop();
      },
    };
  }
  const batchSize = arm === 'mt-serve batch 1' ? 1 : settings.batchSize;
  const modelDtype = arm === 'mt-serve q8 batch 64' ? 'q8' : 'fp32';
  const stack = await startRunStack(ctx, {
    name: `gain-b${batchSize}-${modelDtype}-${name}`,
    modelDir,
    languages: TARGETS,
    batchSize,
    modelDtype,
  });
  return { origin: stack.frontUrl!, metricsUrl: stack.metrics, stop: () => stack.stop() };
}

/**
 * Concurrency-1 latency of mt-serve (batch_size 64) and transformers.js on the same weights (`arms`), both servers
 * up and taking turns (paired-latency.ts): the no-worse-p50 targets read this, not two arms measured minutes apart.
 */
async function interleavedLatency(ctx: BenchContext, arms: [Arm, Arm]): Promise<PairedLatency> {
  const started: Awaited<ReturnType<typeof startArm>>[] = [];
  try {
    for (const arm of arms) started.push(await startArm(ctx, arm, 'paired'));
    ctx.log(`concurrency-1 latency, interleaved: ${ctx.settings.latencyPairs} pairs`);
    return await pairedLatency(
      ctx,
      [
        { label: arms[0]!, origin: started[0]!.origin },
        { label: arms[1]!, origin: started[1]!.origin },
      ],
      { targets: TARGETS, pairs: ctx.settings.latencyPairs, warmup: 2 },
    );
  } finally {
    await Promise.all(started.map((a) => a.stop()));
  }
}

async function runArm(
  ctx: BenchContext,
  arm: Arm,
  repeat: number,
  concurrencies: number[],
): Promise<Map<number, LoadMeasurement>> {
  const { settings } = ctx;
  if (arm === 'mt-serve batch 64' && settings.reuse) {
    const served = ctx.shared.get(SERVED_ONE_LANGUAGE_KEY) as Map<number, LoadMeasurement> | undefined;
    if (served && concurrencies.every((c) => served.has(c))) {
      ctx.log('batching gain: mt-serve batch 64 is figure 2’s one-language stack (quick run)');
      return served;
    }
  }
  const out = new Map<number, LoadMeasurement>();
  const { origin, metricsUrl, stop } = await startArm(ctx, arm, `${repeat}`);
  try {
    for (const [i, c] of concurrencies.entries()) {
      if (ctx.signal.aborted) break;
      // The last level need not wait for its in-flight answers: the server is stopped right after.
      const drain = i < concurrencies.length - 1;
      const base = { origin, entry: 'front' as const, concurrency: c, targets: TARGETS, metricsUrl, drain, label: arm };
      if (c > 1 && settings.reuse && (arm === 'transformers.js' || arm === 'transformers.js q8')) {
        out.set(c, await measure(ctx, { ...base, method: 'cycle' }));
      } else if (c > 1 && settings.reuse && arm === 'mt-serve batch 1') {
        // One sentence at a time: answers arrive steadily, so a window shorter than a client cycle counts them
        // without bias — but only the first requests of each client are answered in it, so no latency.
        const m = await measure(ctx, {
          ...base,
          window: { warmupMs: 3_000, minWindowMs: 12_000, cyclesPerClient: 0, warmupPerClient: 0 },
        });
        const nan = Number.NaN;
        const latency = { ...m.load.latency, p50: nan, p90: nan, p99: nan };
        out.set(c, { ...m, method: 'short window', load: { ...m.load, latency } });
      } else {
        out.set(c, await measure(ctx, base));
      }
    }
  } finally {
    await stop();
  }
  return out;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const concurrencies = [1, 64];
  const results = new Map<Arm, Map<number, LoadMeasurement>[]>(ARMS.map((a) => [a, []]));
  for (const [r, round] of alternatingOrder(ARMS, settings.loadRepeats).entries()) {
    for (const arm of round) {
      if (ctx.signal.aborted) break;
      ctx.log(`batching gain, repeat ${r + 1}/${settings.loadRepeats}: ${arm}`);
      // Quick runs read concurrency 1 from the interleaved comparison below only.
      const levels = settings.reuse && arm !== 'mt-serve batch 64' ? [64] : concurrencies;
      results.get(arm)!.push(await runArm(ctx, arm, r, levels));
    }
  }
  const paired = ctx.signal.aborted
    ? undefined
    : await interleavedLatency(ctx, ['mt-serve batch 64', 'transformers.js']);
  const pairedQ8 = ctx.signal.aborted
    ? undefined
    : await interleavedLatency(ctx, ['mt-serve q8 batch 64', 'transformers.js q8']);
  // Quick runs: the batch-64 arm is figure 2's measurement itself.
  const reused = results.get('mt-serve batch 64')!.some((m) => m === ctx.shared.get(SERVED_ONE_LANGUAGE_KEY));
  const s = section(
    'baseline',
    '3. Batching gain over a per-request transformers.js server',
    `The same closed-loop clients (one target language, mixed-length workload, ${settings.newTokens} generated tokens per sentence, greedy) against mt-serve's full stack ` +
      `at batch_size ${settings.batchSize} and at batch_size 1, and against a plain Hono server calling the transformers.js translation pipeline once per request on the same model folder. ` +
      (reused
        ? `Fresh processes per arm; mt-serve at batch_size ${settings.batchSize} is figure 2's one-language stack, measured earlier in this run.`
        : 'Fresh processes per arm, arms in alternating order on each repeat, medians.'),
  );
  const med = (arm: Arm, c: number, pick: (m: LoadMeasurement) => number) =>
    median(
      results
        .get(arm)!
        .map((m) => (m.get(c) ? pick(m.get(c)!) : Number.NaN))
        .filter(Number.isFinite),
    );
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  for (const c of concurrencies) {
    for (const arm of ARMS) {
      if (!results.get(arm)!.some((m) => m.has(c))) continue;
      const sps = med(arm, c, (m) => m.sentencesPerS);
      const p50 = med(arm, c, (m) => m.load.latency.p50);
      const p99 = med(arm, c, (m) => m.load.latency.p99);
      const batch = med(arm, c, (m) => m.rowsPerStep);
      const method = results.get(arm)![0]?.get(c)?.method;
      const readBy = method === undefined ? '' : READ_BY[method];
      const errors = results.get(arm)!.reduce((n, m) => n + (m.get(c)?.load.failed ?? 0), 0);
      const baselineArm = BASELINE_OF[arm];
      const vsBaseline = ratio(
        sps,
        med(baselineArm, c, (m) => m.sentencesPerS),
      );
      // A system that answered nothing in its run shows its throughput bound instead of n/a.
      const bound = med(arm, c, (m) => (m.load.ok === 0 ? m.load.requestsPerSUpperBound : Number.NaN));
      const spsCell = Number.isFinite(sps) ? sps : Number.isFinite(bound) ? `≤ ${formatNumber(bound)}` : sps;
      const baselineBoundAtC = med(baselineArm, c, (m) =>
        m.load.ok === 0 ? m.load.requestsPerSUpperBound : Number.NaN,
      );
      const vsText =
        Number.isFinite(vsBaseline) || !Number.isFinite(baselineBoundAtC)
          ? formatRatio(vsBaseline)
          : `≥ ${formatRatio(ratio(sps, baselineBoundAtC))}`;
      rows.push([
        arm,
        c,
        spsCell,
        Number.isFinite(sps) ? sps * settings.newTokens : '',
        p50,
        p99,
        batch,
        vsText,
        readBy,
        errors,
      ]);
      data.push({ arm, concurrency: c, sentencesPerS: sps, p50, p99, rowsPerStep: batch, vsBaseline, readBy, errors });
    }
  }
  s.tables.push({
    title: 'Same clients, same model folder, same output length',
    columns: [
      'System',
      'Concurrency',
      'sentences/s',
      'tokens/s',
      'p50 ms',
      'p99 ms',
      'rows per decoder run',
      'sentences/s vs transformers.js (same weights)',
      'measured over',
      'errors',
    ],
    rows,
    note:
      `Median of ${settings.loadRepeats} repeat(s). transformers.js has no batching across requests: concurrent requests interleave their generation loops on one session. ` +
      'Rows per decoder run: the batch mt-serve’s engine really stepped (its metrics). Measured over: a window of whole client cycles after a warm-up cycle; ' +
      'one cycle (every client sends one request at once, to the last answer); or a window shorter than a cycle, for a server that answers at a steady rate (throughput only).',
  });
  let gain64 = ratio(
    med('mt-serve batch 64', 64, (m) => m.sentencesPerS),
    med('transformers.js', 64, (m) => m.sentencesPerS),
  );
  const baselineBound = med('transformers.js', 64, (m) => m.load.requestsPerSUpperBound);
  if (
    !Number.isFinite(gain64) &&
    Number.isFinite(baselineBound) &&
    results.get('transformers.js')!.some((m) => m.get(64)?.load.ok === 0)
  ) {
    // The baseline answered nothing inside its run: its throughput is at most the bound, so the gain is at least this.
    gain64 = ratio(
      med('mt-serve batch 64', 64, (m) => m.sentencesPerS),
      baselineBound,
    );
    s.notes.push(
      `transformers.js at concurrency 64 answered no request inside its ${formatNumber(med('transformers.js', 64, (m) => m.load.elapsedMs) / 1000)} s run: ` +
        `its throughput is at most ${formatNumber(baselineBound)} sentences/s (every request in flight counted as answered at the end), so the gain below is a lower bound.`,
    );
  }
  const p50Ratio = paired ? ratio(paired.p50[0], paired.p50[1]) : Number.NaN;
  const p50RatioQ8 = pairedQ8 ? ratio(pairedQ8.p50[0], pairedQ8.p50[1]) : Number.NaN;
  const pairedRows = (p: PairedLatency, names: [string, string], p50: number) => [
    [names[0], p.p50[0], p.p90[0], formatRatio(p50), formatRatio(p.medianPairRatio), p.pairs],
    [names[1], p.p50[1], p.p90[1], '1×', '', p.pairs],
  ];
  if (paired || pairedQ8) {
    const failed = [paired, pairedQ8].filter((p) => p && Object.keys(p.errors).length > 0).map((p) => p!.errors);
    s.tables.push({
      title: 'Concurrency 1, the two servers on the same weights taking turns',
      columns: ['System', 'p50 ms', 'p90 ms', 'p50 vs transformers.js', 'median of per-request ratios', 'requests'],
      rows: [
        ...(paired ? pairedRows(paired, ['mt-serve batch 64', 'transformers.js'], p50Ratio) : []),
        ...(pairedQ8 ? pairedRows(pairedQ8, ['mt-serve q8 batch 64', 'transformers.js q8'], p50RatioQ8) : []),
      ],
      note:
        'Per pair of rows: both servers up at once (fresh processes, 2 warm-up requests each); workload request i goes to one and then the other, the first of each pair alternating, one request in flight in all. ' +
        'Machine drift hits both alike, so a few percent can be told apart; the targets read the ratio of p50s.' +
        (failed.length > 0 ? ` Failed: ${JSON.stringify(failed)}.` : ''),
    });
  }
  const batchGain = ratio(
    med('mt-serve batch 64', 64, (m) => m.sentencesPerS),
    med('mt-serve batch 1', 64, (m) => m.sentencesPerS),
  );
  s.targets.push(checkTarget('mt-serve ÷ transformers.js sentences/s at concurrency 64', gain64, '>=', 5, '×'));
  s.targets.push(
    checkTarget('mt-serve ÷ transformers.js p50 latency at concurrency 1 (no worse)', p50Ratio, '<=', 1, '×'),
  );
  // What any batching server could gain here: the all-work GEMM ceiling of figure 1 at batch 64 (every sentence's
  // encoder and decoder GEMMs at the machine's measured MatMul rates), in sentences/s, over the baseline's.
  const ceiling = (ctx.shared.get(CEILING_TOKENS_KEY) as Map<number, number> | undefined)?.get(settings.batchSize);
  const baselineSps = med('transformers.js', 64, (m) => m.sentencesPerS);
  const bound = ceiling === undefined ? Number.NaN : ratio(ceiling / settings.newTokens, baselineSps);
  if (Number.isFinite(bound)) {
    s.notes.push(
      `Compute bound: figure 1's all-work ceiling at batch ${settings.batchSize} is ${formatNumber(ceiling! / settings.newTokens)} sentences/s (${formatNumber(ceiling!)} tokens/s), ` +
        `${formatRatio(bound)} transformers.js's sentences/s here: no server batching on this machine's measured MatMul rates could gain more at ${settings.newTokens} generated tokens per sentence. ` +
        `mt-serve's gain is ${formatNumber(gain64 / bound)} of that bound.`,
    );
  }
  s.notes.push(
    `Our batch_size 64 ÷ batch_size 1 at concurrency 64: ${formatRatio(batchGain)} sentences/s (no target; shows what batching itself buys on this machine).`,
  );
  const q8Gain = ratio(
    med('mt-serve q8 batch 64', 64, (m) => m.sentencesPerS),
    med('transformers.js q8', 64, (m) => m.sentencesPerS),
  );
  const q8OverFp32 = (arm: Arm, fp32Arm: Arm) =>
    ratio(
      med(arm, 64, (m) => m.sentencesPerS),
      med(fp32Arm, 64, (m) => m.sentencesPerS),
    );
  s.targets.push(
    checkTarget('int8 (q8): mt-serve ÷ transformers.js sentences/s at concurrency 64', q8Gain, '>=', 5, '×'),
  );
  s.targets.push(
    checkTarget(
      'int8 (q8): mt-serve ÷ transformers.js p50 latency at concurrency 1 (no worse)',
      p50RatioQ8,
      '<=',
      1,
      '×',
    ),
  );
  s.notes.push(
    `int8 (q8 files), q8 ÷ fp32 sentences/s at concurrency 64: ${formatRatio(q8OverFp32('mt-serve q8 batch 64', 'mt-serve batch 64'))} for mt-serve, ${formatRatio(q8OverFp32('transformers.js q8', 'transformers.js'))} for transformers.js (no target).`,
  );
  s.data = {
    rows: data,
    gain64,
    p50Ratio,
    gainBound: bound,
    paired,
    batchGain,
    q8Gain,
    p50RatioQ8,
    pairedQ8,
    raw: Object.fromEntries(
      [...results].map(([arm, runs]) => [
        arm,
        runs.map((m) =>
          Object.fromEntries([...m].map(([c, x]) => [c, { ...x, load: { ...x.load, records: undefined } }])),
        ),
      ]),
    ),
  };
  return s;
}

export const baselineScenario: Scenario = {
  id: 'baseline',
  title: '3. Batching gain over a per-request transformers.js server',
  run,
};
