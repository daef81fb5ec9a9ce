/**
 * @module bench/scenarios/serving — figure 2, serving efficiency: the full stack (front → router cluster → model
 * server → worker) under closed-loop clients at each concurrency, one target language and then all 14, the
 * mixed-length workload with the fixed output length. Served tokens/s is divided by the engine's own tokens/s at
 * the matching batch. Full runs measure that right beside each level: an engine probe (fresh process, warmed,
 * the same target languages) paired with it, the two alternating which goes first, so a change in the machine's
 * load between the two halves of a ratio is as small as it can be. Quick runs take the engine figure's numbers
 * (or one probe, when that figure did not run). One-language results are left in `ctx.shared` for figures 3–4.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { runProbe } from '../lib/probe-runner.js';
import { startRunStack } from '../lib/stack.js';
import { checkTarget, formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { SEED_LANGUAGES } from '../lib/workload.js';
import { DEFAULT_MAX_BATCH_ROWS } from '../../model-server/engine/engine.js';
import { engineBatchRequest, type EngineProbeResult } from './engine-probe.js';
import { ENGINE_TOKENS_KEY } from './engine.js';
import { LOAD_COLUMNS, measure, type LoadMeasurement } from './load.js';

/**
 * The engine batch a concurrency level corresponds to: the clients in flight, capped by what the model server lets
 * one worker hold (the languages' batch sizes summed, worker-pool.ts) and by the engine's rows (greedy: 1 per job).
 */
export function matchingBatch(concurrency: number, batchSize: number, languages: number): number {
  return Math.min(concurrency, batchSize * languages, DEFAULT_MAX_BATCH_ROWS);
}

/** `ctx.shared` key of the one-language full-stack measurements (a Map from concurrency to LoadMeasurement). */
export const SERVED_ONE_LANGUAGE_KEY = 'served, 1 language, batch_size 64, immediate';

/** Engine tokens/s on pre-formed batches of the given sizes (one fresh, warmed process), by batch size. */
export async function engineReference(
  ctx: BenchContext,
  modelDir: string,
  batches: number[],
  targets: readonly string[],
  label: string,
): Promise<Map<number, number>> {
  const request = engineBatchRequest(ctx.settings, modelDir, batches, targets);
  const result = await runProbe<EngineProbeResult>(request, { workDir: ctx.workDir, label, timeoutMs: 15 * 60_000 });
  const out = new Map(result.batches.map((b) => [b.batch, b.tokensPerS]));
  ctx.log(`${label}: engine alone: ${[...out].map(([b, t]) => `batch ${b} ${t.toFixed(1)}`).join(', ')} tokens/s`);
  return out;
}

