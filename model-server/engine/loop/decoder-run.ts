/**
 * @module engine/decoder-run — what one decoder run returns (either path: step.ts through the host, step-device.ts with
 * the state on the device), and what both count and read alike.
 */
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import type { Cohort, CohortContext, DeviceTensors } from './cohort.js';
import type { StepScores } from '../decoding.js';

type TopK = Extract<StepScores, { kind: 'topk' }>;

/** What a decoder run returned, with what the step needs to apply it. */
export interface DecoderRun {
  out: ort.InferenceSession.ReturnType;
  /** The self-attention mask fed (null: the graph takes none); the cohort's mask after this step. */
  selfMask: BigInt64Array | null;
  /** Output names of the greedy top-2, when this step fetched those instead of the logits. */
  top2: { values: string; ids: string } | null;
  /** The beam head's answer for this step's logits (beam-head.ts); null: the host scans the logits. */
  topk: TopK | null;
  /** The cross-attention cache the cross graph made for this first step (null: in `out`, or not the first). */
  cross: Float32Array[] | null;
  /** `[n, 1, S]` the read layer's cross-attention, fetched when a row keeps it (`SearchState.keepsAttention`). */
  attention?: Float32Array;
  /** Wall time of the run (ms). */
  ms: number;
  /** Bytes of the feeds and outputs in host memory, the cross-attention run's included. */
  hostBytes: number;
  /**
   * On the device-state path: the cohort's device tensors after this step — the new self-attention cache (made by
   * this run), and the cross cache and encoder mask (made by this run on the first step, else the cohort's own).
   */
  device?: DeviceTensors;
}

/** Bytes of `tensors` that live in host memory (a GPU-located tensor's data is never touched). */
export function hostBytesOf(tensors: Iterable<ort.Tensor>): number {
  let bytes = 0;
  for (const t of tensors) if (t.location === 'cpu') bytes += (t.data as ArrayBufferView).byteLength;
  return bytes;
}

/** The top-k scores a run's `out` holds under `names` (the beam head's or the decoder graph's own). */
export function topkOf(
  out: ort.InferenceSession.ReturnType,
  names: Record<'values' | 'ids' | 'logSumExp', string>,
  k: number,
): TopK {
  const [values, ids, logSumExp] = [names.values, names.ids, names.logSumExp].map((name) => out[name]!.data);
  return { kind: 'topk', values, ids, logSumExp, k } as TopK;
}

/**
 * A step's first feeds on either path: each row's last token (`T` = 1) or whole prefix (no cache), and the
 * self-attention mask when the decoder takes one (the cohort's past mask, then ones).
 */
export function tokenFeeds(ctx: CohortContext, cohort: Cohort, T: number) {
  const { rows, pastLength: P } = cohort;
  const n = rows.length;
  const start = ctx.config.decoderStartTokenId;
  const ids = new BigInt64Array(n * T);
  rows.forEach(({ hyp: { tokens } }, r) => {
    if (T === 1) ids[r] = BigInt(tokens.length === 0 ? start : tokens[tokens.length - 1]!);
    else for (let t = 0; t < T; t++) ids[r * T + t] = BigInt(t === 0 ? start : tokens[t - 1]!);
  });
  const feeds: Record<string, ort.Tensor> = { input_ids: new ort.Tensor('int64', ids, [n, T]) };
  if (!ctx.sessions.decoderInputs.has('decoder_attention_mask')) return { feeds, selfMask: null };
  const selfMask = new BigInt64Array(n * (P + T)).fill(1n);
  if (cohort.selfMask !== null && P > 0)
    for (let r = 0; r < n; r++) selfMask.set(cohort.selfMask.subarray(r * P, (r + 1) * P), r * (P + T));
  feeds.decoder_attention_mask = new ort.Tensor('int64', selfMask, [n, P + T]);
  return { feeds, selfMask };
}

/** K = 2·numBeams + 1 of the widest beam sequence of `rows` (beam-head.ts), at least 2 (greedy rows read two). */
export function candidates(ctx: CohortContext, rows: Cohort['rows']): number {
  let k = 2;
  for (const { state } of rows) {
    // One more candidate per token the row may not write (bad words), so enough allowed ones remain.
    const banned = state.settings.suppressTokenIds?.length ?? 0;
    k = Math.max(k, (state.settings.strategy === 'beam' ? 2 * state.settings.numBeams + 1 : 2) + banned);
  }
  return Math.min(k, ctx.config.vocabSize);
}
