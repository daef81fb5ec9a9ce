/**
 * @module bench/scenarios/serving — figure 2, serving efficiency: the full stack (front → router cluster → model
 * server → worker) under closed-loop clients at each concurrency, one target language and then all 14, the
 * mixed-length workload with the fixed output length. Served tokens/s is divided by the engine's own tokens/s at
 * the matching batch, measured right beside it: each concurrency level is paired with an engine probe (fresh
 * process, same rows, same target languages) and the two alternate which goes first, so a change in the
 * machine's load between the two halves of a ratio is as small as it can be.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { runProbe } from '../lib/probe-runner.js';
import { startStack } from '../lib/stack.js';
import { checkTarget, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { SEED_LANGUAGES } from '../lib/workload.js';
import { engineBatchRequest, type EngineProbeResult } from './engine-probe.js';
import { measure, type LoadMeasurement } from './load.js';

/** The engine batch a concurrency level corresponds to: the clients in flight, capped by batch_size. */
export function matchingBatch(concurrency: number, batchSize: number): number {
  return Math.min(concurrency, batchSize);
}

/** Engine tokens/s on a pre-formed batch of the first `batch` workload rows over `targets` (fresh process). */
export async function engineReference(
  ctx: BenchContext,
  modelDir: string,
  batch: number,
  targets: readonly string[],
  label: string,
): Promise<number> {
  const request = engineBatchRequest(ctx.settings, modelDir, batch, targets);
  const result = await runProbe<EngineProbeResult>(request, { workDir: ctx.workDir, label, timeoutMs: 15 * 60_000 });
  const tokensPerS = result.batches[0]?.tokensPerS ?? Number.NaN;
  ctx.log(`${label}: engine alone at batch ${batch}: ${tokensPerS.toFixed(1)} tokens/s`);
  return tokensPerS;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'serving',
    '2. Serving efficiency through the full stack',
    `Closed-loop clients through the front, the router cluster and the model server (BATCH_POLICY=immediate, ENGINE_SHARING=device, ` +
      `batch_size ${settings.batchSize}, max_batch_delay ${settings.maxBatchDelayMs} ms), the mixed-length workload, ${settings.newTokens} ` +
      'generated tokens per sentence; one target language, then all 14 (targets rotate per request). Each level is paired with the engine alone on a ' +
      'pre-formed batch of the matching size (same rows and targets, fresh process), in alternating order: served tokens/s ÷ engine tokens/s.',
  );
  const modelDir = await ctx.model(ctx.settings.speedModel);
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
    const stack = await startStack({
      name: `serving-${targets.length}`,
      workDir: ctx.workDir,
      modelDir,
      languages: targets,
      handler: 'translation',
      layers: 'front',
      batchSize: settings.batchSize,
      maxBatchDelayMs: settings.maxBatchDelayMs,
      batchPolicy: 'immediate',
      engineSharing: 'device',
      intraOpThreads: settings.intraOpThreads,
      maxNewTokens: settings.newTokens,
    });
    frontKind = stack.frontKind;
    try {
      for (const [ci, c] of settings.servingConcurrencies.entries()) {
        if (ctx.signal.aborted) break;
        const lastLevel = ci === settings.servingConcurrencies.length - 1;
        const batch = matchingBatch(c, settings.batchSize);
        let served: LoadMeasurement | undefined;
        let engine = Number.NaN;
        const arms = level++ % 2 === 0 ? (['serve', 'engine'] as const) : (['engine', 'serve'] as const);
        for (const [ai, arm] of arms.entries()) {
          if (ctx.signal.aborted) break;
          if (arm === 'serve') {
            // Drain unless nothing runs before this stack is stopped: queued work must not overlap the next measurement.
            const drain = !(lastLevel && ai === arms.length - 1);
            served = await measure(ctx, {
              origin: stack.urls.front!,
              entry: 'front',
              concurrency: c,
              targets,
              metricsUrl: stack.urls.metrics,
              drain,
              label: `serving ${label}`,
            });
          } else {
            engine = await engineReference(ctx, modelDir, batch, targets, `serving-engine-${targets.length}-b${batch}`);
          }
        }
        if (!served) break;
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
      'sentences/s',
      'tokens/s',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'mean batch',
      'engine batch',
      'engine tokens/s',
      'served ÷ engine',
      'errors',
    ],
    rows,
    note:
      `tokens/s = sentences/s × ${settings.newTokens} (every sentence generates exactly that many: checked in figure 1). Engine batch = min(concurrency, batch_size). ` +
      `Mean batch = jobs per batch the model server dispatched (mt_batch_size histogram) during the window. Front: ${frontKind ?? 'n/a'}.`,
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
      `At concurrency ${c}, 14 languages served ${ratio(all.sentencesPerS as number, one.sentencesPerS as number).toFixed(2)}× the sentences/s of 1 language, with mean batches of ${(all.meanBatchSize as number).toFixed(1)} vs ${(one.meanBatchSize as number).toFixed(1)} jobs: ` +
        'each language has its own queue and batches, and the engine steps batches that started at different times as separate cohorts unless the decoder graph takes a self-attention mask (the Hugging Face export does not).',
    );
  }
  s.data = { rows: data, frontKind, medianEfficiency: median([...efficiencyAt.values()].filter(Number.isFinite)) };
  return s;
}

function errorsText(m: LoadMeasurement): string {
  const entries = Object.entries(m.load.errorsByStatus);
  return entries.length === 0 ? '0' : entries.map(([k, v]) => `${k}×${v}`).join(' ');
}

export const servingScenario: Scenario = { id: 'serving', title: '2. Serving efficiency through the full stack', run };
