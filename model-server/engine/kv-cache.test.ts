import { describe, expect, it } from 'vitest';
import { CacheBuffers } from './kv-cache.js';

/** `[blocks, length, dh]` with value = block·1000 + first + position·10 + d (distinct everywhere). */
const block = (blocks: number, length: number, dh: number, first = 0) =>
  Float32Array.from({ length: blocks * length * dh }, (_, i) => {
    const d = i % dh;
    const position = Math.floor(i / dh) % length;
    return Math.floor(i / (dh * length)) * 1000 + (first + position) * 10 + d;
  });

describe('CacheBuffers', () => {
  it('appends each block’s new positions after its past ones', () => {
    const buffers = new CacheBuffers(1);
    const out = buffers.append(0, block(2, 2, 3), block(2, 1, 3, 2), 2, 2, 3);
    expect(Array.from(out)).toEqual(Array.from(block(2, 3, 3)));
    // From an empty past (the first step), the result is the appended part itself.
    expect(Array.from(new CacheBuffers(1).append(0, new Float32Array(0), block(2, 1, 3), 2, 0, 3))).toEqual(
      Array.from(block(2, 1, 3)),
    );
  });

  it('never writes into the buffer of the past it reads, and reuses its two buffers across steps', () => {
    const buffers = new CacheBuffers(2);
    const blocks = 4;
    const dh = 2;
    let past: Float32Array[] = [new Float32Array(0), new Float32Array(0)];
    const seen: ArrayBufferLike[][] = [[], []];
    let allocatedAfterGrowth = 0;
    for (let step = 0; step < 12; step++) {
      const next = past.map((p, k) => {
        const snapshot = Float32Array.from(p);
        const out = buffers.append(k, p, block(blocks, 1, dh, step), blocks, step, dh);
        expect(out.buffer).not.toBe(p.buffer);
        expect(Array.from(p)).toEqual(Array.from(snapshot)); // the past was not written into
        expect(Array.from(out)).toEqual(Array.from(block(blocks, step + 1, dh)));
        seen[k]!.push(out.buffer);
        return out;
      });
      past = next;
      if (step === 8) allocatedAfterGrowth = buffers.allocatedFloats;
    }
    // Two buffers per tensor, grown geometrically: 12 steps need far fewer than 12 allocations each.
    for (const buffersOfTensor of seen) expect(new Set(buffersOfTensor).size).toBeLessThanOrEqual(8);
    // Consecutive results alternate; the step after next may reuse the first one's buffer.
    expect(seen[0]![11]).toBe(seen[0]![9]);
    expect(buffers.allocatedFloats).toBe(allocatedAfterGrowth);
  });

  it('takes a past from anywhere (a gather’s fresh array), fewer rows without allocating, and rejects bad shapes', () => {
    const buffers = new CacheBuffers(1);
    const a = buffers.append(0, block(4, 3, 2), block(4, 1, 2, 3), 4, 3, 2);
    const b = buffers.append(0, a, block(4, 1, 2, 4), 4, 4, 2);
    const allocated = buffers.allocatedFloats;
    // Rows 1 and 3 leave: the gather copies them out into a fresh array, which is the next past.
    const gathered = Float32Array.from([...b.subarray(10, 20), ...b.subarray(30, 40)]);
    const c = buffers.append(0, gathered, Float32Array.of(-1, -2, -3, -4), 2, 5, 2);
    expect(buffers.allocatedFloats).toBe(allocated);
    expect(Array.from(c)).toEqual([...b.subarray(10, 20), -1, -2, ...b.subarray(30, 40), -3, -4]);
    expect(() => buffers.append(0, c, new Float32Array(4), 3, 6, 2)).toThrow(RangeError);
    expect(() => buffers.append(0, c, new Float32Array(3), 2, 6, 2)).toThrow(RangeError);
    expect(() => buffers.append(1, c, new Float32Array(4), 2, 6, 2)).toThrow(RangeError);
  });
});
