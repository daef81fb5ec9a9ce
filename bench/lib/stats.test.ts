import { describe, expect, it } from 'vitest';
import { alternatingOrder, mean, median, medianOf, quantile, ratio, summarize } from './stats.js';

describe('stats', () => {
  it('quantile interpolates between closest ranks and does not reorder its input', () => {
    const values = [5, 1, 4, 2, 3];
    expect(quantile(values, 0)).toBe(1);
    expect(quantile(values, 1)).toBe(5);
    expect(quantile(values, 0.5)).toBe(3);
    expect(quantile(values, 0.25)).toBe(2);
    expect(quantile([1, 2], 0.5)).toBe(1.5);
    expect(quantile([10, 20, 30, 40], 0.9)).toBeCloseTo(37, 10);
    expect(values).toEqual([5, 1, 4, 2, 3]);
    expect(quantile([], 0.5)).toBeNaN();
    expect(() => quantile([1], 1.5)).toThrow(RangeError);
  });

  it('p99 of 1..100 is 99.01 (R-7), p50 is 50.5', () => {
    const values = Array.from({ length: 100 }, (_, i) => i + 1);
    const s = summarize(values);
    expect(s.p50).toBe(50.5);
    expect(s.p99).toBeCloseTo(99.01, 10);
    expect(s.min).toBe(1);
    expect(s.max).toBe(100);
    expect(s.mean).toBe(50.5);
    expect(s.count).toBe(100);
  });

  it('median, mean and ratio handle empty and missing values without inventing numbers', () => {
    expect(median([3, 1, 2])).toBe(2);
    expect(mean([])).toBeNaN();
    expect(ratio(6, 3)).toBe(2);
    expect(ratio(1, 0)).toBeNaN();
    expect(ratio(Number.NaN, 3)).toBeNaN();
  });

  it('medianOf takes each field over repeats and skips repeats that did not measure it', () => {
    expect(
      medianOf([
        { a: 1, b: 10 },
        { a: 3, b: Number.NaN },
        { a: 2, b: 30 },
      ]),
    ).toEqual({ a: 2, b: 20 });
    expect(medianOf([{ a: Number.NaN }]).a).toBeNaN();
    expect(() => medianOf([])).toThrow(RangeError);
  });

  it('alternatingOrder reverses the arms on every other repeat', () => {
    expect(alternatingOrder(['a', 'b', 'c'], 3)).toEqual([
      ['a', 'b', 'c'],
      ['c', 'b', 'a'],
      ['a', 'b', 'c'],
    ]);
  });
});
