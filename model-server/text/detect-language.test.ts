import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DETECTABLE_LANGUAGES, detectLanguage, MAX_SAMPLE_CHARS } from './detect-language.js';
import set from './langid-set.json' with { type: 'json' };
import served from '../../setup_config.json' with { type: 'json' };

const SERVED = Object.keys(served.cuda_id);
const SET: Record<string, readonly string[]> = set;

// The script each language is written in; zh must have no kana, ja must have some.
const SCRIPT: Record<string, RegExp> = {
  ko: /^[\p{scx=Hangul}\p{Nd}\p{P}\p{Zs}]+$/u,
  zh: /^[\p{scx=Han}\p{P}]+$/u,
  ja: /^(?=.*[\p{scx=Hiragana}\p{scx=Katakana}])[\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}ー\p{P}]+$/u,
  hi: /^[\p{scx=Devanagari}\p{P}\p{Zs}]+$/u,
  ar: /^[\p{scx=Arabic}\p{P}\p{Zs}]+$/u,
  ru: /^[\p{scx=Cyrillic}\p{P}\p{Zs}]+$/u,
};
const LATIN = /^[\p{scx=Latin}\p{P}\p{Zs}\p{Nd}]+$/u;

describe('langid-set.json', () => {
  it('has 20+ distinct sentences of 40+ characters for each served language, in its script', () => {
    expect(Object.keys(SET).sort()).toEqual([...SERVED].sort());
    for (const lang of SERVED) {
      const sentences = SET[lang]!;
      expect(sentences.length, lang).toBeGreaterThanOrEqual(20);
      expect(new Set(sentences).size, lang).toBe(sentences.length);
      for (const sentence of sentences) {
        expect([...sentence].length, sentence).toBeGreaterThanOrEqual(40);
        expect(sentence, lang).toMatch(SCRIPT[lang] ?? LATIN);
      }
    }
  });
});

describe('detectLanguage', () => {
  it.each([
    ['the served languages', SERVED],
    ['every detectable language', DETECTABLE_LANGUAGES],
  ])('identifies at least 95%% of the labelled sentences among %s', (_, candidates) => {
    const perLanguage: Record<string, string> = {};
    let right = 0;
    let total = 0;
    let worst = 1;
    for (const lang of SERVED) {
      const sentences = SET[lang]!;
      const hits = sentences.filter((s) => detectLanguage(s, candidates).lang === lang).length;
      perLanguage[lang] = `${hits}/${sentences.length}`;
      worst = Math.min(worst, hits / sentences.length);
      right += hits;
      total += sentences.length;
    }
    console.log(`language identification among ${candidates.length}: ${right}/${total} right`, perLanguage);
    expect(right / total).toBeGreaterThanOrEqual(0.95);
    expect(worst).toBeGreaterThanOrEqual(0.85);
  });

  it.each(['', 'OK', 'Hello', 'Bom dia', '東京', '12345 678,90', 'https://example.com/path/to/page', '!!! ??? ...'])(
    'is unsure of short or letterless text: %j',
    (text) => {
      expect(detectLanguage(text, SERVED).lang).toBeNull();
    },
  );

  it('names an unserved language among every detectable one, and is unsure of it among the served ones', () => {
    expect(DETECTABLE_LANGUAGES).toEqual(expect.arrayContaining([...SERVED, 'nl', 'sv', 'pl', 'tr']));
    const dutch = 'Dit is een Nederlandse zin over het weer van vandaag.';
    expect(detectLanguage(dutch, DETECTABLE_LANGUAGES).lang).toBe('nl');
    expect(detectLanguage(dutch, SERVED).lang).toBeNull();
  });

  it('knows short phrases written in a script only one served language uses', () => {
    expect(detectLanguage('안녕하세요, 반갑습니다', SERVED).lang).toBe('ko');
    expect(detectLanguage('東京に行きます', SERVED).lang).toBe('ja');
    expect(detectLanguage('Привет, как дела?', SERVED).lang).toBe('ru');
  });

  it('never answers outside the candidates, whatever the text', () => {
    const sentences = SERVED.flatMap((lang) => SET[lang]!);
    fc.assert(
      fc.property(fc.constantFrom(...sentences), fc.subarray(SERVED), (sentence, candidates) => {
        const { lang, confidence } = detectLanguage(sentence, candidates);
        if (lang !== null) expect(candidates).toContain(lang);
        expect(confidence).toBeGreaterThanOrEqual(0);
        expect(confidence).toBeLessThanOrEqual(1);
      }),
      { numRuns: 300 },
    );
  });

  it('ignores candidates it cannot detect, and is unsure with none left', () => {
    const german = SET.de![0]!;
    expect(detectLanguage(german, ['xx', 'de', 'en']).lang).toBe('de');
    expect(detectLanguage(german, ['xx'])).toEqual({ lang: null, confidence: 0 });
    expect(detectLanguage(german, [])).toEqual({ lang: null, confidence: 0 });
  });

  it('is not misled by URLs and e-mail addresses', () => {
    const text = `${SET.fr![3]} https://www.example.com/the/english/words/here mail.me@example.com`;
    expect(detectLanguage(text, SERVED).lang).toBe('fr');
  });

  it('handles text full of "@" and "." in linear time', () => {
    const started = performance.now();
    expect(detectLanguage('a@b.'.repeat(10_000), SERVED).lang).toBeNull();
    expect(detectLanguage('@'.repeat(MAX_SAMPLE_CHARS), SERVED).lang).toBeNull(); // 3.6 s with one regex
    expect(detectLanguage(`${SET.en![0]} ${'@'.repeat(1500)}`, SERVED).lang).toBe('en');
    expect(performance.now() - started).toBeLessThan(1_000);
  });

  it(`examines only the first ${MAX_SAMPLE_CHARS} characters of a long text`, () => {
    const english = SET.en!.join(' ');
    const german = SET.de!.join(' ');
    let text = '';
    while (text.length < MAX_SAMPLE_CHARS) text += english + ' ';
    expect(detectLanguage(text + german.repeat(20), SERVED).lang).toBe('en');
  });
});
