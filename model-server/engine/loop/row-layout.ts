/**
 * @module engine/row-layout — moving batch rows between tensors: gather (rows leave, beams reorder),
 * trim (drop padding no live row needs) and concatenate with padding (rows join a running batch).
 *
 * Every batched tensor here is seen as `[rows, outer, length, inner]`: KV caches `[n, H, L, dh]`
 * (outer H, inner dh), encoder states `[n, S, d]` (outer 1, inner d), masks `[n, L]` (outer 1, inner 1).
 * `length` is the padded axis. Encoder inputs are right-padded (`align: 'start'`: real positions first);
 * decoder caches are left-padded (`align: 'end'`: real positions last, next to the token being added).
 */

export type RowData = Float32Array | BigInt64Array;

/** One output row: row `row` of `data`, whose padded axis has `length` positions. */
export interface RowSource<T extends RowData> {
  data: T;
  row: number;
  length: number;
}

/**
 * Build a `[sources.length, outer, dstLength, inner]` tensor from the given rows. Each row keeps
 * `min(length, dstLength)` positions at the `align` end; the rest is zero (padding, masked out).
 * Callers only shrink `dstLength` down to the longest real content of the rows they keep.
 * @param into where to write (exactly that many elements, e.g. a pooled buffer with old contents: every padding
 *   position is zeroed); a fresh zeroed array when omitted. It must not share memory with any source.
 */
export function relayoutRows<T extends RowData>(
  sources: readonly RowSource<T>[],
  outer: number,
  inner: number,
  dstLength: number,
  align: 'start' | 'end',
  into?: T,
): T {
  const first = sources[0];
  if (first === undefined) throw new RangeError('relayoutRows needs at least one row');
  const Ctor = first.data.constructor as new (length: number) => T;
  const dstRow = outer * dstLength * inner;
  if (into !== undefined && into.length !== sources.length * dstRow) {
    throw new RangeError(`relayoutRows: into holds ${into.length} elements, expected ${sources.length * dstRow}`);
  }
  const out = (into ?? new Ctor(sources.length * dstRow)) as RowData;
  // A fresh array is already zero: padding there is left untouched (never even paged in).
  const zero = into !== undefined;
  const zeroValue = out instanceof BigInt64Array ? 0n : 0;
  sources.forEach(({ data, row, length }, r) => {
    const count = Math.min(length, dstLength);
    const srcStart = align === 'start' ? 0 : length - count;
    const dstStart = align === 'start' ? 0 : dstLength - count;
    const srcRow = outer * length * inner;
    const span = count * inner;
    if (length === dstLength) {
      // Same layout: the whole row is one contiguous block.
      const from = row * srcRow;
      out.set((data as RowData).subarray(from, from + srcRow) as never, r * dstRow);
      return;
    }
    const pad = (dstLength - count) * inner;
    const padStart = align === 'start' ? span : 0;
    for (let o = 0; o < outer; o++) {
      const block = r * dstRow + o * dstLength * inner;
      if (span > 0) {
        const from = row * srcRow + (o * length + srcStart) * inner;
        out.set((data as RowData).subarray(from, from + span) as never, block + dstStart * inner);
      }
      if (zero && pad > 0) out.fill(zeroValue as never, block + padStart, block + padStart + pad);
    }
  });
  return out as T;
}
