/**
 * @module engine/encode-device — admission on the device-state path (WebGPU): each group's encoder states go
 * straight into the cross-attention graph on the device, and the new cohort is born holding its cross-attention
 * cache and encoder mask there. The states never cross to the host (docs/engine.md "State stays on the device").
 */
import type * as ort from 'onnxruntime-node';
import type { Cohort, CohortContext } from './cohort.js';
import type { DeviceLayout } from '../device-layout.js';
import type { DeviceSessions } from '../session.js';
import type { Row } from '../decoding.js';
import { crossCacheOutputs } from '../graphs/decoder-split.js';
import { type Admitted, type Encoded, encodeGroup } from './encode.js';
import { sourceBuckets } from './source-buckets.js';

/** One group's cross cache: rows `rows` (indices into the admitted), `[m, H, length, dh]` per layer's key and value. */
interface GroupCache {
  rows: readonly number[];
  length: number;
  cache: ort.Tensor[];
}

const dispose = (tensors: readonly ort.Tensor[]) => {
  for (const tensor of tensors) tensor.dispose();
};

/**
 * `encode.ts` `encodeCohort` for a decoder whose state lives on the device (`DeviceSessions`): the cohort holds
 * only the admitted rows that encoded (in admission order), its `onDevice` made, no host encoder states.
 */
export async function encodeOnDevice(
  ctx: CohortContext,
  { layout, cross }: DeviceSessions,
  admitted: readonly Admitted[],
  pauseBudget: number,
): Promise<Encoded> {
  const uploaded = layout.hostBytes;
  const lengths = admitted.map((a) => a.inputIds.length);
  const failedRows = new Map<number, Error>();
  const groups: GroupCache[] = [];
  try {
    for (const group of sourceBuckets(lengths)) {
      // No row's states are kept for its alignment (`Admitted.onEncoded`): they are `gpu-buffer` output of the fused
      // encoder (decoder-fuse.ts), so a copy would wait on the GPU in the middle of admission and hold floats the
      // alignment's own unfused encoder does not give; the pass encodes those rows again.
      await encodeGroup(ctx, admitted, group, failedRows, async (rows, out, Sg, mask) => {
        const made: ort.Tensor[] = Object.values(out);
        try {
          const feeds: Record<string, ort.Tensor> = { encoder_hidden_states: out.last_hidden_state! };
          if (cross.inputNames.includes('encoder_attention_mask')) {
            feeds.encoder_attention_mask = await layout.upload(mask, [rows.length, Sg]);
            made.push(feeds.encoder_attention_mask);
          }
          const caches = await cross.run(feeds);
          const names = crossCacheOutputs(ctx.layers);
          const cache = names.map((name) => caches[name]);
          if (cache.some((t) => t === undefined)) {
            made.push(...Object.values(caches));
            throw new Error('the cross-attention graph returned no present.*.encoder cache');
          }
          // Whatever else the graph returns is not kept.
          made.push(...Object.entries(caches).flatMap(([name, t]) => (names.includes(name) ? [] : [t])));
          groups.push({ rows, length: Sg, cache: cache as ort.Tensor[] });
        } finally {
          dispose(made);
        }
      });
    }
    const kept = lengths.flatMap((_, r) => (failedRows.has(r) ? [] : [r]));
    const failed = [...failedRows].map(([r, error]) => ({ state: admitted[r]!.state, error }));
    if (kept.length === 0) return { cohort: null, failed };
    const S = Math.max(...kept.map((r) => lengths[r]!));
    const crossCache = await stack(layout, groups.splice(0), kept, S);
    const mask = new BigInt64Array(kept.length * S);
    kept.forEach((r, i) => mask.fill(1n, i * S, i * S + lengths[r]!));
    let encoderMask: ort.Tensor | null = null;
    try {
      if (ctx.feedsEncoderMask) encoderMask = await layout.upload(mask, [kept.length, S]);
    } catch (err) {
      dispose(crossCache);
      throw err;
    }
    ctx.stats.encoderRuns++;
    ctx.stats.encodedRows += kept.length;
    const rows: Row[] = kept.map((r) => ({ state: admitted[r]!.state, hyp: { tokens: [], logprob: 0 } }));
    const cohort: Cohort = {
      rows,
      encoderStates: new Float32Array(0),
      encoderMask: mask,
      encoderLengths: kept.map((r) => lengths[r]!),
      encoderLength: S,
      crossCache: null,
      selfCache: null,
      cacheBuffers: null,
      pastLength: 0,
      selfMask: ctx.joinable ? new BigInt64Array(0) : null,
      steps: 0,
      pauseBudget,
      onDevice: { cross: crossCache, self: [], encoderMask },
    };
    return { cohort, failed };
  } finally {
    for (const group of groups) dispose(group.cache);
    ctx.stats.decoderHostBytes += layout.hostBytes - uploaded;
  }
}

/**
 * The groups' caches as one `[n, H, S, dh]` per tensor, rows in the order `kept` lists them: each group padded to S
 * (zeros, masked by the encoder mask), stacked, then gathered into admission order when the groups interleave. The
 * groups' tensors and every intermediate one are disposed, whatever happens.
 */
async function stack(
  layout: DeviceLayout,
  groups: readonly GroupCache[],
  kept: readonly number[],
  S: number,
): Promise<ort.Tensor[]> {
  const owned = new Set(groups.flatMap((group) => group.cache));
  const take = (tensors: ort.Tensor[]) => {
    for (const tensor of tensors) owned.add(tensor);
    return tensors;
  };
  const drop = (tensors: readonly ort.Tensor[]) => {
    for (const tensor of tensors) if (owned.delete(tensor)) tensor.dispose();
  };
  try {
    let stacked: ort.Tensor[] | null = null;
    const order: number[] = [];
    for (const group of groups) {
      let part = group.cache;
      if (group.length !== S) {
        const rows = group.rows.map((_, j) => j);
        part = take(await layout.rows(part, { rows, length: group.length, to: S, align: 'start' }));
        drop(group.cache);
      }
      if (stacked !== null) {
        const joined = take(await layout.concat(stacked, part));
        drop([...stacked, ...part]);
        part = joined;
      }
      stacked = part;
      order.push(...group.rows);
    }
    if (!order.every((r, i) => r === kept[i])) {
      const at = new Map(order.map((r, i) => [r, i]));
      const rows = kept.map((r) => at.get(r)!);
      const ordered = take(await layout.rows(stacked!, { rows, length: S, to: S, align: 'start' }));
      drop(stacked!);
      stacked = ordered;
    }
    for (const tensor of stacked!) owned.delete(tensor);
    return stacked!;
  } finally {
    drop([...owned]);
  }
}
