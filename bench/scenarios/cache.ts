/**
 * @module bench/scenarios/cache — the translation cache (CACHE_MAX_BYTES): sentences/s through the whole stack on
 * a workload where 30% of the requests repeat a sentence sent before, with the cache and without it.
 *
 * Why 30%: repeated sentences are what a cache can serve, and how many there are depends on the traffic. In
 * localization, the share of new text that exactly matches a translation memory is commonly put at 20–50% for
 * repetitive business content (UI strings, updated manuals, support macros, email boilerplate) and near 0% for
 * free text such as chat or news; 30% is a middle figure for a shared translation service, an assumption stated
 * here rather than a measurement. A repeat picks an earlier request of the run at random, so sentences repeated
 * once tend to be repeated again (a few common lines and a long tail), as in such traffic.
 *
 * Both arms run on one stack, one after the other, with different sentences: "without" sends
 * `Cache-Control: no-store` (no lookup, nothing stored), so the two differ only in the cache. A repeat whose first
 * copy is still being translated misses, so the measured hit ratio is a little under the repeat rate.
 */
import { ENV_DEFAULTS } from '../../common/config.js';
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop, type LoadResult } from '../lib/load-generator.js';
import { scrape, total, type Sample } from '../lib/metrics.js';
import { formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { job, type TranslationJob } from '../lib/workload.js';
import { translatedCheck } from './load.js';

/** Share of requests that repeat an earlier request's sentence (see the module comment for the source). */
export const REPEAT_RATE = 0.3;
const TARGETS = ['de', 'fr', 'ko', 'ja'] as const;
const WINDOW_MIN_MS = 5_000;
const WARMUP_MIN_MS = 2_000;
const WITHOUT_FIRST = ['without', 'with'] as const;
const WITH_FIRST = ['with', 'without'] as const;

/** A deterministic number in [0, 1) for (seq, salt). */
function unit(seq: number, salt: number): number {
  let x = (seq * 0x9e3779b1 + salt * 0x85ebca6b) >>> 0;
  x ^= x >>> 16;
  x = Math.imul(x, 0x7feb352d) >>> 0;
  x ^= x >>> 15;
  x = Math.imul(x, 0x846ca68b) >>> 0;
  x ^= x >>> 16;
  return (x >>> 0) / 0x1_0000_0000;
}

/** Request `seq` of an arm whose new sentences start at `base`: a new job, or (REPEAT_RATE) an earlier one's. */
export function cacheJob(seq: number, base: number): TranslationJob {
  if (seq > 0 && unit(seq, 1) < REPEAT_RATE) return cacheJob(Math.floor(unit(seq, 2) * seq), base);
  return job(base + seq, TARGETS);
}

interface Arm {
  label: string;
  load: LoadResult;
  /** Hits ÷ lookups over the window (NaN without lookups: the cache was bypassed). */
  hitRatio: number;
  /** Decoder rows the engine ran per sentence answered in the window: the work the cache saves, unmoved by load. */
  rowsPerSentence: number;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'cache',
    '10. Translation cache',
    `Single-sentence requests through the front, ${Math.round(REPEAT_RATE * 100)}% of them repeating an earlier sentence (same languages), ` +
      'with the model server’s translation cache and with it bypassed (Cache-Control: no-store), on one stack.',
  );
  // A cache saves engine work, which shows where the engine is the bottleneck: on the tiny model of a smoke run the
  // HTTP path and the load generator take most of the CPU, so a smoke run uses the 45M-parameter bench-mid instead.
  const model = settings.mode === 'smoke' ? 'bench-mid' : settings.speedModel;
  const modelDir = await ctx.model(model);
  const stack = await startRunStack(ctx, {
    name: 'cache',
    modelDir,
    languages: TARGETS,
    cacheMaxBytes: Number(ENV_DEFAULTS.CACHE_MAX_BYTES),
  });
  const concurrency = Math.max(...settings.servingConcurrencies);
  const arms: Arm[] = [];
  try {
    const order: ('with' | 'without')[] = [];
    // At least one pair in each order: the host's load drifts between arms.
    for (let r = 0; r < Math.max(2, settings.loadRepeats); r++)
      order.push(...(r % 2 === 0 ? WITHOUT_FIRST : WITH_FIRST));
    for (const [i, arm] of order.entries()) {
      if (ctx.signal.aborted) break;
      const base = 1_000_000 * (i + 1);
      const headers = arm === 'without' ? { 'cache-control': 'no-store' } : undefined;
      let opened: Promise<Sample[]> = Promise.resolve([]);
      let closed: Promise<Sample[]> = Promise.resolve([]);
      const load = await runClosedLoop({
        origin: stack.frontUrl!,
        concurrency,
        request: (seq) => ({
          path: '/',
          body: JSON.stringify(cacheJob(seq, base)),
          units: 1,
          ...(headers ? { headers } : {}),
        }),
        check: translatedCheck,
        // Each arm warms up on its own sentences first (the first arm would otherwise carry a cold engine).
        warmupMs: Math.max(settings.translationWarmupMs, WARMUP_MIN_MS),
        warmupPerClient: 1,
        // Long enough that the repeats find their first copies answered (a smoke run's 1 s window would not).
        minWindowMs: Math.max(settings.translationWindowMs, WINDOW_MIN_MS),
        minWindowCompletions: 2 * concurrency,
        onWindowEnd: 'drain',
        maxTotalMs: 10 * WINDOW_MIN_MS + 120_000,
        signal: ctx.signal,
        onWindowOpen: () => (opened = scrape(`${stack.metrics}/metrics`)),
        onWindowClose: () => (closed = scrape(`${stack.metrics}/metrics`)),
      });
      const [before, after] = [await opened, await closed];
      const delta = (name: string) => total(after, name) - total(before, name);
      const hits = delta('mt_cache_hits_total');
      const lookups = hits + delta('mt_cache_misses_total');
      const label = arm === 'with' ? 'with the cache' : 'without (Cache-Control: no-store)';
      const rowsPerSentence = delta('mt_engine_step_rows_total') / Math.max(1, load.ok);
      arms.push({ label, load, hitRatio: lookups > 0 ? hits / lookups : Number.NaN, rowsPerSentence });
      ctx.log(`cache ${label}: ${load.unitsPerS.toFixed(1)} sentences/s, p50 ${load.latency.p50.toFixed(0)} ms`);
    }
  } finally {
    await stack.stop();
  }

  const median = (values: number[]) => {
    const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
    if (sorted.length === 0) return Number.NaN;
    const mid = sorted.length >> 1;
    return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
  };
  const of = (label: string) => arms.filter((a) => a.label.startsWith(label));
  const withCache = median(of('with the').map((a) => a.load.unitsPerS));
  const without = median(of('without').map((a) => a.load.unitsPerS));
  const rowsWith = median(of('with the').map((a) => a.rowsPerSentence));
  const rowsWithout = median(of('without').map((a) => a.rowsPerSentence));
  s.tables.push({
    title: `Sentences/s at concurrency ${concurrency}, ${Math.round(REPEAT_RATE * 100)}% repeated sentences`,
    columns: [
      'Arm',
      'sentences/s',
      'p50 ms',
      'p90 ms',
      'p99 ms',
      'cache hit ratio',
      'decoder rows per sentence',
      'failed',
    ],
    rows: arms.map((a) => [
      a.label,
      a.load.unitsPerS,
      a.load.latency.p50,
      a.load.latency.p90,
      a.load.latency.p99,
      Number.isNaN(a.hitRatio) ? '–' : `${(a.hitRatio * 100).toFixed(0)}%`,
      a.rowsPerSentence,
      a.load.failed,
    ]),
    note: 'Hit ratio from mt_cache_hits_total and mt_cache_misses_total, decoder rows from mt_engine_step_rows_total, over the window. Arms in alternating order, one stack.',
  });
  s.notes.push(
    `With the cache the stack served ${formatRatio(withCache / without)} the sentences/s it served without (medians).`,
    `Engine work per sentence served: ${formatRatio(rowsWith / rowsWithout)} with the cache (decoder rows, medians).`,
    `A hit costs the model server a lookup and no engine work, so the gain approaches 1 ÷ (1 − hit ratio) where the engine is the bottleneck (model: ${model}).`,
  );
  s.data = {
    repeatRate: REPEAT_RATE,
    concurrency,
    model,
    withCache,
    without,
    ratio: withCache / without,
    rowsPerSentence: { withCache: rowsWith, without: rowsWithout },
    arms: arms.map((a) => ({
      label: a.label,
      unitsPerS: a.load.unitsPerS,
      latency: a.load.latency,
      hitRatio: a.hitRatio,
    })),
  };
  return s;
}

export const cacheScenario: Scenario = {
  id: 'cache',
  title: '10. Translation cache',
  run,
};
