/**
 * @module bench/scenarios/load — one closed-loop translation (or echo) measurement against a system under test,
 * with the settings of this run, and the mean batch size the model server formed during its window.
 */
import type { BenchContext } from '../lib/context.js';
import { runClosedLoop, type LoadResult, type RequestSpec } from '../lib/load-generator.js';
import { findHistogram, scrape, windowMean, windowRowsPerStep } from '../lib/metrics.js';
import { job } from '../lib/workload.js';

/** Where requests enter: the front/router/baseline contract (`POST /`) or the model server's inference API. */
export type EntryKind = 'front' | 'model-server';

export interface LoadMeasurement {
  load: LoadResult;
  /** Sentences per second (successful). */
  sentencesPerS: number;
  /** Generated tokens per second: sentences/s × the fixed output length. */
  tokensPerS: number;
  /** Mean jobs per batch the model server dispatched during the window (NaN without a metrics URL). */
  meanBatchSize: number;
  /** The engine's real batch during the window: rows per decoder run (NaN without a metrics URL or decoder). */
  rowsPerStep: number;
  /**
   * How it was read: answers in a `window` of whole client cycles after a warm-up; one `cycle` — every client
   * sends one request at once, and the run lasts until the last answer; or a `short window`, shorter than a client
   * cycle (throughput only: its latencies are NaN).
   */
  method: 'window' | 'cycle' | 'short window';
}

/** Report columns for a translation load measurement, in the order the serving and policy tables print them. */
export const LOAD_COLUMNS = [
  'sentences/s',
  'tokens/s',
  'p50 ms',
  'p90 ms',
  'p99 ms',
  'mean batch',
  'rows per decoder run',
] as const;

/** Request number `seq` of the translation workload over `targets`, shaped for `entry`. */
export function translationRequest(
  entry: EntryKind,
  targets: readonly string[],
  sources?: readonly string[],
): (seq: number) => RequestSpec {
  return (seq) => {
    const j = job(seq, targets, sources);
    return entry === 'front'
      ? { path: '/', body: JSON.stringify(j), units: 1 }
      : {
          path: `/predictions/${j.tgt_lang}`,
          body: JSON.stringify({ src_lang: j.src_lang, src_text: j.src_text }),
          units: 1,
        };
  };
}

/** A 200 with `{"translated": "<string>"}` is good; anything else is tallied by its status or as bad-body. */
export function translatedCheck(status: number, body: Buffer): string | undefined {
  if (status !== 200) return String(status);
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { translated?: unknown };
    return typeof parsed.translated === 'string' ? undefined : 'bad-body';
  } catch {
    return 'bad-body';
  }
}

export interface MeasureOptions {
  origin: string;
  entry: EntryKind;
  concurrency: number;
  targets: readonly string[];
  /** Source languages the requests are drawn from (default the seed's 14; a one-pair model reads one). */
  sources?: readonly string[];
  /** The model server's metrics base URL, for the mean batch size. */
  metricsUrl?: string;
  /** `cycle`: one request per client, all sent at once, measured to the last answer (default: `window`). */
  method?: 'window' | 'cycle';
  /** Wait for in-flight answers at the end (the same server is measured again next). */
  drain: boolean;
  /**
   * Override the run's translation window settings (echo uses its own). `warmupPerClient` (default 1): answers
   * every client must have had before the window opens.
   */
  window?: { warmupMs: number; minWindowMs: number; cyclesPerClient: number; warmupPerClient?: number };
  label: string;
}

/** Run one closed-loop measurement (see bench/lib/load-generator for the window rules). */
export async function measure(ctx: BenchContext, options: MeasureOptions): Promise<LoadMeasurement> {
  const { settings } = ctx;
  const window = options.window ?? {
    warmupMs: settings.translationWarmupMs,
    minWindowMs: settings.translationWindowMs,
    cyclesPerClient: settings.translationCyclesPerClient,
  };
  // The batch-size histogram is scraped at the window's edges, so warm-up batches do not count.
  const scrapeAt = () =>
    options.metricsUrl ? scrape(`${options.metricsUrl}/metrics`).catch(() => undefined) : Promise.resolve(undefined);
  let opened: ReturnType<typeof scrapeAt> = Promise.resolve(undefined);
  let closed: ReturnType<typeof scrapeAt> = Promise.resolve(undefined);
  const cycle = options.method === 'cycle';
  // A cycle has no window edges to scrape at: the whole run is its window.
  if (cycle) opened = scrapeAt();
  const load = await runClosedLoop({
    origin: options.origin,
    concurrency: options.concurrency,
    request: translationRequest(options.entry, options.targets, options.sources),
    check: translatedCheck,
    ...(cycle
      ? { requests: options.concurrency }
      : {
          warmupMs: window.warmupMs,
          warmupPerClient: window.warmupPerClient ?? 1,
          minWindowMs: window.minWindowMs,
          // Whole cycles of every client, and never fewer than 8 answers (latency percentiles need a few); a
          // window longer than that ends after a whole round too, not between a batching server's bursts.
          minWindowCompletions: Math.max(8, window.cyclesPerClient * options.concurrency),
          wholeRounds: window.cyclesPerClient > 0,
          onWindowEnd: options.drain ? ('drain' as const) : ('abort' as const),
        }),
    maxTotalMs: settings.mode === 'full' ? 15 * 60_000 : 8 * 60_000,
    signal: ctx.signal,
    onWindowOpen: () => (opened = scrapeAt()),
    onWindowClose: () => (closed = scrapeAt()),
  });
  if (cycle) closed = scrapeAt();
  const [before, after] = await Promise.all([opened, closed]);
  let meanBatchSize = Number.NaN;
  let rowsPerStep = Number.NaN;
  if (before && after) {
    const name = findHistogram(after, /batch_size/);
    if (name) meanBatchSize = windowMean(before, after, name);
    rowsPerStep = windowRowsPerStep(before, after);
  }
  const sentencesPerS = load.unitsPerS;
  ctx.log(
    `${options.label} c=${options.concurrency}: ${sentencesPerS.toFixed(2)} sentences/s, p50 ${load.latency.p50.toFixed(0)} ms, ` +
      `batch ${meanBatchSize.toFixed(1)}, ${rowsPerStep.toFixed(1)} rows per decoder run, ${load.ok} ok${load.failed ? `, ${load.failed} failed ${JSON.stringify(load.errorsByStatus)}` : ''}${load.truncated ? ' (truncated)' : ''}`,
  );
  return {
    load,
    sentencesPerS,
    tokensPerS: sentencesPerS * settings.newTokens,
    meanBatchSize,
    rowsPerStep,
    method: cycle ? 'cycle' : 'window',
  };
}
