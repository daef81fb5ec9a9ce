/**
 * @module engine/encode — the encoder side of admission: the sequences that start at one step boundary are
 * encoded in groups of similar source length (source-buckets.ts) and become one new cohort at step 0.
 */
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { type Row, SearchState } from '../decoding.js';
import type { Cohort, CohortContext } from './cohort.js';
import { gatherRows } from './cohort-layout.js';
import { crossCacheOutputs } from '../graphs/decoder-split.js';
import { sourceBuckets } from './source-buckets.js';

/** Most cache positions a cohort's buffers are sized for up front (see `expectedCacheLength`). */
const EXPECTED_CACHE_CAP = 32;

/** A sequence to encode: its encoder input ids and its search state (one row per sequence at step 0). */
export interface Admitted {
  inputIds: readonly number[];
  state: SearchState;
  /** Takes a copy of the row's own encoder states (sequences.ts `SubmitOptions.onEncoded`). */
  onEncoded?: (states: Float32Array) => void;
}

/** What admission produced: the new cohort (null when every row failed), and the sequences that failed alone. */
export interface Encoded {
  cohort: Cohort | null;
  failed: { state: SearchState; error: Error }[];
}

/**
 * Encode the admitted rows, scattering each group's states into one right-padded `[n, S, d]` cohort tensor in
 * admission order, and return the new cohort (0 steps taken). A row the encoder fails on (an onnxruntime error,
 * e.g. an id outside the vocabulary) fails alone: the others are encoded without it (see `encodeGroup`).
 */
export async function encodeCohort(
  ctx: CohortContext,
  admitted: readonly Admitted[],
  pauseBudget: number,
): Promise<Encoded> {
  const n = admitted.length;
  const d = ctx.config.dModel;
  const lengths = admitted.map((a) => a.inputIds.length);
  const S = Math.max(...lengths);
  const mask = new BigInt64Array(n * S);
  lengths.forEach((length, r) => mask.fill(1n, r * S, r * S + length));
  const encoderStates = ctx.memory.pooled(n * S * d).fill(0);
  const failedRows = new Map<number, Error>();
  for (const group of sourceBuckets(lengths)) {
    await encodeGroup(ctx, admitted, group, failedRows, (rows, out, Sg) => {
      const states = out.last_hidden_state?.data as Float32Array | undefined;
      if (states === undefined) throw new Error('encoder returned no last_hidden_state');
      // Real positions only; the padding stays zero (masked everywhere downstream).
      rows.forEach((r, j) => {
        const own = states.subarray(j * Sg * d, (j * Sg + lengths[r]!) * d);
        encoderStates.set(own, r * S * d);
        admitted[r]!.onEncoded?.(own.slice());
      });
    });
  }
  const encoded = lengths.flatMap((_, r) => (failedRows.has(r) ? [] : [r]));
  const crossCache = crossAtEncoding(ctx) ? await crossCohort(ctx, encoded, lengths, S, encoderStates) : null;
  ctx.stats.encoderRuns++;
  ctx.stats.encodedRows += n - failedRows.size;
  const rows: Row[] = admitted.map((a) => ({ state: a.state, hyp: { tokens: [], logprob: 0 } }));
  const cohort: Cohort = {
    rows,
    encoderStates,
    encoderMask: mask,
    encoderLengths: lengths,
    encoderLength: S,
    crossCache,
    selfCache: null,
    cacheBuffers:
      ctx.sessions.decoderOutputs.appendedCache !== null
        ? ctx.memory.cacheBuffers(expectedCacheLength(admitted))
        : null,
    pastLength: 0,
    selfMask: ctx.joinable ? new BigInt64Array(0) : null,
    steps: 0,
    pauseBudget,
  };
  const failed = [...failedRows].map(([r, error]) => ({ state: admitted[r]!.state, error }));
  if (failed.length === 0) return { cohort, failed };
  if (encoded.length === 0) {
    ctx.memory.retire(cohort);
    return { cohort: null, failed };
  }
  const kept = encoded.map((r) => rows[r]!);
  await gatherRows(ctx, cohort, encoded, kept);
  return { cohort, failed };
}

