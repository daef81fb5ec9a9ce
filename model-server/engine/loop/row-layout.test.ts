import { describe, expect, it } from 'vitest';
import { relayoutRows } from './row-layout.js';

// Rows of [outer, length, inner]; value = row·100 + outer·10 + position + 1 (0 is padding).
const make = (rows: number, outer: number, length: number, inner: number) =>
  Float32Array.from({ length: rows * outer * length * inner }, (_, i) => {
    const position = Math.floor(i / inner) % length;
    const o = Math.floor(i / (inner * length)) % outer;
    const r = Math.floor(i / (inner * length * outer));
    return r * 100 + o * 10 + position + 1;
  });

describe('relayoutRows', () => {
  const data = make(2, 2, 3, 2);

  it('gathers, reorders and duplicates rows (beam reorder)', () => {
    const out = relayoutRows(
      [
        { data, row: 1, length: 3 },
        { data, row: 1, length: 3 },
        { data, row: 0, length: 3 },
      ],
      2,
      2,
      3,
      'start',
    );
    expect(Array.from(out)).toEqual([...data.subarray(12, 24), ...data.subarray(12, 24), ...data.subarray(0, 12)]);
  });

  it('right-pads and trims at the end for encoder tensors (align start)', () => {
    const padded = relayoutRows([{ data, row: 0, length: 3 }], 2, 2, 4, 'start');
    expect(Array.from(padded)).toEqual([1, 1, 2, 2, 3, 3, 0, 0, 11, 11, 12, 12, 13, 13, 0, 0]);
    const trimmed = relayoutRows([{ data, row: 0, length: 3 }], 2, 2, 2, 'start');
    expect(Array.from(trimmed)).toEqual([1, 1, 2, 2, 11, 11, 12, 12]);
  });

  it('left-pads and trims at the start for decoder caches (align end)', () => {
    expect(Array.from(relayoutRows([{ data: make(2, 2, 3, 1), row: 1, length: 3 }], 2, 1, 5, 'end'))).toEqual([
      0, 0, 101, 102, 103, 0, 0, 111, 112, 113,
    ]);
    expect(Array.from(relayoutRows([{ data: make(2, 2, 3, 1), row: 0, length: 3 }], 2, 1, 2, 'end'))).toEqual([
      2, 3, 12, 13,
    ]);
  });

  it('concatenates rows of tensors with different lengths (joining) and keeps int64 masks int64', () => {
    const a = BigInt64Array.from([1n, 1n, 1n, 1n]); // 2 rows, length 2
    const b = BigInt64Array.from([1n]); // 1 row, length 1
    const out = relayoutRows(
      [
        { data: a, row: 0, length: 2 },
        { data: a, row: 1, length: 2 },
        { data: b, row: 0, length: 1 },
      ],
      1,
      1,
      2,
      'end',
    );
    expect(out).toBeInstanceOf(BigInt64Array);
    expect(Array.from(out)).toEqual([1n, 1n, 1n, 1n, 0n, 1n]);
  });
});

describe('relayoutRows into a reused buffer', () => {
  it('writes the same tensor as a fresh one, zeroing every padding position whatever the buffer held', () => {
    const data = make(3, 2, 4, 3);
    const cases: { sources: { row: number; length: number }[]; dstLength: number; align: 'start' | 'end' }[] = [
      {
        sources: [
          { row: 2, length: 4 },
          { row: 0, length: 4 },
        ],
        dstLength: 4,
        align: 'start',
      },
      {
        sources: [
          { row: 1, length: 4 },
          { row: 2, length: 4 },
        ],
        dstLength: 6,
        align: 'start',
      },
      {
        sources: [
          { row: 0, length: 4 },
          { row: 1, length: 4 },
        ],
        dstLength: 6,
        align: 'end',
      },
      { sources: [{ row: 0, length: 4 }], dstLength: 2, align: 'end' },
    ];
    for (const { sources, dstLength, align } of cases) {
      const rows = sources.map((s) => ({ data, ...s }));
      const fresh = relayoutRows(rows, 2, 3, dstLength, align);
      const stale = new Float32Array(fresh.length).fill(Number.NaN);
      const reused = relayoutRows(rows, 2, 3, dstLength, align, stale);
      expect(reused).toBe(stale);
      expect(Array.from(reused)).toEqual(Array.from(fresh));
    }
    const mask = BigInt64Array.from([1n, 1n]);
    const into = new BigInt64Array(6).fill(7n);
    relayoutRows(
      [
        { data: mask, row: 0, length: 2 },
        { data: mask, row: 1, length: 1 },
      ],
      1,
      1,
      3,
      'end',
      into,
    );
    expect(Array.from(into)).toEqual([0n, 1n, 1n, 0n, 0n, 1n]);
  });

  it('refuses a buffer of the wrong size', () => {
    expect(() =>
      relayoutRows([{ data: make(1, 1, 2, 1), row: 0, length: 2 }], 1, 1, 3, 'start', new Float32Array(4)),
    ).toThrow(RangeError);
  });
});
