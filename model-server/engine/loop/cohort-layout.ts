/**
 * @module engine/cohort-layout — re-laying a cohort's tensors when its rows change: rows leave or beams reorder
 * (`gatherRows`), or other cohorts' rows join (`mergeCohorts`). Row-level copying is row-layout.ts; this file
 * decides the lengths (trimmed to the longest content a remaining row needs) and swaps pooled memory in and out.
 */
import type * as ort from 'onnxruntime-node';
import type { Row, SearchState } from '../decoding.js';
import { type Cohort, type CohortContext, type DeviceTensors, disposeDevice } from './cohort.js';
import { relayoutRows, type RowSource } from './row-layout.js';

/**
 * Rebuild `cohort` from rows `sources` of itself (rows left, beams reordered), trimming padding that
 * no remaining row needs. With no rows left the cohort holds its old tensors until it is retired.
 */
export async function gatherRows(ctx: CohortContext, cohort: Cohort, sources: number[], rows: Row[]): Promise<void> {
  const before = cohort.rows;
  cohort.rows = rows;
  if (rows.length === 0) return;
  // Beams reordered within their sequences, no row left: each row's source (and cross cache row) is as it was.
  const sameSequences =
    sources.length === before.length && sources.every((s, i) => before[s]!.state === before[i]!.state);
  const encoderLengths = sources.map((s) => cohort.encoderLengths[s]!);
  const S = Math.max(...encoderLengths);
  // A row's cache holds the tokens fed so far: the start token and all its tokens but the newest.
  const P = hasCaches(cohort) ? Math.max(...rows.map((r) => r.hyp.tokens.length)) : 0;
  await relayout(ctx, cohort, [{ cohort, rows: sources }], S, P, sameSequences);
  cohort.encoderLengths = encoderLengths;
}

/**
 * Gather out of `cohort` the rows of the sequences `leaving` names, as finished rows leave (beams of one sequence
 * go together: they share its state). Returns how many rows left.
 */
export async function removeRows(
  ctx: CohortContext,
  cohort: Cohort,
  leaving: { has(state: SearchState): boolean },
): Promise<number> {
  const sources = cohort.rows.flatMap((row, i) => (leaving.has(row.state) ? [] : [i]));
  const kept = sources.map((i) => cohort.rows[i]!);
  const removed = cohort.rows.length - kept.length;
  if (removed > 0) await gatherRows(ctx, cohort, sources, kept);
  return removed;
}

/**
 * A cohort of rows `sources` of `cohort` in fresh memory, leaving `cohort` as it is: for trial decoder runs
 * (generate.ts, finding the rows a failed run fails on). It has no cache buffers and is never stepped or retired.
 */
export async function copyRows(ctx: CohortContext, cohort: Cohort, sources: readonly number[]): Promise<Cohort> {
  const rows = sources.map((s) => cohort.rows[s]!);
  const encoderLengths = sources.map((s) => cohort.encoderLengths[s]!);
  const S = Math.max(...encoderLengths);
  const P = hasCaches(cohort) ? Math.max(...rows.map((r) => r.hyp.tokens.length)) : 0;
  const parts = [{ cohort, rows: [...sources] }];
  const onDevice = await layOutDevice(ctx, cohort, parts, S, P);
  const tensors = layOut(ctx, cohort, parts, S, P, false);
  if (onDevice !== null) onDevice.encoderMask = await uploadMask(ctx, tensors.encoderMask, null, S);
  return {
    ...cohort,
    ...tensors,
    rows,
    encoderLengths,
    encoderLength: S,
    pastLength: hasCaches(cohort) ? P : cohort.pastLength,
    cacheBuffers: null,
    onDevice,
  };
}

/** Whether `cohort` has taken its first step's caches (on the host or on the device). */
function hasCaches(cohort: Cohort): boolean {
  return cohort.selfCache !== null || (cohort.onDevice ?? null) !== null;
}

/** Append the `joining` cohorts' rows to `running` (all have had their first step), padding to common lengths. */
export async function mergeCohorts(ctx: CohortContext, running: Cohort, joining: readonly Cohort[]): Promise<void> {
  const all = [running, ...joining];
  const S = Math.max(...all.map((c) => c.encoderLength));
  const P = Math.max(...all.map((c) => c.pastLength));
  const parts = all.map((cohort) => ({ cohort, rows: cohort.rows.map((_, i) => i) }));
  await relayout(ctx, running, parts, S, P);
  running.rows = all.flatMap((c) => c.rows);
  running.encoderLengths = all.flatMap((c) => c.encoderLengths);
}

