import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { expectLinearTime } from '../../harness/linear-time.js';
import { cacheModeOf, TranslationCache, type ModelIdentity } from './translation-cache.js';
import type { SentenceItem } from '../protocol.js';

// The heap test measures live memory after a full collection.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

const identity: ModelIdentity = {
  modelDir: '/models/tiny',
  fingerprint: '0123456789abcdef',
  dtype: 'fp32',
  numBeams: 2,
  maxNewTokens: 200,
  minNewTokens: 0,
};
const body = (text: string, srcLang = 'en') => ({ srcLang, text });

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
    const others: [ModelIdentity, string, SentenceItem][] = [
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

  it('evicts the least recently used entries to stay within its bound', () => {
    const one = new TranslationCache(1 << 20);
    one.lookup(identity, 'ko', [body('Sentence 0.')], 'use').store([{ translated: 'T0' }]);
    const small = new TranslationCache(4 * one.bytes);
    for (let i = 0; i < 50; i++) {
      small.lookup(identity, 'ko', [body(`Sentence ${i % 10}.`)], 'use').store([{ translated: `T${i % 10}` }]);
      expect(small.bytes).toBeLessThanOrEqual(small.maxBytes);
    }
    expect(small.entries).toBe(4);
    // The four most recent survive.
    const hits = [6, 7, 8, 9].map((i) => small.lookup(identity, 'ko', [body(`Sentence ${i}.`)], 'use').hits);
    expect(hits).toEqual([1, 1, 1, 1]);
  });

  it('keeps the process heap within its bound plus a stated overhead, whatever bodies its sentences were cut from', () => {
    // Each sentence and answer is a slice of a 64 KB string, as a sentence of a request body and an answer of a
    // worker's message are: an entry that kept its parent would keep 128 KB alive, 1,000 of them 125 MiB.
    const maxBytes = 256 * 1024;
    const overhead = 8 * 1024 * 1024;
    const cache = new TranslationCache(maxBytes);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 1_000; i++) {
      const padding = 'x'.repeat(64 * 1024);
      const sentence = `${padding}This is sentence number ${i} of a long body.`.slice(padding.length);
      const answer = `${padding}Das ist Satz Nummer ${i} eines langen Textes.`.slice(padding.length);
      cache.lookup(identity, 'ko', [body(sentence)], 'use').store([{ translated: answer }]);
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(cache.entries).toBeGreaterThan(100);
    expect(grown).toBeLessThan(maxBytes + overhead);
    // The entries are the sentences, not copies of something else.
    const last = cache.lookup(identity, 'ko', [body('This is sentence number 999 of a long body.')], 'use');
    expect(last.values).toEqual([{ translated: 'Das ist Satz Nummer 999 eines langen Textes.' }]);
  });
});

describe('cacheModeOf', () => {
  it('reads the request directives', () => {
    expect(cacheModeOf(undefined)).toBe('use');
    expect(cacheModeOf('max-age=60')).toBe('use');
    expect(cacheModeOf('No-Cache')).toBe('refresh');
    expect(cacheModeOf('max-age = 0')).toBe('refresh');
    expect(cacheModeOf('no-cache, no-store')).toBe('skip');
    expect(cacheModeOf(' max-age\t=\t0 ')).toBe('refresh');
  });

  it("reads a client's header in linear time: a run of spaces not followed by = is one pass", () => {
    expectLinearTime((n) => `max-age${' '.repeat(n)}x`, cacheModeOf, 4_000);
  });
});
