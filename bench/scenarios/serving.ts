/**
 * @module bench/scenarios/serving — figure 2, serving efficiency: the full stack (front → router cluster → model
 * server → worker) under closed-loop clients at each concurrency, one target language and then all 14, the
 * mixed-length workload with the fixed output length. Served tokens/s is divided by the engine's own tokens/s
 * at the matching batch size (figure 1, same run): what the serving layers keep of what the engine can do.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { startStack } from '../lib/stack.js';
import { checkTarget, section, type Section } from '../lib/report.js';
import { ratio } from '../lib/stats.js';
import { SEED_LANGUAGES } from '../lib/workload.js';
import { engineLimit } from './engine.js';
import { measure, type LoadMeasurement } from './load.js';

/** The engine batch a concurrency level corresponds to: the clients in flight, capped by batch_size. */
export function matchingBatch(concurrency: number, batchSize: number, measured: readonly number[]): number {
  const wanted = Math.min(concurrency, batchSize);
  // The closest measured batch size at or below what the server can form.
  return [...measured].sort((a, b) => a - b).reduce((best, b) => (b <= wanted ? b : best), measured[0]!);
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'serving',
    '2. Serving efficiency through the full stack',
    `Closed-loop clients through the front, the router cluster and the model server (BATCH_POLICY=immediate, ENGINE_SHARING=device, ` +
      `batch_size ${settings.batchSize}, max_batch_delay ${settings.maxBatchDelayMs} ms), the mixed-length workload, ${settings.newTokens} ` +
      'generated tokens per sentence; one target language, then all 14 (targets cycle per request). Served tokens/s ÷ the engine alone at the matching batch (figure 1, same run).',
  );
  const limit = await engineLimit(ctx);
  const modelDir = await ctx.model('m2m100-418m');
  const measuredBatches = [...limit.tokensPerS.keys()];
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  const byKey = new Map<string, LoadMeasurement>();
  let frontKind: string | undefined;
  for (const [label, targets] of [
    ['1 language', ['en']],
    ['14 languages', [...SEED_LANGUAGES]],
  ] as const) {
    if (ctx.signal.aborted) break;
    const stack = await startStack({
      name: `serving-${targets.length}`,
      workDir: ctx.workDir,
      modelDir,
      languages: targets.length === 1 ? targets : SEED_LANGUAGES,
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
      for (const c of settings.servingConcurrencies) {
        if (ctx.signal.aborted) break;
        const m = await measure(ctx, {
          origin: stack.urls.front!,
          entry: 'front',
          concurrency: c,
          targets,
          metricsUrl: stack.urls.metrics,
          drain: true,
          label: `serving ${label}`,
        });
        byKey.set(`${targets.length}:${c}`, m);
        const batch = matchingBatch(c, settings.batchSize, measuredBatches);
        const engineTokens = limit.tokensPerS.get(batch) ?? Number.NaN;
        const efficiency = ratio(m.tokensPerS, engineTokens);
        const l = m.load.latency;
        rows.push([label, c, m.sentencesPerS, m.tokensPerS, l.p50, l.p90, l.p99, m.meanBatchSize, batch, engineTokens, efficiency, errorsText(m)]);
        data.push({ targets: targets.length, concurrency: c, sentencesPerS: m.sentencesPerS, tokensPerS: m.tokensPerS, latencyMs: l, meanBatchSize: m.meanBatchSize, engineBatch: batch, engineTokensPerS: engineTokens, efficiency, errors: m.load.errorsByStatus, windowMs: m.load.windowMs, answered: m.load.completed, truncated: m.load.truncated });
      }
    } finally {
      await stack.stop();
    }
  }
  s.tables.push({
    title: 'Served through front → router → model server',
    columns: ['Targets', 'Concurrency', 'sentences/s', 'tokens/s', 'p50 ms', 'p90 ms', 'p99 ms', 'mean batch', 'engine batch', 'engine tokens/s', 'served ÷ engine', 'errors'],
    rows,
    note: `tokens/s = sentences/s × ${settings.newTokens} (every sentence generates exactly that many: checked in figure 1). Engine batch = min(concurrency, batch_size), the closest size measured in figure 1. Mean batch = jobs per dispatched batch (mt_batch_size histogram) during the window. Front: ${frontKind ?? 'n/a'}.`,
  });
  for (const targets of [1, SEED_LANGUAGES.length]) {
    const c = settings.servingConcurrencies.includes(64) ? 64 : Math.max(...settings.servingConcurrencies);
    const m = byKey.get(`${targets}:${c}`);
    const batch = matchingBatch(c, settings.batchSize, measuredBatches);
    s.targets.push(checkTarget(`served ÷ engine tokens/s at concurrency ${c}, ${targets === 1 ? '1 language' : `${targets} languages`}`, ratio(m?.tokensPerS ?? Number.NaN, limit.tokensPerS.get(batch) ?? Number.NaN), '>=', 0.9));
  }
  s.data = { rows: data, frontKind };
  return s;
}

function errorsText(m: LoadMeasurement): string {
  const entries = Object.entries(m.load.errorsByStatus);
  return entries.length === 0 ? '0' : entries.map(([k, v]) => `${k}×${v}`).join(' ');
}

export const servingScenario: Scenario = { id: 'serving', title: '2. Serving efficiency through the full stack', run };
