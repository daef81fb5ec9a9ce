/**
 * @module bench/lib/context — what every scenario gets: the settings of this run (quick or full), a work folder,
 * the abort signal (Ctrl-C), a logger, the model folders, and results other scenarios measured in the same run.
 */
import type { Section } from './report.js';
import type { BenchModel } from './models.js';

/** Everything that sizes a run. `quick` and `full` differ only in durations, repeats and concurrency lists. */
export interface BenchSettings {
  mode: 'quick' | 'full';
  /** Generated tokens per sentence, the same for every system (min = max new tokens), greedy search. */
  newTokens: number;
  /** onnxruntime intra-op threads for every engine, the baseline and the ceiling (0 = onnxruntime's default). */
  intraOpThreads: number;
  /** Batch sizes of the engine-limit figure. */
  engineBatches: number[];
  /** Fresh-process repeats of the engine and ceiling probes (medians reported). */
  engineRepeats: number;
  /** Timed generations per batch size in one probe (after one warm-up). */
  engineRunsPerBatch: number;
  /** Minimum timed milliseconds per (shape, rows) in the MatMul ceiling. */
  ceilingMinTimeMs: number;
  /** Concurrency levels of the serving-efficiency figure. */
  servingConcurrencies: number[];
  /** The model server's batch_size and max_batch_delay for every language. */
  batchSize: number;
  maxBatchDelayMs: number;
  /** Translation load windows: warm-up and window in ms, and whole cycles (answers per client) in each. */
  translationWarmupMs: number;
  translationWindowMs: number;
  translationCyclesPerClient: number;
  /** Echo (overhead) load window, ms, and its concurrency levels. */
  echoWindowMs: number;
  echoConcurrencies: number[];
  /** Side-by-side repeats of the load comparisons (alternating order, fresh processes). */
  loadRepeats: number;
}

export function settingsFor(mode: 'quick' | 'full', intraOpThreads: number): BenchSettings {
  const quick = mode === 'quick';
  return {
    mode,
    newTokens: 16,
    intraOpThreads,
    engineBatches: [1, 8, 32, 64],
    engineRepeats: quick ? 2 : 3,
    engineRunsPerBatch: quick ? 1 : 2,
    ceilingMinTimeMs: quick ? 600 : 2_000,
    servingConcurrencies: quick ? [1, 64] : [1, 8, 64, 256],
    batchSize: 64,
    maxBatchDelayMs: 100,
    translationWarmupMs: quick ? 5_000 : 15_000,
    translationWindowMs: quick ? 15_000 : 60_000,
    translationCyclesPerClient: quick ? 1 : 2,
    echoWindowMs: quick ? 3_000 : 10_000,
    echoConcurrencies: quick ? [1, 32] : [1, 8, 64],
    loadRepeats: quick ? 1 : 3,
  };
}

export interface BenchContext {
  settings: BenchSettings;
  /** Repository root. */
  root: string;
  /** A private temp folder for this run (model stores, logs, probe results). */
  workDir: string;
  /** Aborted on Ctrl-C / SIGTERM: stop measuring and return what there is. */
  signal: AbortSignal;
  log: (line: string) => void;
  /** The folder of a bench model, built on first use. */
  model: (name: BenchModel) => Promise<string>;
  /** Results shared between scenarios of the same run (e.g. engine tokens/s per batch for serving). */
  shared: Map<string, unknown>;
}

export interface Scenario {
  id: string;
  title: string;
  run: (ctx: BenchContext) => Promise<Section>;
}
