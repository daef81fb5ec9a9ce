/**
 * @module bench/scenarios/engine-probe — the in-process half of the engine-limit figure (runs inside
 * `bench/probe.ts`, a fresh process): load the TranslationEngine, warm it, then time `translate` on pre-formed
 * batches of the workload's sentences with a fixed output length (minNewTokens = maxNewTokens, greedy).
 */
import { performance } from 'node:perf_hooks';
import { TranslationEngine } from '../../model-server/engine/engine.js';
import type { ModelDtype } from '../../model-server/engine/session.js';
import type { BenchSettings } from '../lib/context.js';
import { job, SEED_LANGUAGES } from '../lib/workload.js';

export interface EngineProbeRequest {
  kind: 'engine';
  modelDir: string;
  /** Batch sizes, in the order to run them. */
  batches: number[];
  newTokens: number;
  /** Timed runs per batch size (small batches take more, see runsFor), after the warm-up. */
  runsPerBatch: number;
  intraOpThreads: number;
  /** Target languages the workload rows rotate over (bench/lib/workload `job`). */
  targets: readonly string[];
  /** Weights to load (default fp32: the figure's reference arm; the int8 arms name theirs). */
  dtype?: ModelDtype;
  /**
   * Also translate this many workload rows over the 14 languages with maxNewTokens only (no minimum), as the model
   * server runs them: the result says whether the served path also generates exactly newTokens per sentence.
   */
  verifyCount?: number;
}

/** Timed runs of batch `batch`: at least `runsPerBatch`, and at least 8 sentences in all (a batch of 1 sees the length mix). */
export function runsFor(batch: number, runsPerBatch: number): number {
  return Math.max(runsPerBatch, Math.ceil(8 / batch));
}

export interface EngineRow {
  srcLang: string;
  text: string;
  tgtLang: string;
}

/** Workload rows `first … first + count - 1` over `targets`, as engine rows. */
export function engineRows(count: number, targets: readonly string[], first = 0): EngineRow[] {
  return Array.from({ length: count }, (_, i) => job(first + i, targets)).map((j) => ({
    srcLang: j.src_lang,
    text: j.src_text,
    tgtLang: j.tgt_lang,
  }));
}

/** The probe request for the given batch sizes of the workload over `targets`, at the run's settings. */
export function engineBatchRequest(
  settings: BenchSettings,
  modelDir: string,
  batches: number[],
  targets: readonly string[],
): EngineProbeRequest {
  return {
    kind: 'engine',
    modelDir,
    batches,
    newTokens: settings.newTokens,
    runsPerBatch: settings.engineRunsPerBatch,
    intraOpThreads: settings.intraOpThreads,
    targets,
  };
}

export interface EngineBatchResult {
  batch: number;
  /** Timed runs and their seconds (each on sentences no other run used). */
  runs: number;
  seconds: number[];
  /** Generated tokens over the timed runs ÷ their summed time. */
  tokensPerS: number;
  sentencesPerS: number;
  /** Generated tokens per sentence (every row; should equal newTokens). */
  tokensPerSentence: number;
  /** Encoder tokens per sentence, specials included, mean over the timed rows. */
  sourceTokens: number;
  /** Mean rows per decoder run during the timed runs (the engine's real batch), and runs per generated token. */
  rowsPerDecoderRun: number;
  decoderRunsPerStep: number;
  /** Share of the timed wall time spent in encoder runs, decoder runs, search and tensor re-layout (engine stats). */
  phases: { encoder: number; decoder: number; search: number; layout: number };
}

export interface EngineProbeResult {
  loadSeconds: number;
  /** The weights loaded. */
  dtype: string;
  device: string;
  joinable: boolean;
  batches: EngineBatchResult[];
  /** Generated-token count → sentences, for the verify rows (absent when not asked). */
  maxOnlyLengths?: Record<string, number>;
}

/** Workload rows of the warm-up: far from the timed ones, so no timed run repeats a shape the warm-up saw. */
const WARMUP_FIRST_ROW = 1_000_000;

/**
 * Load the engine, warm it with one untimed generation at the largest batch (onnxruntime grows its arena and
 * plans memory on first use: a cold batch-64 run of M2M100-418M took ~1.3× a warm one here), then time each batch
 * size on sentences no earlier run used — as served traffic does: re-running the very same batch (identical shapes
 * at every step) measured up to ~1.25× faster than fresh sentences of the same length mix.
 */
export async function runEngineProbe(request: EngineProbeRequest): Promise<EngineProbeResult> {
  const t0 = performance.now();
  const engine = await TranslationEngine.load({
    modelDir: request.modelDir,
    intraOpThreads: request.intraOpThreads,
    device: { kind: 'cpu' },
    dtype: request.dtype ?? 'fp32',
  });
  const loadSeconds = (performance.now() - t0) / 1000;
  const options = { numBeams: 1, minNewTokens: request.newTokens, maxNewTokens: request.newTokens };
  try {
    await engine.translate(engineRows(Math.max(...request.batches), request.targets, WARMUP_FIRST_ROW), options);
    let nextRow = 0;
    const batches: EngineBatchResult[] = [];
    for (const batch of request.batches) {
      const runs = runsFor(batch, request.runsPerBatch);
      const seconds: number[] = [];
      let tokens = 0;
      let sourceTokens = 0;
      const before = engine.stats();
      for (let run = 0; run < runs; run++) {
        const rows = engineRows(batch, request.targets, nextRow);
        nextRow += batch;
        const start = performance.now();
        const out = await engine.translate(rows, options);
        seconds.push((performance.now() - start) / 1000);
        tokens += out.reduce((sum, t) => sum + t.generatedTokens, 0);
        sourceTokens += out.reduce((sum, t) => sum + t.inputTokens, 0);
      }
      const after = engine.stats();
      const wall = seconds.reduce((a, b) => a + b, 0);
      const share = (key: 'encoderMs' | 'decoderMs' | 'searchMs' | 'layoutMs') =>
        (after[key] - before[key]) / (wall * 1000);
      const tokensPerSentence = tokens / (runs * batch);
      const decoderRuns = after.decoderRuns - before.decoderRuns;
      batches.push({
        batch,
        runs,
        seconds,
        tokensPerS: tokens / wall,
        sentencesPerS: (runs * batch) / wall,
        tokensPerSentence,
        sourceTokens: sourceTokens / (runs * batch),
        rowsPerDecoderRun: (after.decoderRows - before.decoderRows) / decoderRuns,
        decoderRunsPerStep: decoderRuns / (runs * tokensPerSentence),
        phases: {
          encoder: share('encoderMs'),
          decoder: share('decoderMs'),
          search: share('searchMs'),
          layout: share('layoutMs'),
        },
      });
    }
    let maxOnlyLengths: Record<string, number> | undefined;
    if (request.verifyCount) {
      maxOnlyLengths = {};
      const rows = engineRows(request.verifyCount, SEED_LANGUAGES);
      for (const t of await engine.translate(rows, { numBeams: 1, maxNewTokens: request.newTokens })) {
        maxOnlyLengths[t.generatedTokens] = (maxOnlyLengths[t.generatedTokens] ?? 0) + 1;
      }
    }
    return {
      loadSeconds,
      dtype: engine.dtype,
      device: `${engine.device.kind}/${engine.device.provider}`,
      joinable: engine.joinable,
      batches,
      maxOnlyLengths,
    };
  } finally {
    await engine.close();
  }
}
