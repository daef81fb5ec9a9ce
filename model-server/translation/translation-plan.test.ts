import { describe, expect, it } from 'vitest';
import { TranslationCache } from './translation-cache.js';
import {
  answerTranslation,
  planSentences,
  type PlanContext,
  type PlannedSentence,
  type SentenceAnswers,
} from './translation-plan.js';
import type { TranslationRequest } from '../../common/translation-contract.js';

/** Both halves in this thread, as the text pool runs them in its threads: the sentences, and the answer from theirs. */
function planTranslation(request: TranslationRequest, context: PlanContext) {
  const { sentences, docs } = planSentences(request, context);
  return {
    sentences,
    answer: (answers: SentenceAnswers) => answerTranslation(request, docs, answers, context.tgtLang),
  };
}

const context: PlanContext = {
  tgtLang: 'fr',
  readable: ['en', 'de', 'fr', 'ko', 'zh', 'ja'],
  limits: { maxChars: 10_000, maxSentences: 50 },
};
/** A stand-in translation: each sentence upper-cased, as the handler would answer it, by sentence id. */
const translate = (sentences: PlannedSentence[]) =>
  new Map(sentences.map(({ id, item }) => [id, { translated: item.text.toUpperCase() }]));
const items = (plan: { sentences: PlannedSentence[] }) => plan.sentences.map((s) => s.item);

