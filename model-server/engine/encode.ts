/**
 * @module engine/encode — the encoder side of admission: the sequences that start at one step boundary are
 * encoded in groups of similar source length (source-buckets.ts) and become one new cohort at step 0.
 */
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { type Row, SearchState } from './decoding.js';
import type { Cohort, CohortContext } from './cohort.js';
import { gatherRows } from './cohort-layout.js';
import { sourceBuckets } from './source-buckets.js';

/** Most cache positions a cohort's buffers are sized for up front (see `expectedCacheLength`). */
const EXPECTED_CACHE_CAP = 32;

/** A sequence to encode: its encoder input ids and its search state (one row per sequence at step 0). */
export interface Admitted {
  inputIds: readonly number[];
  state: SearchState;
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
  const cross: CrossTarget = {
    tensors: crossAtEncoding(ctx)
      ? Array.from({ length: 2 * ctx.layers }, () => ctx.memory.pooled(n * ctx.heads * S * ctx.headDim))
      : null,
  };
  const failedRows = new Map<number, Error>();
  for (const group of sourceBuckets(lengths)) {
    await encodeGroup(ctx, admitted, group, S, encoderStates, cross, failedRows);
  }
  ctx.stats.encoderRuns++;
  ctx.stats.encodedRows += n - failedRows.size;
  const rows: Row[] = admitted.map((a) => ({ state: a.state, hyp: { tokens: [], logprob: 0 } }));
  const cohort: Cohort = {
    rows,
    encoderStates,
    encoderMask: mask,
    encoderLengths: lengths,
    encoderLength: S,
    crossCache: cross.tensors,
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
  const kept = rows.flatMap((_, r) => (failedRows.has(r) ? [] : [r]));
  if (kept.length === 0) {
    ctx.memory.retire(cohort);
    return { cohort: null, failed };
  }
  gatherRows(
    ctx,
    cohort,
    kept,
    kept.map((r) => rows[r]!),
  );
  return { cohort, failed };
}

/**
 * Encode rows `group` (indices into `admitted`) into their places of `encoderStates`. When the run fails, each
 * half is encoded on its own, down to single rows: a row that fails alone goes into `failed`, and the rows beside
 * it are encoded all the same (about 2·log2(m) extra runs per bad row). A failed run writes nothing, so rows
 * encoded later are exactly what they would have been.
 */
async function encodeGroup(
  ctx: CohortContext,
  admitted: readonly Admitted[],
  group: readonly number[],
  S: number,
  encoderStates: Float32Array,
  cross: CrossTarget,
  failed: Map<number, Error>,
): Promise<void> {
  const d = ctx.config.dModel;
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
  let out: ort.InferenceSession.ReturnType | null = null;
  let error: unknown = null;
  try {
    out = await ctx.sessions.encoder.run({
      input_ids: new ort.Tensor('int64', ids, [m, Sg]),
      attention_mask: new ort.Tensor('int64', groupMask, [m, Sg]),
    });
  } catch (err) {
    error = err;
  }
  ctx.stats.encoderMs += performance.now() - started;
  ctx.stats.encoderCalls++;
  if (out === null) {
    if (m === 1) {
      failed.set(group[0]!, error instanceof Error ? error : new Error(String(error)));
      return;
    }
    const half = Math.ceil(m / 2);
    await encodeGroup(ctx, admitted, group.slice(0, half), S, encoderStates, cross, failed);
    await encodeGroup(ctx, admitted, group.slice(half), S, encoderStates, cross, failed);
    return;
  }
  const states = out.last_hidden_state?.data as Float32Array | undefined;
  if (states === undefined) throw new Error('encoder returned no last_hidden_state');
  // Real positions only; the padding stays zero (masked everywhere downstream).
  group.forEach((r, j) => encoderStates.set(states.subarray(j * Sg * d, (j * Sg + lengths[j]!) * d), r * S * d));
  if (cross.tensors !== null) await crossGroup(ctx, group, lengths, out.last_hidden_state!, groupMask, S, cross);
}

/** What an encoder run gives the cross-attention graph. */
const CROSS_INPUTS: ReadonlySet<string> = new Set(['encoder_hidden_states', 'encoder_attention_mask']);

/** Whether the cross graph runs at encoding: there is one, and it reads nothing but what an encoder run gives. */
function crossAtEncoding(ctx: CohortContext): boolean {
  const cross = ctx.sessions.cross;
  return cross !== null && cross.inputNames.every((name) => CROSS_INPUTS.has(name));
}

/**
 * The cohort's cross-attention cache (`[n, H, S, dh]` per layer's key and value, pooled), filled group by group
 * as the encoder runs; null when the first decoder step makes it instead (no cross graph, or a run failed).
 */
interface CrossTarget {
  tensors: Float32Array[] | null;
}

/**
 * Run the cross-attention graph on one encoded group's states (`[m, Sg, d]`, padded to the group's longest
 * source, not the cohort's) and scatter each row's keys/values into the cohort's cache, padding zeroed.
 *
 * Why here and not at the first decoder step: the cross graph's projections are the largest GEMMs of a batch
 * after the encoder's (2 × layers per source token), and on the cohort's states every row is padded to the
 * longest source of the batch: 1.7× the real tokens on the benchmark workload, 1.17× in length groups. Its
 * outputs (~300 MB at batch 64 on the 418M shapes), which onnxruntime-node copies once more, shrink as much, and
 * the cache lives in pooled memory from the start instead of in the binding's fresh arrays. The padded positions
 * are masked in every attention, so their values only need to be finite.
 *
 * A failed run (any onnxruntime error) gives the memory back and leaves the cache to the first decoder step,
 * which runs the cross graph on the cohort and isolates failing rows as every decoder run does (step.ts).
 */
async function crossGroup(
  ctx: CohortContext,
  group: readonly number[],
  lengths: readonly number[],
  states: ort.Tensor,
  groupMask: BigInt64Array,
  S: number,
  cross: CrossTarget,
): Promise<void> {
  const session = ctx.sessions.cross!;
  const tensors = cross.tensors!;
  const [m, Sg] = states.dims as [number, number, number];
  const H = ctx.heads;
  const dh = ctx.headDim;
  const feeds: Record<string, ort.Tensor> = { encoder_hidden_states: states };
  if (session.inputNames.includes('encoder_attention_mask'))
    feeds.encoder_attention_mask = new ort.Tensor('int64', groupMask, [m, Sg]);
  const started = performance.now();
  let made: ort.InferenceSession.ReturnType | null = null;
  try {
    made = await session.run(feeds);
  } catch {
    made = null;
  }
  ctx.stats.encoderMs += performance.now() - started;
  const outputs = tensors.map((_, k) => made?.[`present.${k >> 1}.encoder.${k % 2 === 0 ? 'key' : 'value'}`]);
  const expected = [m, H, Sg, dh].join();
  if (outputs.some((t) => t === undefined || t.dims.join() !== expected)) {
    for (const tensor of tensors) ctx.memory.recycle(tensor);
    cross.tensors = null;
    return;
  }
  const block = S * dh;
  outputs.forEach((output, k) => {
    const from = output!.data as Float32Array;
    const to = tensors[k]!;
    group.forEach((r, j) => {
      const real = lengths[j]! * dh;
      for (let h = 0; h < H; h++) {
        const at = (r * H + h) * block;
        const source = (j * H + h) * Sg * dh;
        to.set(from.subarray(source, source + real), at);
        to.fill(0, at + real, at + block);
      }
    });
  });
}

/**
 * Cache length to size new cache buffers for: the start token plus every token but the last, for the
 * longest allowed output, capped so a large maxNewTokens that rows rarely reach does not reserve memory
 * for it (past the cap buffers grow ×1.5).
 */
function expectedCacheLength(admitted: readonly Admitted[]): number {
  return Math.min(EXPECTED_CACHE_CAP, Math.max(...admitted.map((a) => a.state.settings.maxNewTokens)));
}