/**
 * What a group's encoder run is for: `place` takes its output (`[m, Sg, d]` states of rows `rows`, right-padded to
 * `Sg`, with their `[m, Sg]` mask) where the cohort keeps it. A throw from `place` fails the group as a failed run does.
 */
export type PlaceGroup = (
  rows: readonly number[],
  out: ort.InferenceSession.ReturnType,
  Sg: number,
  mask: BigInt64Array,
) => void | Promise<void>;

/**
 * Encode rows `group` (indices into `admitted`) and hand the output to `place`. When the run fails, each half is
 * encoded on its own, down to single rows: a row that fails alone goes into `failed`, and the rows beside it are
 * encoded all the same (about 2·log2(m) extra runs per bad row). A failed run places nothing, so rows encoded later
 * are exactly what they would have been.
 */
export async function encodeGroup(
  ctx: CohortContext,
  admitted: readonly Admitted[],
  group: readonly number[],
  failed: Map<number, Error>,
  place: PlaceGroup,
): Promise<void> {
  const lengths = group.map((r) => admitted[r]!.inputIds.length);
  const m = group.length;
  const Sg = Math.max(...lengths);
  const ids = new BigInt64Array(m * Sg).fill(BigInt(ctx.config.padTokenId));
  const groupMask = new BigInt64Array(m * Sg);
  group.forEach((r, j) => {
    admitted[r]!.inputIds.forEach((id, t) => (ids[j * Sg + t] = BigInt(id)));
    groupMask.fill(1n, j * Sg, j * Sg + lengths[j]!);
  });
  const started = performance.now();
  let error: unknown = null;
  try {
    const out = await ctx.sessions.encoder.run({
      input_ids: new ort.Tensor('int64', ids, [m, Sg]),
      attention_mask: new ort.Tensor('int64', groupMask, [m, Sg]),
    });
    await place(group, out, Sg, groupMask);
  } catch (err) {
    error = err;
  }
  ctx.stats.encoderMs += performance.now() - started;
  ctx.stats.encoderCalls++;
  if (error === null) return;
  if (m === 1) {
    failed.set(group[0]!, error instanceof Error ? error : new Error(String(error)));
    return;
  }
  const half = Math.ceil(m / 2);
  await encodeGroup(ctx, admitted, group.slice(0, half), failed, place);
  await encodeGroup(ctx, admitted, group.slice(half), failed, place);
}

/** What an encoder run gives the cross-attention graph. */
const CROSS_INPUTS: ReadonlySet<string> = new Set(['encoder_hidden_states', 'encoder_attention_mask']);

/** Whether the cross graph runs at encoding: there is one, and it reads nothing but what an encoder run gives. */
function crossAtEncoding(ctx: CohortContext): boolean {
  // The device-state path makes its cache on the device (encode-device.ts).
  const cross = ctx.sessions.kind === 'host' ? ctx.sessions.cross : null;
  return cross !== null && cross.inputNames.every((name) => CROSS_INPUTS.has(name));
}

/**
 * The cohort's cross-attention cache (`[n, H, S, dh]` per layer's key and value, in pooled memory, padding zeroed),
 * made by runs of the cross-attention graph over the real source tokens of rows `encoded`, packed into one
 * sequence `[1, T, d]` per run (one run for a batch of typical sentences, see MAX_PACKED_TOKENS); null when a run
 * fails, and the first decoder step makes the cache instead.
 *
 * Why here, and packed: the cross graph's projections are the largest GEMMs of a batch after the encoder's
 * (2 × layers per source token) and act on each token alone, so they need no padding at all: on the cohort's
 * padded states every row would be padded to the batch's longest source (1.7× the real tokens on the benchmark
 * workload), and even in the encoder's length groups 1.17×. One run also replaces a run per group, and its outputs
 * (~180 MB at batch 64 on the 418M shapes, which onnxruntime-node copies once more) shrink as much. Each row's
 * keys/values are then scattered into its place in the padded cohort tensors; the padded positions are masked in
 * every attention, so their values only need to be finite.
 *
 * A failed run (any onnxruntime error, or outputs of other shapes) gives the memory back and leaves the cache to
 * the first decoder step, which runs the cross graph on the cohort and isolates failing rows as every decoder run
 * does (step.ts).
 */
