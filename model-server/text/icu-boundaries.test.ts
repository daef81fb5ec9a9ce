import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { segmentBoundaries } from './icu-boundaries.js';
import { segmentDocument } from './segment.js';
import { splitLongSentence } from './split-long.js';

const GRANULARITIES = ['sentence', 'word', 'grapheme'] as const;

const direct = (segmenter: Intl.Segmenter, text: string): number[] =>
  [...segmenter.segment(text)].map((s) => s.index).slice(1);

describe('segmentBoundaries', () => {
  const word = fc.constantFrom(
    ...['Hello', 'world', 'Mr.', 'U.S.', 'e.g.', '3.14', '10:30', 'über', 'Straße', 'привет', 'Москва'],
    ...['我们', '北京大学', '図書館', 'です', '한국어', 'नमस्ते', 'مرحبا', '👩‍👩‍👧', 'e\u0301', 'x'],
  );
  const mark = fc.constantFrom(
    ' ',
    ' ',
    ' ',
    '. ',
    '? ',
    '! ',
    ', ',
    '。',
    '？',
    '」',
    '"',
    ') ',
    '\u00a0',
    '; ',
    '. (',
  );
  const text = fc.array(fc.tuple(word, mark), { maxLength: 80 }).map((parts) => parts.flat().join(''));

  it.each(GRANULARITIES)('gives what ICU gives on the whole text, across small windows (%s)', (granularity) => {
    fc.assert(
      fc.property(text, fc.constantFrom('en', 'de', 'zh', 'ja', 'ru'), (sample, lang) => {
        const segmenter = new Intl.Segmenter(lang, { granularity });
        expect(segmentBoundaries(segmenter, sample, { windowChars: 64, marginChars: 16 })).toEqual(
          direct(segmenter, sample),
        );
      }),
      { numRuns: 300 },
    );
  });

  it('crosses a stretch longer than a window that has no boundary', () => {
    const segmenter = new Intl.Segmenter('en', { granularity: 'sentence' });
    const sample = `Short. ${'word '.repeat(100)}end. Next one. ${'x'.repeat(300)}. Last.`;
    expect(segmentBoundaries(segmenter, sample, { windowChars: 64, marginChars: 16 })).toEqual(
      direct(segmenter, sample),
    );
  });

  it('rejects a margin that leaves a window no room', () => {
    const segmenter = new Intl.Segmenter('en', { granularity: 'word' });
    expect(() => segmentBoundaries(segmenter, 'a b', { windowChars: 30, marginChars: 10 })).toThrow(RangeError);
  });

  // V8's Intl.Segmenter is quadratic on the whole input: 400,000 characters in one go take tens of seconds.
  it('segments and splits a 400,000-character line in linear time', () => {
    const line = 'This is one sentence, and it goes on. '.repeat(10_000).slice(0, 400_000);
    const started = performance.now();
    expect(segmentDocument(line, 'en').pieces).toHaveLength(10_000);
    const pieces = splitLongSentence('字'.repeat(400_000), (p) => p.length, 1000).pieces;
    // Pieces end at atom boundaries (at most 256 characters apart), so each holds over 1000 - 256 characters.
    expect(pieces.slice(0, -1).every((p) => p.length <= 1000 && p.length > 1000 - 256)).toBe(true);
    expect(pieces.at(-1)!.length).toBeLessThanOrEqual(1000);
    expect(pieces.join('')).toBe('字'.repeat(400_000));
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
