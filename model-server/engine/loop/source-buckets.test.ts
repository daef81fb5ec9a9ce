import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MIN_GROUP_TOKENS, sourceBuckets } from './source-buckets.js';

describe('sourceBuckets', () => {
  it('keeps small or uniform batches in one group', () => {
    expect(sourceBuckets([5])).toEqual([[0]]);
    expect(sourceBuckets([12, 3, 40])).toEqual([[1, 0, 2]]); // 3 rows: under MIN_GROUP_TOKENS
    expect(sourceBuckets(Array(64).fill(20))).toHaveLength(1);
  });

  it('splits a mixed-length batch of 64 so padding drops from 1.7× to near the bound', () => {
    // The benchmark workload's 64 source lengths (8–48 tokens, mean 28.2).
    const lengths = [
      8, 10, 10, 10, 11, 11, 11, 11, 11, 11, 12, 15, 17, 18, 20, 20, 20, 20, 22, 22, 22, 23, 23, 23, 24, 24, 24, 25, 25,
      26, 26, 26, 27, 31, 31, 31, 33, 34, 34, 35, 35, 35, 35, 36, 36, 36, 37, 38, 38, 39, 39, 40, 41, 41, 43, 43, 43,
      43, 43, 45, 45, 45, 46, 48,
    ];
    const groups = sourceBuckets(lengths);
    const real = lengths.reduce((a, b) => a + b, 0);
    const padded = groups.reduce((sum, g) => sum + g.length * Math.max(...g.map((i) => lengths[i]!)), 0);
    expect((64 * 48) / real).toBeGreaterThan(1.69);
    expect(padded / real).toBeLessThan(1.2); // MAX_PADDING, plus what the first groups take to reach MIN_GROUP_TOKENS
    expect(groups.length).toBeLessThanOrEqual(8);
  });

  it('is a partition into groups of ascending length, each but the last holding at least MIN_GROUP_TOKENS', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 1, max: 200 }), { minLength: 1, maxLength: 300 }), (lengths) => {
        const groups = sourceBuckets(lengths);
        expect(groups.flat().sort((a, b) => a - b)).toEqual(lengths.map((_, i) => i));
        for (const [g, group] of groups.entries()) {
          const ls = group.map((i) => lengths[i]!);
          expect(ls).toEqual([...ls].sort((a, b) => a - b));
          if (g < groups.length - 1) expect(group.length * Math.max(...ls)).toBeGreaterThanOrEqual(MIN_GROUP_TOKENS);
        }
      }),
    );
  });
});
