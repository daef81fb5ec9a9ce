/**
 * @module engine/encode — the encoder side of admission: the sequences that start at one step boundary are
 * encoded in groups of similar source length (source-buckets.ts) and become one new cohort at step 0.
 */
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { type Row, SearchState } from './decoding.js';
import type { Cohort, CohortContext } from './cohort.js';
import { sourceBuckets } from './source-buckets.js';

/** Most cache positions a cohort's buffers are sized for up front (see `expectedCacheLength`). */
const EXPECTED_CACHE_CAP = 32;

/** A sequence to encode: its encoder input ids and its search state (one row per sequence at step 0). */
export interface Admitted {
  inputIds: readonly number[];
  state: SearchState;
}

/**
 * Encode the admitted rows, scattering each group's states into one right-padded `[n, S, d]` cohort tensor in
 * admission order, and return the new cohort (0 steps taken).
 */
export async function encodeCohort(
  ctx: CohortContext,
  admitted: readonly Admitted[],
  pauseBudget: number,
): Promise<Cohort> {
  const n = admitted.length;
  const d = ctx.config.dModel;
  const lengths = admitted.map((a) => a.inputIds.length);
  const S = Math.max(...lengths);
  const mask = new BigInt64Array(n * S);
  lengths.forEach((length, r) => mask.fill(1n, r * S, r * S + length));
  const encoderStates = ctx.memory.pooled(n * S * d).fill(0);
  for (const group of sourceBuckets(lengths)) {
    const m = group.length;
    const Sg = Math.max(...group.map((r) => lengths[r]!));
    const ids = new BigInt64Array(m * Sg).fill(BigInt(ctx.config.padTokenId));
    const groupMask = new BigInt64Array(m * Sg);
    group.forEach((r, j) => {
      admitted[r]!.inputIds.forEach((id, t) => (ids[j * Sg + t] = BigInt(id)));
      groupMask.fill(1n, j * Sg, j * Sg + lengths[r]!);
    });
    const started = performance.now();
    const out = await ctx.sessions.encoder.run({
      input_ids: new ort.Tensor('int64', ids, [m, Sg]),
      attention_mask: new ort.Tensor('int64', groupMask, [m, Sg]),
    });
    ctx.stats.encoderMs += performance.now() - started;
    ctx.stats.encoderCalls++;
    const states = out.last_hidden_state?.data as Float32Array | undefined;
    if (states === undefined) throw new Error('encoder returned no last_hidden_state');
    // Real positions only; the padding stays zero (masked everywhere downstream).
    group.forEach((r, j) => encoderStates.set(states.subarray(j * Sg * d, (j * Sg + lengths[r]!) * d), r * S * d));
  }
  ctx.stats.encoderRuns++;
  ctx.stats.encodedRows += n;
  const rows: Row[] = admitted.map((a) => ({ state: a.state, hyp: { tokens: [], logprob: 0 } }));
  return {
    rows,
    encoderStates,
    encoderMask: mask,
    encoderLengths: lengths,
    encoderLength: S,
    crossCache: null,
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
}

/**
 * Cache length to size new cache buffers for: the start token plus every token but the last, for the
 * longest allowed output, capped so a large maxNewTokens that rows rarely reach does not reserve memory
 * for it (past the cap buffers grow ×1.5).
 */
function expectedCacheLength(admitted: readonly Admitted[]): number {
  return Math.min(EXPECTED_CACHE_CAP, Math.max(...admitted.map((a) => a.state.settings.maxNewTokens)));
}
