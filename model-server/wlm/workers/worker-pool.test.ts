import { describe, expect, it } from 'vitest';
import { backoffUnits } from './worker-pool.js';

describe('restart backoff', () => {
  it('follows TorchServe’s Fibonacci sequence and is capped', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map(backoffUnits)).toEqual([1, 1, 2, 3, 5, 8, 13]);
    expect(backoffUnits(40)).toBe(60);
  });
});
