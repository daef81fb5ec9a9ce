import { describe, expect, it } from 'vitest';
import { CacheBufferPool, CacheBuffers } from './kv-cache.js';

/** `[blocks, length, dh]` with value = block·1000 + (first + position)·10 + d (distinct everywhere). */
const block = (blocks: number, length: number, dh: number, first = 0) =>
  Float32Array.from({ length: blocks * length * dh }, (_, i) => {
    const d = i % dh;
    const position = Math.floor(i / dh) % length;
    return Math.floor(i / (dh * length)) * 1000 + (first + position) * 10 + d;
  });

/** Whether two views share any byte of memory. */
const overlap = (a: Float32Array, b: Float32Array) =>
  a.buffer === b.buffer && a.byteOffset < b.byteOffset + b.byteLength && b.byteOffset < a.byteOffset + a.byteLength;

/** Run `steps` appends of one position per block on every tensor, checking contents and no aliasing. */
function generate(buffers: CacheBuffers, tensors: number, blocks: number, dh: number, steps: number) {
  let past: Float32Array[] = Array.from({ length: tensors }, () => new Float32Array(0));
  const used: ArrayBufferLike[][] = Array.from({ length: tensors }, () => []);
  const halves: string[][] = Array.from({ length: tensors }, () => []);
  for (let step = 0; step < steps; step++) {
    past = past.map((p, k) => {
      const snapshot = Float32Array.from(p);
      const out = buffers.append(k, p, block(blocks, 1, dh, step), blocks, step, dh);
      expect(overlap(out, p)).toBe(false);
      expect(Array.from(p)).toEqual(Array.from(snapshot)); // the past it read was not written into
      expect(Array.from(out)).toEqual(Array.from(block(blocks, step + 1, dh)));
      used[k]!.push(out.buffer);
      halves[k]!.push(`${used[k]!.indexOf(out.buffer)}@${out.byteOffset}`);
      return out;
    });
  }
  return { past, used, halves };
}

describe('CacheBuffers', () => {
  it('appends each block’s new positions after its past ones', () => {
    const buffers = new CacheBuffers(new CacheBufferPool(4), 1);
    const out = buffers.append(0, block(2, 2, 3), block(2, 1, 3, 2), 2, 2, 3);
    expect(Array.from(out)).toEqual(Array.from(block(2, 3, 3)));
    // From an empty past (the first step), the result is the appended part itself.
    const first = new CacheBuffers(new CacheBufferPool(4), 1).append(0, new Float32Array(0), block(2, 1, 3), 2, 0, 3);
    expect(Array.from(first)).toEqual(Array.from(block(2, 1, 3)));
  });

  it('never writes into the memory of the past it reads; alternates two halves of a buffer, growing geometrically', () => {
    const buffers = new CacheBuffers(new CacheBufferPool(8), 2);
    const { used, halves } = generate(buffers, 2, 4, 2, 24);
    used.forEach((buffersOfTensor, k) => {
      // 24 steps of growth: a few allocations per tensor, not one per step.
      expect(new Set(buffersOfTensor).size).toBeLessThanOrEqual(7);
      // Once grown, consecutive results alternate between the two halves of one buffer.
      expect(buffersOfTensor[23]).toBe(buffersOfTensor[22]);
      expect(halves[k]![23]).toBe(halves[k]![21]);
      expect(halves[k]![22]).not.toBe(halves[k]![23]);
    });
  });

  it('sized for the expected length, a generation that stays within it allocates one buffer per tensor', () => {
    const buffers = new CacheBuffers(new CacheBufferPool(8), 2, 12);
    const { used } = generate(buffers, 2, 4, 2, 12);
    for (const buffersOfTensor of used) expect(new Set(buffersOfTensor).size).toBe(1);
    expect(buffers.heldFloats).toBe(2 * 2 * 4 * 12 * 2);
  });

  it('a batch after an earlier one of the same size reuses its memory: nothing is allocated', () => {
    const pool = new CacheBufferPool(8);
    const first = new CacheBuffers(pool, 2);
    const firstRun = generate(first, 2, 4, 2, 10);
    const held = first.heldFloats;
    first.release();
    expect(pool.freeFloats).toBeGreaterThanOrEqual(held);
    const second = new CacheBuffers(pool, 2);
    const secondRun = generate(second, 2, 4, 2, 10);
    const firstBuffers = new Set(firstRun.used.flat());
    // Every buffer the second batch wrote into was one the first batch had (outgrown ones included).
    for (const b of secondRun.used.flat()) expect(firstBuffers.has(b)).toBe(true);
  });

  it('takes a past from anywhere (a gather’s fresh array), fewer rows without allocating, and rejects bad shapes', () => {
    const buffers = new CacheBuffers(new CacheBufferPool(4), 1);
    const a = buffers.append(0, block(4, 3, 2), block(4, 1, 2, 3), 4, 3, 2);
    const b = buffers.append(0, a, block(4, 1, 2, 4), 4, 4, 2);
    const held = buffers.heldFloats;
    // Rows 1 and 3 leave: the gather copies them out into a fresh array, which is the next past.
    const gathered = Float32Array.from([...b.subarray(10, 20), ...b.subarray(30, 40)]);
    const c = buffers.append(0, gathered, Float32Array.of(-1, -2, -3, -4), 2, 5, 2);
    expect(buffers.heldFloats).toBe(held);
    expect(Array.from(c)).toEqual([...b.subarray(10, 20), -1, -2, ...b.subarray(30, 40), -3, -4]);
    expect(() => buffers.append(0, c, new Float32Array(4), 3, 6, 2)).toThrow(RangeError);
    expect(() => buffers.append(0, c, new Float32Array(3), 2, 6, 2)).toThrow(RangeError);
    expect(() => buffers.append(1, c, new Float32Array(4), 2, 6, 2)).toThrow(RangeError);
  });

  it('reorders blocks by parent in the same copy (past in its buffer or elsewhere), and rejects a short source list', () => {
    const buffers = new CacheBuffers(new CacheBufferPool(4), 1);
    const past = block(3, 2, 2);
    const appended = block(3, 1, 2, 2);
    // Block 0 continues block 2, blocks 1 and 2 continue block 0: past and appended position from the parent.
    const parent = (data: Float32Array, span: number, b: number) => Array.from(data.subarray(b * span, (b + 1) * span));
    const expected = (p: Float32Array, a: Float32Array, span: number, order: number[]) =>
      order.flatMap((b) => [...parent(p, span, b), ...parent(a, 2, b)]);
    const fromElsewhere = buffers.append(0, past, appended, 3, 2, 2, Int32Array.of(2, 0, 0));
    expect(Array.from(fromElsewhere)).toEqual(expected(past, appended, 4, [2, 0, 0]));
    const more = block(3, 1, 2, 3);
    const snapshot = Float32Array.from(fromElsewhere);
    const fromBuffer = buffers.append(0, fromElsewhere, more, 3, 3, 2, Int32Array.of(1, 1, 2));
    expect(Array.from(fromBuffer)).toEqual(expected(snapshot, more, 6, [1, 1, 2]));
    expect(() => buffers.append(0, fromBuffer, block(3, 1, 2), 3, 4, 2, Int32Array.of(0, 1))).toThrow(RangeError);
  });
});