/** A padded axis rows are re-laid along, to length `to` (row-layout.ts `align`). */
interface Axis {
  length: (c: Cohort) => number;
  to: number;
  align: 'start' | 'end';
}

/** The encoder's axis (right-padded, to S) and the caches' (left-padded, to P). */
function axes(S: number, P: number): { encoder: Axis; past: Axis } {
  return {
    encoder: { length: (c) => c.encoderLength, to: S, align: 'start' },
    past: { length: (c) => c.pastLength, to: P, align: 'end' },
  };
}

/** Rows of some cohorts, as `layOut` lays them out. */
type RowTensors = Pick<Cohort, 'encoderStates' | 'encoderMask' | 'crossCache' | 'selfCache' | 'selfMask'>;

/**
 * Replace `target`'s tensors with the listed rows of the given cohorts, at lengths S (encoder) and P (cache).
 * `sameSequences`: every row keeps a row of its own sequence (beams reordered): on the device the cross cache and
 * encoder mask stay as they are.
 */
async function relayout(
  ctx: CohortContext,
  target: Cohort,
  parts: { cohort: Cohort; rows: number[] }[],
  S: number,
  P: number,
  sameSequences = false,
): Promise<void> {
  // On the device first: it reads the parts' lengths as they were.
  const crossKept = sameSequences ? (target.onDevice?.cross ?? null) : null;
  const onDevice = await layOutDevice(ctx, target, parts, S, P, crossKept);
  const oldMask = target.encoderMask;
  const tensors = layOut(ctx, target, parts, S, P, true);
  if (onDevice !== null) {
    // A reorder of beams (one sequence's rows share their source) leaves the mask as it was: no upload.
    const same = parts.length === 1 && parts[0]!.cohort === target && S === target.encoderLength;
    onDevice.encoderMask = await uploadMask(ctx, tensors.encoderMask, same ? target : null, S, oldMask);
    for (const cohort of new Set(parts.map((p) => p.cohort))) {
      if (cohort.onDevice?.encoderMask === onDevice.encoderMask) cohort.onDevice.encoderMask = null;
      if (cohort.onDevice?.cross === onDevice.cross) cohort.onDevice.cross = [];
      disposeDevice(cohort.onDevice);
      cohort.onDevice = null;
    }
    target.onDevice = onDevice;
    target.pastLength = P;
    target.selfMask = tensors.selfMask;
  }
  // Every row is copied out: the old tensors' memory is free (a target listed twice is recycled once).
  for (const cohort of new Set(parts.map((p) => p.cohort))) ctx.memory.recycleRowTensors(cohort);
  target.encoderStates = tensors.encoderStates;
  target.encoderMask = tensors.encoderMask;
  target.encoderLength = S;
  if (tensors.crossCache !== null) {
    target.crossCache = tensors.crossCache;
    target.selfCache = tensors.selfCache;
    target.selfMask = tensors.selfMask;
    target.pastLength = P;
  }
}

/**
 * The listed rows of the given cohorts at lengths S (encoder) and P (cache), in pooled memory or fresh arrays;
 * caches only when `like` (a cohort of the same step) has them.
 */