async function crossCohort(
  ctx: CohortContext,
  encoded: readonly number[],
  lengths: readonly number[],
  S: number,
  encoderStates: Float32Array,
): Promise<Float32Array[] | null> {
  if (encoded.length === 0) return null;
  const tensors = crossCacheOutputs(ctx.layers).map(() =>
    ctx.memory.pooled(lengths.length * ctx.heads * S * ctx.headDim),
  );
  for (const chunk of packedChunks(encoded, lengths)) {
    if (!(await crossChunk(ctx, chunk, lengths, S, encoderStates, tensors))) {
      for (const tensor of tensors) ctx.memory.recycle(tensor);
      return null;
    }
  }
  return tensors;
}

/**
 * Source tokens one cross run takes at most (rows whole; a longer row runs alone): its outputs, which the binding
 * copies, are 2 × layers × tokens × d floats (~200 MB at the cap on the 418M shapes), transient memory on top of the
 * cohort's cache. A batch of 64 benchmark sentences (~1,900 tokens) is one run.
 */
export const MAX_PACKED_TOKENS = 2048;

/** Rows `encoded` in order, cut into runs of at most MAX_PACKED_TOKENS source tokens. */
function packedChunks(encoded: readonly number[], lengths: readonly number[]): number[][] {
  const chunks: number[][] = [];
  let tokens = 0;
  for (const r of encoded) {
    if (chunks.length === 0 || tokens + lengths[r]! > MAX_PACKED_TOKENS) {
      chunks.push([]);
      tokens = 0;
    }
    chunks[chunks.length - 1]!.push(r);
    tokens += lengths[r]!;
  }
  return chunks;
}

/** One cross run over rows `chunk` packed, scattered into `tensors`; false when the run fails. */
async function crossChunk(
  ctx: CohortContext,
  chunk: readonly number[],
  lengths: readonly number[],
  S: number,
  encoderStates: Float32Array,
  tensors: Float32Array[],
): Promise<boolean> {
  const session = ctx.sessions.cross!;
  const d = ctx.config.dModel;
  const H = ctx.heads;
  const dh = ctx.headDim;
  const offsets: number[] = [];
  let T = 0;
  for (const r of chunk) {
    offsets.push(T);
    T += lengths[r]!;
  }
  const packed = ctx.memory.pooled(T * d);
  chunk.forEach((r, j) => packed.set(encoderStates.subarray(r * S * d, (r * S + lengths[r]!) * d), offsets[j]! * d));
  const feeds: Record<string, ort.Tensor> = { encoder_hidden_states: new ort.Tensor('float32', packed, [1, T, d]) };
  if (session.inputNames.includes('encoder_attention_mask'))
    feeds.encoder_attention_mask = new ort.Tensor('int64', new BigInt64Array(T).fill(1n), [1, T]);
  const started = performance.now();
  const made = await session.run(feeds).catch(() => null);
  ctx.stats.encoderMs += performance.now() - started;
  ctx.memory.recycle(packed);
  const outputs = crossCacheOutputs(ctx.layers).map((name) => made?.[name]);
  const expected = [1, H, T, dh].join();
  if (outputs.some((t) => t === undefined || t.dims.join() !== expected)) return false;
  const block = S * dh;
  outputs.forEach((output, k) => {
    const from = output!.data as Float32Array;
    const to = tensors[k]!;
    chunk.forEach((r, j) => {
      const real = lengths[r]! * dh;
      for (let h = 0; h < H; h++) {
        const at = (r * H + h) * block;
        const source = (h * T + offsets[j]!) * dh;
        to.set(from.subarray(source, source + real), at);
        to.fill(0, at + real, at + block);
      }
    });
  });
  return true;
}

/**
 * Cache length to size new cache buffers for: the start token plus every token but the last, for the
 * longest allowed output, capped so a large maxNewTokens that rows rarely reach does not reserve memory
 * for it (past the cap buffers grow ×1.5).
 */
function expectedCacheLength(admitted: readonly Admitted[]): number {
  return Math.min(EXPECTED_CACHE_CAP, Math.max(...admitted.map((a) => a.state.settings.maxNewTokens)));
}
