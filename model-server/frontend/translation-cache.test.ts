import { describe, expect, it } from 'vitest';
import { cacheModeOf, ENTRY_OVERHEAD_BYTES, TranslationCache, type ModelIdentity } from './translation-cache.js';

const identity: ModelIdentity = {
  modelDir: '/models/tiny',
  fingerprint: '0123456789abcdef',
  dtype: 'fp32',
  numBeams: 2,
  maxNewTokens: 200,
  minNewTokens: 0,
};
const body = (src_text: string, src_lang = 'en') => ({ src_lang, src_text });

describe('TranslationCache', () => {
  it('answers a stored sentence and runs the others, in body order', () => {
    const cache = new TranslationCache(1 << 20);
    const first = cache.lookup(identity, 'ko', [body('Hello.'), body('Bye.')], 'use');
    expect(first).toMatchObject({ missing: [0, 1], hits: 0, misses: 2 });
    first.store([{ translated: 'H' }, { translated: 'B' }]);
    const second = cache.lookup(identity, 'ko', [body('New.'), body('Bye.'), body('Hello.')], 'use');
    expect(second.missing).toEqual([0]);
    expect(second.values).toEqual([undefined, { translated: 'B' }, { translated: 'H' }]);
    expect(second).toMatchObject({ hits: 2, misses: 1 });
    expect(cache.entries).toBe(2);
  });

  it('keys on everything that changes a translation', () => {
    const cache = new TranslationCache(1 << 20);
    cache.lookup(identity, 'ko', [body('Hello.')], 'use').store([{ translated: 'H' }]);
    const others: [ModelIdentity, string, { src_lang: string; src_text: string }][] = [
      [{ ...identity, fingerprint: 'fedcba9876543210' }, 'ko', body('Hello.')],
      [{ ...identity, dtype: 'fp16' }, 'ko', body('Hello.')],
      [{ ...identity, modelDir: '/models/other' }, 'ko', body('Hello.')],
      [{ ...identity, numBeams: 1 }, 'ko', body('Hello.')],
      [{ ...identity, maxNewTokens: 16 }, 'ko', body('Hello.')],
      [identity, 'ja', body('Hello.')],
      [identity, 'ko', body('Hello.', 'de')],
      [identity, 'ko', body('Hello!')],
    ];
    for (const [id, tgt, b] of others) expect(cache.lookup(id, tgt, [b], 'use').hits).toBe(0);
    expect(cache.lookup(identity, 'ko', [body('Hello.')], 'use').hits).toBe(1);
  });

  it('no-cache looks nothing up but stores; no-store does neither; off or unidentified does neither', () => {
    const cache = new TranslationCache(1 << 20);
    const refresh = cache.lookup(identity, 'ko', [body('Hello.')], 'refresh');
    expect(refresh).toMatchObject({ missing: [0], hits: 0, misses: 0 });
    refresh.store([{ translated: 'H' }]);
    expect(cache.lookup(identity, 'ko', [body('Hello.')], 'refresh').hits).toBe(0);
    expect(cache.lookup(identity, 'ko', [body('Hello.')], 'use').hits).toBe(1);
    cache.lookup(identity, 'ko', [body('Other.')], 'skip').store([{ translated: 'O' }]);
    expect(cache.entries).toBe(1);
    cache.lookup(undefined, 'ko', [body('Other.')], 'use').store([{ translated: 'O' }]);
    expect(cache.entries).toBe(1);
    const off = new TranslationCache(0);
    off.lookup(identity, 'ko', [body('Hello.')], 'use').store([{ translated: 'H' }]);
    expect(off.lookup(identity, 'ko', [body('Hello.')], 'use')).toMatchObject({ hits: 0, misses: 0 });
    expect(off.enabled).toBe(false);
  });

  it('counts each entry by its strings and overhead, and stays within its bound', () => {
    const one = new TranslationCache(1 << 20);
    one.lookup(identity, 'ko', [body('Hello.')], 'use').store([{ translated: 'H' }]);
    const key = 16 + 1 + 2 + 1 + 'Hello.'.length;
    expect(one.bytes).toBe(2 * (key + JSON.stringify({ translated: 'H' }).length) + ENTRY_OVERHEAD_BYTES);
    const small = new TranslationCache(4 * one.bytes);
    for (let i = 0; i < 50; i++) {
      small.lookup(identity, 'ko', [body(`Sentence ${i % 10}.`)], 'use').store([{ translated: `T${i % 10}` }]);
      expect(small.bytes).toBeLessThanOrEqual(small.maxBytes);
    }
    expect(small.entries).toBe(3);
    // The three most recent survive.
    const hits = [7, 8, 9].map((i) => small.lookup(identity, 'ko', [body(`Sentence ${i}.`)], 'use').hits);
    expect(hits).toEqual([1, 1, 1]);
  });
});

describe('cacheModeOf', () => {
  it('reads the request directives', () => {
    expect(cacheModeOf(undefined)).toBe('use');
    expect(cacheModeOf('max-age=60')).toBe('use');
    expect(cacheModeOf('No-Cache')).toBe('refresh');
    expect(cacheModeOf('max-age = 0')).toBe('refresh');
    expect(cacheModeOf('no-cache, no-store')).toBe('skip');
  });
});