describe('planTranslation: documents in, documents out', () => {
  it('one job per sentence; the answer keeps paragraphs, line breaks and spacing between sentences', () => {
    const text = '  Hello there. How are you?\n\nSecond paragraph!  It has two sentences.\n- a list item\n';
    const plan = planTranslation({ src_lang: 'en', src_text: text }, context);
    expect(items(plan).map((b) => b.text)).toEqual([
      'Hello there.',
      'How are you?',
      'Second paragraph!',
      'It has two sentences.',
      '- a list item',
    ]);
    expect(items(plan).every((b) => b.srcLang === 'en')).toBe(true);
    expect(plan.answer(translate(plan.sentences))).toEqual({
      translated: text.replace(/[a-z]/g, (c) => c.toUpperCase()),
    });
  });

  it('a paragraph is exactly its sentences translated and joined by the separators that stood between them', () => {
    const sentences = ['Mr. Smith paid 3.14 dollars.', 'He left at 10:30.', 'Then it rained!'];
    const plan = planTranslation({ src_lang: 'en', src_text: sentences.join(' ') }, context);
    expect(items(plan).map((b) => b.text)).toEqual(sentences);
    const answers = new Map(plan.sentences.map(({ id }, i) => [id, { translated: `<${i}>` }]));
    expect(plan.answer(answers)).toEqual({ translated: '<0> <1> <2>' });
  });

  it('alignment: every sentence aligned; with alignment_edges only those an edge cuts, the others linked whole', () => {
    const text = 'One two. Three four. Five six.';
    const every = planTranslation({ src_lang: 'en', src_text: text, alignment: true }, context);
    expect(items(every).map((item) => item.align === true)).toEqual([true, true, true]);
    // Offset 4 cuts "One two.", 8 and 20 fall between sentences.
    const request: TranslationRequest = {
      src_lang: 'en',
      src_text: text,
      alignment: true,
      alignment_edges: [4, 8, 20],
    };
    const plan = planTranslation(request, context);
    expect(items(plan).map((item) => item.align === true)).toEqual([true, false, false]);
    // The cut sentence's links as the worker answers them; the others one link each, whole sentence to whole sentence.
    const answers = new Map(
      plan.sentences.map(({ id, item }) => [
        id,
        { translated: item.text.toUpperCase(), ...(item.align ? { alignment: [0, 3, 0, 3, 4, 8, 4, 8] } : {}) },
      ]),
    );
    expect(plan.answer(answers)).toEqual({
      translated: text.toUpperCase(),
      alignment: [0, 3, 0, 3, 4, 8, 4, 8, 9, 20, 9, 20, 21, 30, 21, 30],
    });
  });

  it('HTML: an element wrapping a whole sentence lands on its translation with no alignment asked for it', () => {
    const src = '<p><b>First sentence.</b> Second <i>one</i> here.</p>';
    const plan = planTranslation({ src_lang: 'en', src_text: src, format: 'html' }, context);
    expect(items(plan).map((item) => [item.text, item.align === true])).toEqual([
      ['First sentence.', false],
      ['Second one here.', true],
    ]);
    // The aligned sentence's words each linked to themselves (a copy); the other has no links of its own.
    const wordLinks = (text: string) =>
      [...text.matchAll(/\S+/g)].flatMap((m) => [m.index, m.index + m[0].length, m.index, m.index + m[0].length]);
    const answers = new Map(
      plan.sentences.map(({ id, item }) => [
        id,
        { translated: item.text.toUpperCase(), ...(item.align ? { alignment: wordLinks(item.text) } : {}) },
      ]),
    );
    expect(plan.answer(answers)).toEqual({ translated: '<p><b>FIRST SENTENCE.</b> SECOND <i>ONE</i> HERE.</p>' });
  });

  it('an array keeps its shape; each text is its own document', () => {
    const plan = planTranslation({ src_lang: 'en', src_text: ['One. Two.', 'Three.'] }, context);
    expect(plan.sentences.map((s) => s.id)).toEqual(['0.0.0', '0.0.1', '1.0.0']);
    expect(plan.answer(translate(plan.sentences))).toEqual({ translated: ['ONE. TWO.', 'THREE.'] });
  });

  it('src_lang "auto" detects each text and reports it beside the translation', () => {
    const single = planTranslation(
      { src_lang: 'auto', src_text: 'Der Zug nach Berlin hatte heute Morgen fast eine Stunde Verspätung.' },
      context,
    );
    expect(single.sentences[0]!.item.srcLang).toBe('de');
    expect(single.answer(translate(single.sentences))).toMatchObject({ detected_src_lang: 'de' });
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
    expect(many.answer(translate(many.sentences))).toMatchObject({ detected_src_lang: ['en', 'ko'] });
  });

  it('detect "guess" takes the best guess among the languages the model reads, however short the text', () => {
    for (const [text, lang] of [
      ['Hello', 'en'],
      ['Hallo', 'de'],
      ['안녕', 'ko'],
    ] as const) {
      const plan = planTranslation({ src_lang: 'auto', src_text: text, detect: 'guess' }, context);
      expect(items(plan)).toEqual([{ srcLang: lang, text }]);
    }
    // Nothing to tell by: English, as LibreTranslate falls back; the default (strict) still refuses.
    for (const text of ['1234', '?!']) {
      expect(items(planTranslation({ src_lang: 'auto', src_text: text, detect: 'guess' }, context))).toEqual([
        { srcLang: 'en', text },
      ]);
      expect(() => planTranslation({ src_lang: 'auto', src_text: text }, context)).toThrow(/Could not detect/);
    }
    const noEnglish = { ...context, readable: ['ko', 'ja'] };
    expect(items(planTranslation({ src_lang: 'auto', src_text: '1234', detect: 'guess' }, noEnglish))).toEqual([
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
    expect(items(plan).map((b) => b.text)).toEqual(['One. Two.', 'Three.']);
    expect(plan.answer(translate(plan.sentences))).toEqual({ translated: ['  ONE. TWO.\n', 'THREE.'] });
  });
});

describe('the sentence plan: answers matched by id, never by position', () => {
  it('each sentence has an id unique within the request: text, part, sentence', () => {
    const plan = planTranslation(
      { src_lang: 'en', src_text: ['<p>One. Two.</p><p>Three.</p>', '<b>Four.</b>'], format: 'html' },
      context,
    );
    expect(plan.sentences.map((s) => [s.id, s.item.text])).toEqual([
      ['0.0.0', 'One.'],
      ['0.0.1', 'Two.'],
      ['0.1.0', 'Three.'],
      ['1.0.0', 'Four.'],
    ]);
    const answers = new Map([...translate(plan.sentences)].reverse());
    expect(plan.answer(answers)).toEqual({ translated: ['<p>ONE. TWO.</p><p>THREE.</p>', '<b>FOUR.</b>'] });
  });

  it('cache hits fold in by id beside the jobs that ran', () => {
    const cache = new TranslationCache(1 << 20);
    const identity = { modelDir: '/m', fingerprint: 'f', dtype: 'fp32', numBeams: 1, maxNewTokens: 9, minNewTokens: 0 };
    const seen = planTranslation({ src_lang: 'en', src_text: 'Two.' }, context);
    cache.lookup(identity, 'fr', seen.sentences, 'use').store(new Map([['0.0.0', { translated: 'cached two' }]]));
    const plan = planTranslation({ src_lang: 'en', src_text: 'One. Two. Three.' }, context);
    const lookup = cache.lookup(identity, 'fr', plan.sentences, 'use');
    expect(lookup.missing.map((s) => s.id)).toEqual(['0.0.0', '0.0.2']);
    const answers = new Map([...lookup.found, ...translate(lookup.missing)]);
    expect(plan.answer(answers)).toEqual({ translated: 'ONE. cached two THREE.' });
  });

  it('a sentence without an answer fails the request, never shifting the others into its place', () => {
    const plan = planTranslation({ src_lang: 'en', src_text: 'One. Two. Three.' }, context);
    const answers = translate(plan.sentences);
    answers.delete('0.0.1');
    expect(() => plan.answer(answers)).toThrow(expect.objectContaining({ code: 'INTERNAL' }));
  });

  it("alternatives: each text's k-th joins its sentences' k-th runners-up, found by id", () => {
    const plan = planTranslation({ src_lang: 'en', src_text: ['One. Two.', 'Three.'], alternatives: 2 }, context);
    expect(plan.sentences.every((s) => s.item.alternatives === 2)).toBe(true);
    const ranked = (text: string) => ({
      translated: text,
      score: -1,
      alternatives: [1, 2].map((k) => ({ text: `${text}${k}`, score: -1 - k })),
    });
    const answers = new Map([...plan.sentences].reverse().map(({ id, item }) => [id, ranked(item.text.toUpperCase())]));
    expect(plan.answer(answers)).toEqual({
      translated: ['ONE. TWO.', 'THREE.'],
      alternatives: [
        [
          { translated: 'ONE.1 TWO.1', score: -4 },
          { translated: 'ONE.2 TWO.2', score: -6 },
        ],
        [
          { translated: 'THREE.1', score: -2 },
          { translated: 'THREE.2', score: -3 },
        ],
      ],
    });
  });
});
