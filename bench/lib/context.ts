/**
 * @module bench/lib/context — what every scenario gets: the settings of this run (quick or full), a work folder,
 * the abort signal (Ctrl-C), a logger and the model folders.
 */
import type { Section } from './report.js';
import type { BenchModel } from './models.js';

/** Everything that sizes a run. `quick` and `full` differ only in durations, repeats and concurrency lists. */
export interface BenchSettings {
  mode: 'quick' | 'full' | 'smoke';
  /** The model every speed figure runs on (m2m100-418m; `tiny` in smoke runs, which only check the plumbing). */
  speedModel: BenchModel;
  /** The model of the one-engine-per-language memory layout (must fit 14 times in memory). */
  perLanguageModel: BenchModel;
  /** Generated tokens per sentence, the same for every system (min = max new tokens), greedy search. */
  newTokens: number;
  /** onnxruntime intra-op threads for every engine, the baseline and the ceiling (0 = onnxruntime's default). */
  intraOpThreads: number;
  /** Batch sizes of the engine-limit figure. */
  engineBatches: number[];
  /** Fresh-process repeats of the engine and ceiling probes (medians reported). */
  engineRepeats: number;
  /** Timed generations per batch size in one probe, each on fresh sentences (after one warm-up at the largest batch). */
  engineRunsPerBatch: number;
  /** Interleaved rounds of the weight-layout figure at batch 64 (4× as many at batch 1). */
  layoutPairs: number;
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
  /** Load window of the memory figure, ms. */
  memoryWindowMs: number;
  /** Echo (overhead) load window, ms, and its concurrency levels. */
  echoWindowMs: number;
  echoConcurrencies: number[];
  /** Request pairs of the interleaved concurrency-1 latency comparison (figure 3), after 2 warm-up pairs. */
  latencyPairs: number;
  /** Side-by-side repeats of the load comparisons (alternating order, fresh processes). */
  loadRepeats: number;
  /**
   * Quick runs take a measurement once and let every figure that needs the same one read it from
   * `BenchContext.shared` (the engine at a batch size, mt-serve's full stack on one language); full runs measure
   * each figure's arms side by side in fresh processes.
   */
  reuse: boolean;
}

/**
 * `full`: the published figures (≈ 1 h 15 min here). `quick`: every figure in ≈ 9 min — one repeat, windows of
 * about one client cycle, measurements shared between figures. `smoke`: every code path on the tiny model in a
 * minute or two — its numbers mean nothing (used while editing the bench).
 */
export function settingsFor(mode: 'quick' | 'full' | 'smoke', intraOpThreads: number): BenchSettings {
  if (mode === 'smoke') {
    return {
      ...settingsFor('quick', intraOpThreads),
      mode,
      speedModel: 'tiny',
      perLanguageModel: 'tiny',
      engineRepeats: 1,
      layoutPairs: 1,
      ceilingMinTimeMs: 50,
      servingConcurrencies: [1, 4],
      batchSize: 4,
      maxBatchDelayMs: 20,
      translationWarmupMs: 200,
      translationWindowMs: 1_000,
      echoWindowMs: 500,
      echoConcurrencies: [1, 4],
      memoryWindowMs: 500,
      latencyPairs: 3,
    };
  }
  const quick = mode === 'quick';
  return {
    mode,
    speedModel: 'm2m100-418m',
    perLanguageModel: 'bench-mid',
    newTokens: 16,
    intraOpThreads,
    engineBatches: [1, 8, 32, 64],
    engineRepeats: quick ? 1 : 3,
    engineRunsPerBatch: quick ? 1 : 3,
    layoutPairs: quick ? 3 : 8,
    ceilingMinTimeMs: quick ? 1_000 : 2_000,
    servingConcurrencies: quick ? [1, 64] : [1, 8, 64, 256],
    batchSize: 64,
    maxBatchDelayMs: 100,
    translationWarmupMs: quick ? 2_000 : 15_000,
    translationWindowMs: quick ? 5_000 : 60_000,
    translationCyclesPerClient: quick ? 1 : 2,
    memoryWindowMs: quick ? 3_000 : 20_000,
    echoWindowMs: quick ? 2_000 : 10_000,
    echoConcurrencies: quick ? [1, 32] : [1, 8, 64],
    latencyPairs: quick ? 12 : 40,
    loadRepeats: quick ? 1 : 2,
    reuse: quick,
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
  /** Measurements one figure leaves for another, by key (read only when `settings.reuse`). */
  shared: Map<string, unknown>;
}

export interface Scenario {
  id: string;
  title: string;
  run: (ctx: BenchContext) => Promise<Section>;
}