function layOut(
  ctx: CohortContext,
  like: Cohort,
  parts: { cohort: Cohort; rows: number[] }[],
  S: number,
  P: number,
  pooled: boolean,
): RowTensors {
  const { encoder, past } = axes(S, P);
  const rows = parts.reduce((sum, p) => sum + p.rows.length, 0);
  const pick = <T extends Float32Array | BigInt64Array>(get: (c: Cohort) => T, axis: Axis): RowSource<T>[] =>
    parts.flatMap(({ cohort, rows }) => rows.map((row) => ({ data: get(cohort), row, length: axis.length(cohort) })));
  const floats = (get: (c: Cohort) => Float32Array, axis: Axis, outer: number, inner: number) => {
    const into = pooled ? ctx.memory.pooled(rows * outer * axis.to * inner) : undefined;
    return relayoutRows(pick(get, axis), outer, inner, axis.to, axis.align, into);
  };
  const mask = (get: (c: Cohort) => BigInt64Array, axis: Axis) =>
    relayoutRows(pick(get, axis), 1, 1, axis.to, axis.align);
  // The device-state path keeps no encoder states on the host (encode-device.ts).
  const encoderStates =
    ctx.sessions.kind === 'device'
      ? new Float32Array(0)
      : floats((c) => c.encoderStates, encoder, 1, ctx.config.dModel);
  const encoderMask = mask((c) => c.encoderMask, encoder);
  let crossCache: Float32Array[] | null = null;
  let selfCache: Float32Array[] | null = null;
  let selfMask: BigInt64Array | null = null;
  /** Each tensor of a `[rows, H, length, dh]` cache the cohorts hold (null when `like` has none). */
  const cache = (get: (c: Cohort) => Float32Array[] | null, axis: Axis) =>
    get(like)?.map((_, k) => floats((c) => get(c)![k]!, axis, ctx.heads, ctx.headDim)) ?? null;
  if (like.crossCache !== null || (like.onDevice ?? null) !== null) {
    crossCache = cache((c) => c.crossCache, encoder);
    // A cohort encoded with its cross cache has no self cache before its first step.
    selfCache = cache((c) => c.selfCache, past);
    if (like.selfMask !== null) selfMask = mask((c) => c.selfMask!, past);
  }
  return { encoderStates, encoderMask, crossCache, selfCache, selfMask };
}

/**
 * The device-state path's caches of the listed rows (device-layout.ts), at lengths S (cross) and P (self); null
 * when `like` holds none on the device. Their encoder mask is left to `uploadMask`. The parts' tensors are kept.
 * `crossKept`: the cross cache as it is (every row keeps its sequence's: a beam reorder), not re-laid.
 */
async function layOutDevice(
  ctx: CohortContext,
  like: Cohort,
  parts: { cohort: Cohort; rows: number[] }[],
  S: number,
  P: number,
  crossKept: ort.Tensor[] | null = null,
): Promise<DeviceTensors | null> {
  if (ctx.sessions.kind === 'host' || (like.onDevice ?? null) === null) return null;
  const { layout } = ctx.sessions;
  const uploaded = layout.hostBytes;
  const { encoder, past } = axes(S, P);
  const cache = async (
    get: (held: DeviceTensors) => ort.Tensor[],
    { length, to, align }: Axis,
  ): Promise<ort.Tensor[]> => {
    // A cohort before its first step has no self cache yet.
    if (get(like.onDevice!).length === 0) return [];
    let stacked: ort.Tensor[] | null = null;
    for (const { cohort, rows } of parts) {
      const picked = await layout.rows(get(cohort.onDevice!), { rows, length: length(cohort), to, align });
      if (stacked === null) {
        stacked = picked;
        continue;
      }
      const joined = await layout.concat(stacked, picked);
      for (const tensor of [...stacked, ...picked]) tensor.dispose();
      stacked = joined;
    }
    return stacked!;
  };
  const cross = crossKept ?? (await cache((held) => held.cross, encoder));
  const self = await cache((held) => held.self, past);
  ctx.stats.decoderHostBytes += layout.hostBytes - uploaded;
  return { cross, self, encoderMask: null };
}

/**
 * `mask` `[n, S]` on the device for the decoder to read: `keep`'s own when it holds the same values (`previous`,
 * its host copy), else an upload (counted in the host bytes). Null when the decoder takes no encoder mask.
 */
async function uploadMask(
  ctx: CohortContext,
  mask: BigInt64Array,
  keep: Cohort | null,
  S: number,
  previous?: BigInt64Array,
): Promise<ort.Tensor | null> {
  if (ctx.sessions.kind === 'host' || !ctx.feedsEncoderMask) return null;
  const { layout } = ctx.sessions;
  const held = keep?.onDevice?.encoderMask ?? null;
  if (held !== null && previous !== undefined && sameValues(previous, mask)) return held;
  const uploaded = layout.hostBytes;
  const tensor = await layout.upload(mask, [mask.length / S, S]);
  ctx.stats.decoderHostBytes += layout.hostBytes - uploaded;
  return tensor;
}

function sameValues(a: BigInt64Array, b: BigInt64Array): boolean {
  return a.length === b.length && a.every((value, i) => value === b[i]);
}
