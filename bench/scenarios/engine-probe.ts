/**
 * @module bench/scenarios/engine-probe — the in-process half of the engine-limit figure (runs inside
 * `bench/probe.ts`, a fresh process): load the TranslationEngine, then time `translate` on pre-formed batches
 * of the workload's sentences with a fixed output length (minNewTokens = maxNewTokens, greedy).
 */
import { performance } from 'node:perf_hooks';
import { TranslationEngine } from '../../model-server/engine/engine.js';
import type { BenchSettings } from '../lib/context.js';
import { job } from '../lib/workload.js';

export interface EngineProbeRequest {
  kind: 'engine';
  modelDir: string;
  /** Batch sizes, in the order to run them. */
  batches: number[];
  newTokens: number;
  /** Timed runs per batch size (the median is kept), after one untimed warm-up of the whole engine. */
  runsPerBatch: number;
  intraOpThreads: number;
  /** At least max(batches) rows; a batch of n is the first n. */
  rows: EngineRow[];
  /**
   * Rows to translate once more with maxNewTokens only (no minimum), as the model server runs them: the result
   * says whether the served path also generates exactly newTokens per sentence.
   */
  verifyRows?: EngineRow[];
}

export interface EngineRow {
  srcLang: string;
  text: string;
  tgtLang: string;
}

/** The first `count` rows of the workload over `targets`, as engine rows. */
/** The probe request for one pre-formed batch of the first `batch` workload rows over `targets`, at the run's settings. */
export function engineBatchRequest(
  settings: BenchSettings,
  modelDir: string,
  batch: number,
  targets: readonly string[],
): EngineProbeRequest {
  return {
    kind: 'engine',
    modelDir,
    batches: [batch],
    newTokens: settings.newTokens,
    runsPerBatch: settings.engineRunsPerBatch,
    intraOpThreads: settings.intraOpThreads,
    rows: engineRows(batch, targets),
  };
}

export function engineRows(count: number, targets: readonly string[]): EngineRow[] {
  return Array.from({ length: count }, (_, i) => job(i, targets)).map((j) => ({
    srcLang: j.src_lang,
    text: j.src_text,
    tgtLang: j.tgt_lang,
  }));
}

export interface EngineBatchResult {
  batch: number;
  /** Median seconds of one `translate` of the whole batch. */
  seconds: number;
  tokensPerS: number;
  sentencesPerS: number;
  /** Generated tokens per sentence (every row; should equal newTokens). */
  tokensPerSentence: number;
  /** Encoder tokens per sentence, specials included, mean over the batch. */
  sourceTokens: number;
  /** Mean rows per decoder run during the timed runs (the engine's real batch), and runs per generated token. */
  rowsPerDecoderRun: number;
  decoderRunsPerStep: number;
  /** Share of the timed wall time spent in encoder runs, decoder runs, search and tensor re-layout (engine stats). */
  phases: { encoder: number; decoder: number; search: number; layout: number };
}

export interface EngineProbeResult {
  loadSeconds: number;
  device: string;
  joinable: boolean;
  batches: EngineBatchResult[];
  /** Generated-token count → sentences, for verifyRows (absent when not asked). */
  maxOnlyLengths?: Record<string, number>;
}

export async function runEngineProbe(request: EngineProbeRequest): Promise<EngineProbeResult> {
  const t0 = performance.now();
  const engine = await TranslationEngine.load({
    modelDir: request.modelDir,
    intraOpThreads: request.intraOpThreads,
    device: { kind: 'cpu' },
  });
  const loadSeconds = (performance.now() - t0) / 1000;
  const options = { numBeams: 1, minNewTokens: request.newTokens, maxNewTokens: request.newTokens };
  const rows = (n: number) => request.rows.slice(0, n);
  try {
    // One small untimed batch: onnxruntime allocates its arenas and prepacks on the first runs.
    await engine.translate(rows(Math.min(4, request.rows.length)), options);
    const batches: EngineBatchResult[] = [];
    for (const batch of request.batches) {
      if (batch > request.rows.length)
        throw new RangeError(`batch ${batch} needs ${batch} rows, got ${request.rows.length}`);
      const times: number[] = [];
      let tokens = 0;
      let sourceTokens = 0;
      const before = engine.stats();
      for (let run = 0; run < request.runsPerBatch; run++) {
        const start = performance.now();
        const out = await engine.translate(rows(batch), options);
        times.push((performance.now() - start) / 1000);
        tokens += out.reduce((sum, t) => sum + t.generatedTokens, 0);
        sourceTokens += out.reduce((sum, t) => sum + t.inputTokens, 0);
      }
      const after = engine.stats();
      const wallMs = times.reduce((a, b) => a + b, 0) * 1000;
      const share = (key: 'encoderMs' | 'decoderMs' | 'searchMs' | 'layoutMs') => (after[key] - before[key]) / wallMs;
      times.sort((a, b) => a - b);
      const seconds = times[Math.floor((times.length - 1) / 2)]!;
      const runs = request.runsPerBatch;
      const tokensPerSentence = tokens / (runs * batch);
      const decoderRuns = after.decoderRuns - before.decoderRuns;
      batches.push({
        batch,
        seconds,
        tokensPerS: (tokensPerSentence * batch) / seconds,
        sentencesPerS: batch / seconds,
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
    if (request.verifyRows) {
      maxOnlyLengths = {};
      for (const t of await engine.translate(request.verifyRows, { numBeams: 1, maxNewTokens: request.newTokens })) {
        maxOnlyLengths[t.generatedTokens] = (maxOnlyLengths[t.generatedTokens] ?? 0) + 1;
      }
    }
    return {
      loadSeconds,
      device: `${engine.device.kind}/${engine.device.provider}`,
      joinable: engine.joinable,
      batches,
      maxOnlyLengths,
    };
  } finally {
    await engine.close();
  }
}
