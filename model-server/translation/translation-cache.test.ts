import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { expectLinearTime } from '../../harness/linear-time.js';
import { cacheModeOf, TranslationCache, type ModelIdentity } from './translation-cache.js';
import type { PlannedSentence } from './translation-plan.js';

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
/** A planned sentence whose id is its text unless given: ids are never positions. */
const body = (text: string, srcLang = 'en', id = text): PlannedSentence => ({ id, item: { srcLang, text } });
const answer = (id: string, translated: string) => new Map([[id, { translated }]]);

describe('TranslationCache', () => {
  it('answers stored sentences by id and runs the others, in plan order', () => {
    const cache = new TranslationCache(1 << 20);
    const first = cache.lookup(identity, 'ko', [body('Hello.', 'en', 'a'), body('Bye.', 'en', 'b')], 'use');
    expect(first).toMatchObject({ hits: 0, misses: 2 });
    expect(first.missing.map((s) => s.id)).toEqual(['a', 'b']);
    first.store(
      new Map([
        ['b', { translated: 'B' }],
        ['a', { translated: 'H' }],
      ]),
    );
    const sentences = [body('New.', 'en', 'x'), body('Bye.', 'en', 'y'), body('Hello.', 'en', 'z')];
    const second = cache.lookup(identity, 'ko', sentences, 'use');
    expect(second.missing.map((s) => s.id)).toEqual(['x']);
    expect([...second.found]).toEqual([
      ['y', { translated: 'B' }],
      ['z', { translated: 'H' }],
    ]);
    expect(second).toMatchObject({ hits: 2, misses: 1 });
    expect(cache.entries).toBe(2);
  });

  it('keys on everything that changes a translation', () => {
    const cache = new TranslationCache(1 << 20);
    cache.lookup(identity, 'ko', [body('Hello.')], 'use').store(answer('Hello.', 'H'));
    const others: [ModelIdentity, string, PlannedSentence][] = [
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
    expect(refresh).toMatchObject({ missing: [body('Hello.')], hits: 0, misses: 0 });
    refresh.store(answer('Hello.', 'H'));
    expect(cache.lookup(identity, 'ko', [body('Hello.')], 'refresh').hits).toBe(0);
    expect(cache.lookup(identity, 'ko', [body('Hello.')], 'use').hits).toBe(1);
    cache.lookup(identity, 'ko', [body('Other.')], 'skip').store(answer('Other.', 'O'));
    expect(cache.entries).toBe(1);
    cache.lookup(undefined, 'ko', [body('Other.')], 'use').store(answer('Other.', 'O'));
    expect(cache.entries).toBe(1);
    const off = new TranslationCache(0);
    off.lookup(identity, 'ko', [body('Hello.')], 'use').store(answer('Hello.', 'H'));
    expect(off.lookup(identity, 'ko', [body('Hello.')], 'use')).toMatchObject({ hits: 0, misses: 0 });
    expect(off.enabled).toBe(false);
  });

  it('evicts the least recently used entries to stay within its bound', () => {
    const one = new TranslationCache(1 << 20);
    one.lookup(identity, 'ko', [body('Sentence 0.')], 'use').store(answer('Sentence 0.', 'T0'));
    const small = new TranslationCache(4 * one.bytes);
    for (let i = 0; i < 50; i++) {
      small
        .lookup(identity, 'ko', [body(`Sentence ${i % 10}.`)], 'use')
        .store(answer(`Sentence ${i % 10}.`, `T${i % 10}`));
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
      const translated = `${padding}Das ist Satz Nummer ${i} eines langen Textes.`.slice(padding.length);
      cache.lookup(identity, 'ko', [body(sentence)], 'use').store(answer(sentence, translated));
    }
    gc();
    const grown = process.memoryUsage().heapUsed - before;
    expect(cache.entries).toBeGreaterThan(100);
    expect(grown).toBeLessThan(maxBytes + overhead);
    // The entries are the sentences, not copies of something else.
    const last = cache.lookup(identity, 'ko', [body('This is sentence number 999 of a long body.')], 'use');
    expect(last.found.get('This is sentence number 999 of a long body.')).toEqual({
      translated: 'Das ist Satz Nummer 999 eines langen Textes.',
    });
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
