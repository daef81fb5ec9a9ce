import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { segmentDocument } from './segment.js';
import { joinSegments } from './segments.js';
import { fitSegments, splitLongSentence, splitLongSentenceAsync } from './split-long.js';

/** A length in code points: a stand-in for the model's token count. */
const points = (piece: string): number => [...piece].length;

const graphemes = (text: string): string[] =>
  [...new Intl.Segmenter(undefined, { granularity: 'grapheme' }).segment(text)].map((s) => s.segment);

describe('splitLongSentence', () => {
  it('returns a sentence that fits as one piece, whitespace at its ends in the separators', () => {
    expect(splitLongSentence('  Short one.\n', points, 20)).toEqual({
      pieces: ['Short one.'],
      separators: ['  ', '\n'],
    });
    expect(splitLongSentence(' \t', points, 20)).toEqual({ pieces: [], separators: [' \t'] });
  });

  it('cuts at clause punctuation before whitespace, packing as many clauses as fit', () => {
    const sentence = 'We went to the market, bought some apples, pears and plums, and then walked home slowly.';
    expect(splitLongSentence(sentence, points, 45)).toEqual({
      pieces: ['We went to the market, bought some apples,', 'pears and plums, and then walked home slowly.'],
      separators: ['', ' ', ''],
    });
  });

  it('prefers a semicolon or colon to a comma, and an inner ? or ! to both', () => {
    expect(splitLongSentence('First, a list; second, more; third, the end', points, 30).pieces).toEqual([
      'First, a list; second, more;',
      'third, the end',
    ]);
    expect(splitLongSentence('Why, he asked? Then, slowly; he left, quietly', points, 32).pieces).toEqual([
      'Why, he asked?',
      'Then, slowly; he left, quietly',
    ]);
  });

  it('does not cut inside numbers or times: "1,000" and "10:30" have no space after the mark', () => {
    const pieces = splitLongSentence('Pay 1,000,000 dollars at 10:30 tomorrow', points, 20).pieces;
    expect(pieces).toEqual(['Pay 1,000,000', 'dollars at 10:30', 'tomorrow']);
  });

  it('falls back to whitespace in a sentence without clause marks', () => {
    expect(splitLongSentence('one two three four five six seven', points, 14)).toEqual({
      pieces: ['one two three', 'four five six', 'seven'],
      separators: ['', ' ', ' ', ''],
    });
  });

  it('cuts zh/ja text after full-width commas, which need no space after them', () => {
    expect(splitLongSentence('我们先去了商店，买了很多水果，然后慢慢地走回家了。', points, 15)).toEqual({
      pieces: ['我们先去了商店，买了很多水果，', '然后慢慢地走回家了。'],
      separators: ['', '', ''],
    });
    expect(splitLongSentence('駅まで歩いて、電車に乗って、会社に行きました。', points, 14).pieces).toEqual([
      '駅まで歩いて、電車に乗って、',
      '会社に行きました。',
    ]);
  });

  it('cuts unpunctuated zh/ja text at ICU word boundaries, not inside words', () => {
    const sentence = '我们明天早上一起去北京大学图书馆看书学习';
    const words = new Set(
      [...new Intl.Segmenter('zh', { granularity: 'word' }).segment(sentence)]
        .map((s) => s.index)
        .concat(sentence.length),
    );
    const { pieces } = splitLongSentence(sentence, points, 8);
    expect(pieces.length).toBeGreaterThan(2);
    let at = 0;
    for (const piece of pieces) {
      expect([...piece].length).toBeLessThanOrEqual(8);
      at += piece.length;
      expect(words.has(at)).toBe(true);
    }
  });

  it('hard-splits an over-long word by grapheme clusters, never inside one', () => {
    const word = 'https://example.com/' + 'नमस्ते👩‍👩‍👧e\u0301'.repeat(4);
    const { pieces, separators } = splitLongSentence(word, (p) => p.length, 10);
    expect(pieces.join('')).toBe(word);
    expect(separators.every((s) => s === '')).toBe(true);
    const clusters = new Set(graphemes(word));
    for (const piece of pieces) {
      expect(piece.length).toBeLessThanOrEqual(10);
      for (const g of graphemes(piece)) expect(clusters.has(g)).toBe(true);
    }
  });

  it('gives up at a single grapheme cluster that does not fit, returning it alone', () => {
    expect(splitLongSentence('ab c', () => 1, 0)).toEqual({ pieces: ['a', 'b', 'c'], separators: ['', '', ' ', ''] });
  });

  it('measures each character at most twice, whatever the text', () => {
    for (const sentence of [
      Array.from({ length: 4000 }, (_, i) => `w${i % 10}`).join(' '), // 11,999 characters of short words
      'x'.repeat(12_000), // one word
      '我们明天早上一起去北京大学图书馆看书学习'.repeat(600), // unspaced text
      Array.from({ length: 3000 }, (_, i) => `w${i}`).join(', '), // commas everywhere
    ]) {
      let measured = 0;
      const measure = (piece: string): number => {
        measured += piece.length;
        return piece.length;
      };
      const { pieces } = splitLongSentence(sentence, measure, 200);
      for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(200);
      expect(pieces.join('').length).toBeLessThanOrEqual(sentence.length);
      // Twice each character, plus each distinct whitespace gap once.
      expect(measured).toBeLessThanOrEqual(2 * sentence.length + 4);
    }
  });

  it('spread over the event loop: the same pieces, and the loop turns while it works', async () => {
    const sentence = Array.from({ length: 20_000 }, (_, i) => `w${i % 10}`).join(' ');
    const slow = (piece: string): number => {
      const until = performance.now() + 0.05;
      while (performance.now() < until); // a tokenizer's cost per call
      return piece.length;
    };
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    const spread = await splitLongSentenceAsync(sentence, slow, 200, { sliceMs: 5 });
    clearInterval(timer);
    expect(spread).toEqual(splitLongSentence(sentence, (p) => p.length, 200));
    expect(turns).toBeGreaterThan(1);
  });

  const unit = fc.constantFrom(
    ...['a', 'bb', 'ccc', 'Dddddddd', '1,000', '10:30', ' ', ' ', '  ', '\n', '\t', '\u00a0', '\u0085', ',', ', ', ';'],
    ...[
      '; ',
      ': ',
      ' — ',
      '? ',
      '! ',
      '，',
      '、',
      '。',
      '？',
      '我们',
      '東京',
      'の',
      '한국어',
      'नमस्ते',
      '،',
      'مرحبا',
      '😀',
    ],
    ...['👩‍👩‍👧', 'e\u0301', '.'],
  );
  const sentences = fc.array(unit, { maxLength: 40 }).map((units) => units.join(''));

  it('is lossless, and every piece fits whenever a split is possible', () => {
    fc.assert(
      fc.property(sentences, fc.integer({ min: 1, max: 30 }), (sentence, limit) => {
        const fits = (p: string) => points(p) <= limit;
        const segments = splitLongSentence(sentence, points, limit);
        expect(joinSegments(segments)).toBe(sentence);
        expect(segments.separators).toHaveLength(segments.pieces.length + 1);
        for (const separator of segments.separators) expect(separator).toMatch(/^[\s\u0085]*$/u);
        for (const piece of segments.pieces) {
          expect(piece).toMatch(/^[^\s\u0085](?:.*[^\s\u0085])?$/su);
          if (!fits(piece)) expect(graphemes(piece)).toHaveLength(1);
        }
        if (fits(sentence.trim())) expect(segments.pieces.length).toBeLessThanOrEqual(1);
      }),
      { numRuns: 1000 },
    );
  });

  it('keeps every piece fitting under a word-count check too', () => {
    const words = (p: string): number => p.split(/[\s,，、。;]+/u).filter(Boolean).length;
    fc.assert(
      fc.property(sentences, fc.integer({ min: 1, max: 6 }), (sentence, limit) => {
        const fits = (p: string): boolean => words(p) <= limit;
        const segments = splitLongSentence(sentence, words, limit);
        expect(joinSegments(segments)).toBe(sentence);
        for (const piece of segments.pieces) if (!fits(piece)) expect(graphemes(piece)).toHaveLength(1);
      }),
      { numRuns: 500 },
    );
  });
});

describe('fitSegments', () => {
  it('replaces only the pieces that do not fit, keeping the document lossless', () => {
    const text = 'Short one.\n\nThis sentence is far too long, so it is cut at its comma. Fine.';
    const fitted = fitSegments(segmentDocument(text, 'en'), points, 40);
    expect(fitted).toEqual({
      pieces: ['Short one.', 'This sentence is far too long,', 'so it is cut at its comma.', 'Fine.'],
      separators: ['', '\n\n', ' ', ' ', ''],
    });
    expect(joinSegments(fitted)).toBe(text);
  });
});