/** Quick runs: the engine's tokens/s by batch from figure 1, else measured once here and kept for the run. */
async function sharedEngineReference(
  ctx: BenchContext,
  modelDir: string,
  batches: number[],
): Promise<Map<number, number>> {
  const known = ctx.shared.get(ENGINE_TOKENS_KEY) as Map<number, number> | undefined;
  if (known && batches.every((b) => known.has(b))) return known;
  const measured = await engineReference(
    ctx,
    modelDir,
    [...batches].sort((a, b) => b - a),
    ['en'],
    'serving-engine',
  );
  ctx.shared.set(ENGINE_TOKENS_KEY, new Map([...(known ?? []), ...measured]));
  return measured;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'serving',
    '2. Serving efficiency through the full stack',
    `Closed-loop clients through the front, the router cluster and the model server (BATCH_POLICY=immediate, ENGINE_SHARING=device, ` +
      `batch_size ${settings.batchSize}, max_batch_delay ${settings.maxBatchDelayMs} ms), the mixed-length workload, ${settings.newTokens} ` +
      'generated tokens per sentence; one target language, then all 14 (targets rotate per request). Each level is paired with the engine alone on a ' +
      (settings.reuse
        ? "pre-formed batch of the matching size (figure 1's warmed engine on fresh sentences, or one such probe): served tokens/s ÷ engine tokens/s."
        : 'pre-formed batch of the matching size (fresh process, warmed, fresh sentences, same targets), in alternating order: served tokens/s ÷ engine tokens/s.'),
  );
  const modelDir = await ctx.model(ctx.settings.speedModel);
  const reference = settings.reuse
    ? await sharedEngineReference(ctx, modelDir, [
        ...new Set(
          settings.servingConcurrencies.flatMap((c) => [1, 14].map((n) => matchingBatch(c, settings.batchSize, n))),
        ),
      ])
    : undefined;
  const oneLanguage = new Map<number, LoadMeasurement>();
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  const efficiencyAt = new Map<string, number>();
  let frontKind: string | undefined;
  let level = 0;
  for (const [label, targets] of [
    ['1 language', ['en']],
    ['14 languages', [...SEED_LANGUAGES]],
  ] as const) {
    if (ctx.signal.aborted) break;
    const stack = await startRunStack(ctx, {
      name: `serving-${targets.length}`,
      modelDir,
      languages: targets,
    });
    frontKind = stack.frontKind;
    try {
      for (const [ci, c] of settings.servingConcurrencies.entries()) {
        if (ctx.signal.aborted) break;
        const lastLevel = ci === settings.servingConcurrencies.length - 1;
        const batch = matchingBatch(c, settings.batchSize, targets.length);
        let served: LoadMeasurement | undefined;
        let engine = Number.NaN;
        const arms = reference
          ? (['serve'] as const)
          : level++ % 2 === 0
            ? (['serve', 'engine'] as const)
            : (['engine', 'serve'] as const);
        if (reference) engine = reference.get(batch) ?? Number.NaN;
        for (const [ai, arm] of arms.entries()) {
          if (ctx.signal.aborted) break;
          if (arm === 'serve') {
            // Drain unless nothing runs before this stack is stopped: queued work must not overlap the next measurement.
            const drain = !(lastLevel && ai === arms.length - 1);
            served = await measure(ctx, {
              origin: stack.frontUrl!,
              entry: 'front',
              concurrency: c,
              targets,
              metricsUrl: stack.metrics,
              drain,
              label: `serving ${label}`,
            });
          } else {
            const measured = await engineReference(
              ctx,
              modelDir,
              [batch],
              targets,
              `serving-engine-${targets.length}-b${batch}`,
            );
            engine = measured.get(batch) ?? Number.NaN;
          }
        }
        if (!served) break;
        if (targets.length === 1) oneLanguage.set(c, served);
        const efficiency = ratio(served.tokensPerS, engine);
        efficiencyAt.set(`${targets.length}:${c}`, efficiency);
        const l = served.load.latency;
        rows.push([
          label,
          c,
          served.sentencesPerS,
          served.tokensPerS,
          l.p50,
          l.p90,
          l.p99,
          served.meanBatchSize,
          served.rowsPerStep,
          batch,
          engine,
          efficiency,
          errorsText(served),
        ]);
        data.push({
          targets: targets.length,
          concurrency: c,
          sentencesPerS: served.sentencesPerS,
          tokensPerS: served.tokensPerS,
          latencyMs: l,
          meanBatchSize: served.meanBatchSize,
          rowsPerStep: served.rowsPerStep,
          engineBatch: batch,
          engineTokensPerS: engine,
          efficiency,
          errors: served.load.errorsByStatus,
          windowMs: served.load.windowMs,
          answered: served.load.completed,
          truncated: served.load.truncated,
        });
      }
    } finally {
      await stack.stop();
    }
  }
  s.tables.push({
    title: 'Served through front → router → model server, beside the engine alone',
    columns: [
      'Targets',
      'Concurrency',
      ...LOAD_COLUMNS,
      'engine batch',
      'engine tokens/s',
      'served ÷ engine',
      'errors',
    ],
    rows,
    note:
      `tokens/s = sentences/s × ${settings.newTokens} (every sentence generates exactly that many: checked in figure 1). Engine batch = min(concurrency, batch_size × languages, ${DEFAULT_MAX_BATCH_ROWS} engine rows). ` +
      'Mean batch = jobs per batch the model server sent to its worker (mt_batch_size); rows per decoder run = the batch the engine really stepped ' +
      `(mt_engine_step_rows_total ÷ mt_engine_steps_total), both over the window. Front: ${frontKind ?? 'n/a'}.`,
  });
  const c = settings.servingConcurrencies.includes(64) ? 64 : Math.max(...settings.servingConcurrencies);
  for (const targets of [1, SEED_LANGUAGES.length]) {
    s.targets.push(
      checkTarget(
        `served ÷ engine tokens/s at concurrency ${c}, ${targets === 1 ? '1 language' : `${targets} languages`}`,
        efficiencyAt.get(`${targets}:${c}`) ?? Number.NaN,
        '>=',
        0.9,
      ),
    );
  }
  const one = data.find((d) => d.targets === 1 && d.concurrency === c);
  const all = data.find((d) => d.targets === SEED_LANGUAGES.length && d.concurrency === c);
  if (one && all) {
    s.notes.push(
      `At concurrency ${c}, 14 languages served ${formatRatio(ratio(all.sentencesPerS as number, one.sentencesPerS as number))} the sentences/s of 1 language; ` +
        `the engine stepped ${formatNumber(all.rowsPerStep as number)} and ${formatNumber(one.rowsPerStep as number)} rows per decoder run. Each language keeps its own queue and batches; ` +
        'the engine batches whatever it holds, and rows that arrive while others generate catch up with them (engine/loop/catch-up.ts).',
    );
  }
  ctx.shared.set(SERVED_ONE_LANGUAGE_KEY, oneLanguage);
  s.data = { rows: data, frontKind, medianEfficiency: median([...efficiencyAt.values()].filter(Number.isFinite)) };
  return s;
}

function errorsText(m: LoadMeasurement): string {
  const entries = Object.entries(m.load.errorsByStatus);
  return entries.length === 0 ? '0' : entries.map(([k, v]) => `${k}×${v}`).join(' ');
}

export const servingScenario: Scenario = { id: 'serving', title: '2. Serving efficiency through the full stack', run };
