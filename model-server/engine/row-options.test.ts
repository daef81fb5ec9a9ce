import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import './ort-env.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { Constraints, NO_PROGRESS } from './constraints.js';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { type TranslateOptions, type TranslateRow, TranslationEngine } from './engine.js';

describe('Constraints', () => {
  const c = new Constraints([[7, 8, 9], [5]]);

  it('a started term is forced to its end; </s> waits for every term; the budget starts the next one', () => {
    let p = c.advance(NO_PROGRESS, 7);
    expect(c.forced(p, 100)).toBe(8);
    p = c.advance(p, 8);
    expect(c.forced(p, 100)).toBe(9);
    p = c.advance(p, 9);
    expect(c.forced(p, 100)).toBeUndefined();
    expect(c.mayEnd(p)).toBe(false);
    expect(c.nextStart(p)).toBe(5);
    expect(c.remaining(p)).toBe(1);
    // One token of a term left and two steps (the term and </s>): it starts now.
    expect(c.forced(p, 2)).toBe(5);
    expect(c.forced(p, 3)).toBeUndefined();
    p = c.advance(p, 5);
    expect(c.mayEnd(p)).toBe(true);
    expect(c.remaining(p)).toBe(0);
  });

  it('taking other tokens changes nothing; a term taken by the model’s choice counts', () => {
    expect(c.advance(NO_PROGRESS, 3)).toBe(NO_PROGRESS);
    expect(c.remaining(NO_PROGRESS)).toBe(4);
    expect(c.mayEnd(c.advance(c.advance(c.advance(c.advance(NO_PROGRESS, 5), 7), 8), 9))).toBe(true);
  });
});

const root = mkdtempSync(path.join(tmpdir(), 'constraints-'));
let engine: TranslationEngine;
beforeAll(async () => {
  makeDemoModel('tiny', path.join(root, 'tiny'));
  engine = await TranslationEngine.load({ modelDir: path.join(root, 'tiny'), intraOpThreads: 1, dtype: 'fp32' });
});
afterAll(async () => {
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

/** Whether `ids` holds `term` as a contiguous run. */
const contains = (ids: readonly number[], term: readonly number[]) =>
  ids.some((_, i) => term.every((t, k) => ids[i + k] === t));

describe('constrained decoding on the generated model (which writes no term by chance)', () => {
  const rows: TranslateRow[] = [
    { srcLang: 'en', tgtLang: 'de', text: 'the quick brown fox jumps over the lazy dog' },
    { srcLang: 'en', tgtLang: 'de', text: 'hello world' },
    { srcLang: 'en', tgtLang: 'fr', text: 'good morning thank you please' },
    { srcLang: 'en', tgtLang: 'de', text: 'translate language model server batch token' },
  ];
  const termTexts = [['Fuchs', 'Hund'], [], ['matin'], ['Server token batch', 'language']];

  for (const [name, options] of [
    ['greedy', { numBeams: 1, maxNewTokens: 24 }],
    ['beam 2', { numBeams: 2, maxNewTokens: 24 }],
    ['beam 3, short cap', { numBeams: 3, maxNewTokens: 4 }],
  ] as [string, TranslateOptions][]) {
    it(`${name}: every constrained row holds its terms; rows without terms in the same batch are unchanged`, async () => {
      const terms = termTexts.map((list) => list.map((t) => engine.encodeTerm(t)));
      const alone = await Promise.all(rows.map((row) => engine.translate([row], options)));
      const together = await Promise.all(
        rows.map((row, i) =>
          engine.generate(engine.prepare(row), terms[i]!.length ? { ...options, constraints: terms[i] } : options),
        ),
      );
      together.forEach((translation, i) => {
        for (const [k, term] of terms[i]!.entries()) {
          expect(contains(translation.tokenIds, term), `row ${i} lacks "${termTexts[i]![k]}"`).toBe(true);
          expect(translation.text).toContain(termTexts[i]![k]!);
        }
        if (terms[i]!.length === 0) expect(translation.tokenIds).toEqual(alone[i]![0]!.tokenIds);
        else expect(alone[i]![0]!.text).not.toContain(termTexts[i]![0]!);
      });
    });
  }

  it('a term the vocabulary cannot write is a 400, not a silent miss', () => {
    expect(() => engine.encodeTerm('</s>')).toThrow(ServeError);
    expect(() => engine.encodeTerm('')).toThrow(/cannot write/);
  });
});

describe('alternatives: beam search runners-up for the rows that ask', () => {
  const row: TranslateRow = { srcLang: 'en', tgtLang: 'de', text: 'the quick brown fox jumps over the lazy dog' };
  const other: TranslateRow = { srcLang: 'en', tgtLang: 'fr', text: 'good morning thank you please' };

  it('up to N distinct texts besides the translation, ranked by score; a greedy row beside it is unchanged', async () => {
    const greedy: TranslateOptions = { numBeams: 1, maxNewTokens: 16 };
    const [otherAlone] = await engine.translate([other], greedy);
    const [asked, beside] = await Promise.all([
      engine.generate(engine.prepare(row), { ...greedy, alternatives: 3 }),
      engine.generate(engine.prepare(other), greedy),
    ]);
    expect(beside!.tokenIds).toEqual(otherAlone!.tokenIds);
    expect(beside!.alternatives).toBeUndefined();
    const alternatives = asked!.alternatives!;
    expect(alternatives.length).toBeGreaterThan(0);
    expect(alternatives.length).toBeLessThanOrEqual(3);
    const texts = [asked!.text, ...alternatives.map((a) => a.text)];
    expect(new Set(texts).size).toBe(texts.length);
    const scores = [asked!.score, ...alternatives.map((a) => a.score)];
    expect(scores).toEqual([...scores].sort((a, b) => b - a));
    // The translation itself is what a 4-beam search answers: asking for alternatives widens the beam, no more.
    const [fourBeams] = await engine.translate([row], { numBeams: 4, maxNewTokens: 16 });
    expect(asked!.tokenIds).toEqual(fourBeams!.tokenIds);
  });
});