describe('CacheBufferPool', () => {
  it('gives the best fit, allocates with room to grow, and keeps at most maxFree buffers (the largest)', () => {
    const pool = new CacheBufferPool(2);
    const [small, medium, large] = [10, 20, 30].map((n) => new Float32Array(n));
    pool.give(medium!);
    pool.give(large!);
    pool.give(small!); // over the cap: the smallest is dropped
    expect(pool.freeFloats).toBe(50);
    expect(pool.take(15)).toBe(medium);
    expect(pool.take(15)).toBe(large);
    const fresh = pool.take(15);
    expect(fresh.length).toBe(23);
    expect(pool.freeFloats).toBe(0);
  });

  it('recycle: a view of its own memory goes back whole, an array alone in its memory is adopted, a view into foreign memory is left alone', () => {
    const pool = new CacheBufferPool(8);
    const taken = pool.take(10, 16);
    pool.recycle(taken.subarray(0, 10));
    expect(pool.freeFloats).toBe(16);
    expect(pool.take(12).buffer).toBe(taken.buffer);

    const output = new Float32Array(30); // a decoder output: alone in its ArrayBuffer
    pool.recycle(output);
    expect(pool.freeFloats).toBe(30);
    expect(pool.take(30).buffer).toBe(output.buffer);

    const foreign = new Float32Array(40);
    pool.recycle(foreign.subarray(0, 20));
    pool.recycle(foreign.subarray(20));
    pool.recycle(new Float32Array(0));
    expect(pool.freeFloats).toBe(0);
  });

  it('memory given twice is kept once, so two holders never share it', () => {
    const pool = new CacheBufferPool(8);
    const a = pool.take(10, 10);
    pool.recycle(a.subarray(0, 5));
    pool.recycle(a);
    pool.give(a);
    expect(pool.freeFloats).toBe(10);
    expect(pool.take(10).buffer).toBe(a.buffer);
    expect(pool.take(10).buffer).not.toBe(a.buffer);
  });
});

describe('CacheBuffers.holds', () => {
  it("tells views of a tensor's buffers from other memory (another tensor's included), and forgets them once released", () => {
    const pool = new CacheBufferPool(8);
    const buffers = new CacheBuffers(pool, 2);
    const view = buffers.append(0, new Float32Array(0), block(2, 1, 3), 2, 0, 3);
    const other = buffers.append(1, new Float32Array(0), block(2, 1, 3), 2, 0, 3);
    expect(buffers.holds(0, view)).toBe(true);
    expect(buffers.holds(1, other)).toBe(true);
    expect(buffers.holds(1, view)).toBe(false);
    expect(buffers.holds(0, new Float32Array(view.length))).toBe(false);
    expect(buffers.holds(2, view)).toBe(false);
    buffers.release();
    expect(buffers.holds(0, view)).toBe(false);
  });
});
