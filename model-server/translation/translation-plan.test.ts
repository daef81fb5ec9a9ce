import { describe, expect, it } from 'vitest';
import { planTranslation, type PlanContext } from './translation-plan.js';

const context: PlanContext = {
  tgtLang: 'fr',
  readable: ['en', 'de', 'fr', 'ko', 'zh', 'ja'],
  limits: { maxChars: 10_000, maxSentences: 50 },
};
/** A stand-in translation: the sentence upper-cased, as the handler would answer it. */
const translate = (bodies: { text: string }[]) => bodies.map((b) => ({ translated: b.text.toUpperCase() }));

describe('planTranslation: documents in, documents out', () => {
  it('one job per sentence; the answer keeps paragraphs, line breaks and spacing between sentences', () => {
    const text = '  Hello there. How are you?\n\nSecond paragraph!  It has two sentences.\n- a list item\n';
    const plan = planTranslation({ src_lang: 'en', src_text: text }, context);
    expect(plan.bodies.map((b) => b.text)).toEqual([
      'Hello there.',
      'How are you?',
      'Second paragraph!',
      'It has two sentences.',
      '- a list item',
    ]);
    expect(plan.bodies.every((b) => b.srcLang === 'en')).toBe(true);
    expect(plan.answer(translate(plan.bodies))).toEqual({ translated: text.replace(/[a-z]/g, (c) => c.toUpperCase()) });
  });

  it('a paragraph is exactly its sentences translated and joined by the separators that stood between them', () => {
    const sentences = ['Mr. Smith paid 3.14 dollars.', 'He left at 10:30.', 'Then it rained!'];
    const plan = planTranslation({ src_lang: 'en', src_text: sentences.join(' ') }, context);
    expect(plan.bodies.map((b) => b.text)).toEqual(sentences);
    expect(plan.answer(sentences.map((s, i) => ({ translated: `<${i}>` })))).toEqual({ translated: '<0> <1> <2>' });
  });

  it('an array keeps its shape; each text is its own document', () => {
    const plan = planTranslation({ src_lang: 'en', src_text: ['One. Two.', 'Three.'] }, context);
    expect(plan.bodies).toHaveLength(3);
    expect(plan.answer(translate(plan.bodies))).toEqual({ translated: ['ONE. TWO.', 'THREE.'] });
  });

  it('src_lang "auto" detects each text and reports it beside the translation', () => {
    const single = planTranslation(
      { src_lang: 'auto', src_text: 'Der Zug nach Berlin hatte heute Morgen fast eine Stunde Verspätung.' },
      context,
    );
    expect(single.bodies[0]!.srcLang).toBe('de');
    expect(single.answer(translate(single.bodies))).toMatchObject({ detected_src_lang: 'de' });
    const many = planTranslation(
      {
        src_lang: 'auto',
        src_text: [
          'The weather was lovely all weekend, so we went hiking.',
          '오늘 저녁에는 친구들과 함께 영화를 보러 갈 거예요.',
        ],
      },
      context,
    );
    expect(many.answer(translate(many.bodies))).toMatchObject({ detected_src_lang: ['en', 'ko'] });
  });

  it('detect "guess" takes the best guess among the languages the model reads, however short the text', () => {
    for (const [text, lang] of [
      ['Hello', 'en'],
      ['Hallo', 'de'],
      ['안녕', 'ko'],
    ] as const) {
      const plan = planTranslation({ src_lang: 'auto', src_text: text, detect: 'guess' }, context);
      expect(plan.bodies).toEqual([{ srcLang: lang, text }]);
    }
    // Nothing to tell by: English, as LibreTranslate falls back; the default (strict) still refuses.
    for (const text of ['1234', '?!']) {
      expect(planTranslation({ src_lang: 'auto', src_text: text, detect: 'guess' }, context).bodies).toEqual([
        { srcLang: 'en', text },
      ]);
      expect(() => planTranslation({ src_lang: 'auto', src_text: text }, context)).toThrow(/Could not detect/);
    }
    const noEnglish = { ...context, readable: ['ko', 'ja'] };
    expect(planTranslation({ src_lang: 'auto', src_text: '1234', detect: 'guess' }, noEnglish).bodies).toEqual([
      { srcLang: 'ko', text: '1234' },
    ]);
  });

  it('"auto" on text too short to tell, or in a language the model cannot read, is a 400 naming the text', () => {
    expect(() => planTranslation({ src_lang: 'auto', src_text: 'Hi' }, context)).toThrow(
      expect.objectContaining({
        status: 400,
        message: expect.stringMatching(/^Could not detect the language of src_text/),
      }),
    );
    expect(() =>
      planTranslation(
        {
          src_lang: 'auto',
          src_text: ['Good morning to everyone here today!', 'Ayer fuimos al mercado a comprar fruta fresca.'],
        },
        context,
      ),
    ).toThrow(
      expect.objectContaining({
        code: 'UNKNOWN_LANGUAGE',
        message: 'src_text[1] looks like "es", which this model cannot read; give src_lang if that is wrong.',
      }),
    );
  });

  it('past the limits: 413 in characters and in sentences, never a shortened answer', () => {
    const limits = { maxChars: 100, maxSentences: 3 };
    expect(() => planTranslation({ src_lang: 'en', src_text: 'x'.repeat(101) }, { ...context, limits })).toThrow(
      expect.objectContaining({
        status: 413,
        message:
          'Request has 101 characters of text; at most 100 are translated in one request (MAX_REQUEST_CHARS): split it into several requests.',
      }),
    );
    expect(() =>
      planTranslation({ src_lang: 'en', src_text: 'One. Two. Three. Four.' }, { ...context, limits }),
    ).toThrow(
      expect.objectContaining({
        status: 413,
        message: expect.stringMatching(/^Request has more than 3 sentences; at most 3/),
      }),
    );
  });
});

describe('planTranslation: split "none"', () => {
  it('each text is one job, its surrounding whitespace kept', () => {
    const plan = planTranslation({ src_lang: 'en', src_text: ['  One. Two.\n', 'Three.'], split: 'none' }, context);
    expect(plan.bodies.map((b) => b.text)).toEqual(['One. Two.', 'Three.']);
    expect(plan.answer(translate(plan.bodies))).toEqual({ translated: ['  ONE. TWO.\n', 'THREE.'] });
  });
});
