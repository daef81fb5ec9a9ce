/** @module engine/generator-stats — the step loop's counters since load, read by benchmarks and metrics. */

/** The counters, as an engine that has done nothing yet has them: every one a number, starting at 0. */
const EMPTY = {
  /** Decoder runs. */
  decoderRuns: 0,
  /** Sum over decoder runs of the rows in the run (beams count once each). */
  decoderRows: 0,
  /** Admitted groups encoded (each starts one cohort). */
  encoderRuns: 0,
  /** onnxruntime encoder calls (an admitted group is encoded in groups of similar source length). */
  encoderCalls: 0,
  encodedRows: 0,
  /** Cohorts merged into another (rows that joined mid-generation, or caught up with an older cohort). */
  merges: 0,
  /** Cohort-steps skipped so that a younger cohort could catch up (catch-up.ts). */
  pauses: 0,
  /**
   * Bytes that crossed between the host and the device in decoder steps (their cross-attention and beam head runs
   * included) and in re-layouts on the device: every input fed from and every output returned to host memory. On
   * the CPU provider they are the step's host-memory traffic (the caches too); on a GPU they are copies, and with
   * the state on the device (docs/engine.md, "Devices and threads") only tokens, scores, indices and lengths. Per
   * row per step: ÷ decoderRows.
   */
  decoderHostBytes: 0,
  /** Sequences cancelled by their caller (waiting or generating; each once). */
  cancelled: 0,
  /** Decoder rows gathered out of their cohort because their sequence was cancelled (beams count once each). */
  cancelledRows: 0,
  /**
   * Sequences rejected because a model run failed on them alone (an onnxruntime error on their rows, e.g. an id
   * outside the vocabulary), while the rest of their batch went on.
   */
  failed: 0,
  /** Sequences answered at their token cap (maxNewTokens, or the source-length cap) before `</s>`: maybe cut short. */
  cappedRows: 0,
  /**
   * Step time (ms) of bulk and of interactive cohorts at boundaries where both classes had cohorts: the share the
   * bulk ones got under contention (generate.ts BULK_SHARE) is bulk ÷ (bulk + interactive).
   */
  contendedBulkMs: 0,
  contendedInteractiveMs: 0,
  /**
   * Wall time inside encoder runs (with the cross-attention runs over the encoded tokens, encode.ts), decoder runs,
   * search decisions and tensor re-layouts, cache appends included (ms).
   */
  encoderMs: 0,
  decoderMs: 0,
  searchMs: 0,
  layoutMs: 0,
};

export type GeneratorStats = typeof EMPTY;

/** Counters of an engine that has done nothing yet. */
export function emptyGeneratorStats(): GeneratorStats {
  return { ...EMPTY };
}
