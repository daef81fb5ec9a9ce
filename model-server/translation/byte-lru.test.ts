import { describe, expect, it } from 'vitest';
import { ByteLru } from './byte-lru.js';

describe('ByteLru', () => {
  it('holds entries while their bytes fit, and evicts the least recently used first', () => {
    const lru = new ByteLru<string>(100);
    expect(lru.set('a', 'A', 40)).toBe(true);
    expect(lru.set('b', 'B', 30)).toBe(true);
    expect(lru.set('c', 'C', 30)).toBe(true);
    expect(lru.bytes).toBe(100);
    // Reading a makes b the least recently used.
    expect(lru.get('a')).toBe('A');
    expect(lru.keys()).toEqual(['b', 'c', 'a']);
    expect(lru.set('d', 'D', 20)).toBe(true);
    expect(lru.keys()).toEqual(['c', 'a', 'd']);
    expect(lru.get('b')).toBeUndefined();
    expect(lru.bytes).toBe(90);
    // One large entry pushes out as many as it needs, oldest first.
    expect(lru.set('e', 'E', 75)).toBe(true);
    expect(lru.keys()).toEqual(['d', 'e']);
    expect(lru.bytes).toBe(95);
  });

  it('never holds more than its bound, whatever is stored', () => {
    const lru = new ByteLru<number>(1000);
    for (let i = 0; i < 500; i++) {
      lru.set(`k${i % 97}`, i, 1 + ((i * 37) % 300));
      expect(lru.bytes).toBeLessThanOrEqual(1000);
    }
    expect(lru.size).toBeGreaterThan(0);
  });

  it('refuses an entry larger than the bound without evicting anything', () => {
    const lru = new ByteLru<string>(50);
    lru.set('a', 'A', 30);
    expect(lru.set('huge', 'H', 51)).toBe(false);
    expect(lru.keys()).toEqual(['a']);
    expect(lru.bytes).toBe(30);
  });

  it('replacing a key counts its new size once', () => {
    const lru = new ByteLru<string>(100);
    lru.set('a', 'A', 30);
    lru.set('b', 'B', 30);
    lru.set('a', 'A2', 60);
    expect(lru.bytes).toBe(90);
    expect(lru.keys()).toEqual(['b', 'a']);
    expect(lru.get('a')).toBe('A2');
  });

  it('stores nothing with a bound of 0', () => {
    const lru = new ByteLru<string>(0);
    expect(lru.set('a', 'A', 1)).toBe(false);
    expect(lru.size).toBe(0);
    expect(() => new ByteLru(-1)).toThrow(RangeError);
  });
});
