import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { joinSegments, joinTranslations, segmentDocument, TooManySentencesError, type Segments } from './segment.js';
import served from '../../setup_config.json' with { type: 'json' };

const SERVED = Object.keys(served.cuda_id);

const pieces = (text: string, lang: string): readonly string[] => segmentDocument(text, lang).pieces;

describe('segmentDocument: terminal punctuation of the served scripts', () => {
  it.each([
    ['zh', '我今天很高兴。你呢？太好了！我们走吧。', ['我今天很高兴。', '你呢？', '太好了！', '我们走吧。']],
    ['ja', '今日は晴れです。明日は雨でしょうか？楽しみ！', ['今日は晴れです。', '明日は雨でしょうか？', '楽しみ！']],
    ['hi', 'मैं घर जा रहा हूँ। तुम कहाँ हो? यह अच्छा है।', ['मैं घर जा रहा हूँ।', 'तुम कहाँ हो?', 'यह अच्छा है।']],
    ['ar', 'كيف حالك؟ أنا بخير. شكرا لك!', ['كيف حالك؟', 'أنا بخير.', 'شكرا لك!']],
    ['ko', '오늘은 날씨가 좋습니다. 어디 가세요? 좋아요!', ['오늘은 날씨가 좋습니다.', '어디 가세요?', '좋아요!']],
    ['ru', 'Привет. Как дела? Отлично!', ['Привет.', 'Как дела?', 'Отлично!']],
    ['es', '¿Cómo estás? Bien, gracias. ¡Qué bien!', ['¿Cómo estás?', 'Bien, gracias.', '¡Qué bien!']],
    ['fr', "C'est bien ! Vraiment ? Oui.", ["C'est bien !", 'Vraiment ?', 'Oui.']],
    ['vi', 'Tôi đi học. Bạn có khỏe không? Cảm ơn!', ['Tôi đi học.', 'Bạn có khỏe không?', 'Cảm ơn!']],
    [
      'en',
      'He said "Stop." Then he left. Wait... What?! Yes',
      ['He said "Stop."', 'Then he left.', 'Wait...', 'What?!', 'Yes'],
    ],
  ])('%s', (lang, text, expected) => {
    expect(pieces(text, lang)).toEqual(expected);
  });
});

describe('segmentDocument: abbreviations, initials and numbers do not end a sentence', () => {
  it("Node's Intl.Segmenter applies no break suppressions, which is why abbreviations.ts exists", () => {
    const raw = [...new Intl.Segmenter('en', { granularity: 'sentence' }).segment('Mr. Smith is here.')];
    expect(raw.map((s) => s.segment)).toEqual(['Mr. ', 'Smith is here.']);
  });

  /** Each case: a language and the sentences expected; the text is those sentences joined by one space. */
  const cases: [string, string[]][] = [
    // Two sentences.
    ['en', ['Mr. Smith met Dr. Jones and Prof. Lee.', 'They talked.']],
    ['en', ['Take fruit, e.g. Apples or pears.', 'Fine.']],
    ['en', ['The U.S. Army and the U.K. Navy met.', 'Done.']],
    ['en', ['J. K. Rowling wrote it.', 'See No. 5 on the list.']],
    ['en', ['It cost $3.14 at 10:30 today.', 'Version 2.0.1 is out.']],
    ['en', ['(Mr. Brown) arrived.', 'Good.']],
    ['de', ['Er zahlte 1.000,50 Euro.', 'Am 3. Oktober ist Feiertag.']],
    ['de', ['Frau Dr. Müller kommt um 10:30 Uhr.', 'Gut.']],
    ['fr', ['M. Dupont et Mme Martin, p. ex. Paul.', 'Oui.']],
    ['es', ['El Sr. García y la Sra. López llegaron.', 'Bien.']],
    ['it', ['Il Sig. Rossi e la Dott.ssa Bianchi sono qui.', 'Bene.']],
    ['pt', ['O Sr. Silva e a Dra. Souza chegaram.', 'Tudo bem.']],
    ['id', ['Saya bertemu Dr. Budi dan Bpk. Joko.', 'Baik.']],
    ['vi', ['Tôi sống ở TP. Hồ Chí Minh.', 'Còn bạn?']],
    ['hi', ['डॉ. शर्मा घर पर हैं।', 'ठीक है।']],
    ['ar', ['وصل د. أحمد إلى المستشفى.', 'شكرا.']],
    ['ko', ['Mr. Kim은 회의에 갔습니다.', '좋아요.']],
    // Three sentences.
    ['de', ['Das ist z. B. Obst.', 'Es gibt d. h. Äpfel.', 'Gut.']],
    ['de', ['Im 19. Jahrhundert war es so.', 'Die Antwort ist 42.', 'Danke.']],
    ['ru', ['Это т. е. Тест.', 'А. С. Пушкин дома.', 'Цена 3,14 руб.']],
  ];
  it.each(cases.map(([lang, expected]) => [lang, expected.join(' '), expected] as const))(
    '%s: %s',
    (lang, text, expected) => {
      expect(pieces(text, lang)).toEqual(expected);
    },
  );

  it('keeps a zh/ja sentence whole when it goes on right after a closing quote', () => {
    expect(pieces('「こんにちは。」と彼は言った。それから帰った。', 'ja')).toEqual([
      '「こんにちは。」と彼は言った。',
      'それから帰った。',
    ]);
    expect(pieces('彼は「行くよ！」と叫んだ。', 'ja')).toEqual(['彼は「行くよ！」と叫んだ。']);
    expect(pieces('“你好。”他说。我们走吧。', 'zh')).toEqual(['“你好。”他说。', '我们走吧。']);
    expect(pieces('（笑）。次へ。', 'ja')).toEqual(['（笑）。', '次へ。']);
    expect(pieces('He said "Stop." Then he left.', 'en')).toEqual(['He said "Stop."', 'Then he left.']);
  });

  it('breaks after an abbreviation that often ends a sentence only when a capital follows, as ICU does', () => {
    expect(pieces('Apples, pears, etc. are fruit. We bought apples, pears, etc. The shop closed.', 'en')).toEqual([
      'Apples, pears, etc. are fruit.',
      'We bought apples, pears, etc.',
      'The shop closed.',
    ]);
    expect(pieces('Wir kauften Äpfel usw. Dann gingen wir.', 'de')).toEqual([
      'Wir kauften Äpfel usw.',
      'Dann gingen wir.',
    ]);
    expect(pieces('Мы купили хлеб, молоко и т. д. Потом ушли.', 'ru')).toEqual([
      'Мы купили хлеб, молоко и т. д.',
      'Потом ушли.',
    ]);
  });
});

describe('segmentDocument: lines, paragraphs and whitespace', () => {
  it('keeps every line break and the whitespace around sentences as separators', () => {
    const text = '  First line\nSecond. Third.  \r\n\r\n\tNew paragraph.\n';
    expect(segmentDocument(text, 'en')).toEqual({
      pieces: ['First line', 'Second.', 'Third.', 'New paragraph.'],
      separators: ['  ', '\n', ' ', '  \r\n\r\n\t', '\n'],
    });
  });

  it('breaks at every form of line break, punctuation or not', () => {
    expect(pieces('a\rb\u0085c\u2028d\u2029e\nf', 'en')).toEqual(['a', 'b', 'c', 'd', 'e', 'f']);
  });

  it('gives whitespace-only and empty text no sentence', () => {
    expect(segmentDocument('', 'en')).toEqual({ pieces: [], separators: [''] });
    expect(segmentDocument(' \n\u00a0\u3000\n ', 'zh')).toEqual({ pieces: [], separators: [' \n\u00a0\u3000\n '] });
  });

  it.each(['not a language tag', 'constructor', '__proto__', 'xx'])(
    'accepts a language code it does not know: %j',
    (lang) => {
      expect(pieces('One. Two. Mr. Smith came.', lang)).toEqual(['One.', 'Two.', 'Mr. Smith came.']);
    },
  );

  it('handles long whitespace runs inside a line in linear time', () => {
    const text = `a${' '.repeat(200_000)}b. Mr.${' '.repeat(200_000)}Smith.`;
    const started = performance.now();
    expect(segmentDocument(text, 'en').pieces).toEqual([
      'a' + ' '.repeat(200_000) + 'b.',
      'Mr.' + ' '.repeat(200_000) + 'Smith.',
    ]);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  const unit = fc.constantFrom(
    ...['a', 'B', 'z', 'é', '3', '.', '.', '?', '!', ',', ':', ' ', ' ', '  ', '\n', '\r\n', '\n\n', '\t', '\u00a0'],
    ...[
      '\u3000',
      '\u0085',
      '\u2029',
      '。',
      '？',
      '你',
      '好',
      'の',
      '한',
      'и',
      'प',
      '।',
      'ب',
      '؟',
      'Mr.',
      'z. B.',
      '😀',
    ],
  );

  it('is lossless, with trimmed pieces and whitespace separators, for any text in any served language', () => {
    fc.assert(
      fc.property(
        fc.array(unit, { maxLength: 60 }).map((units) => units.join('')),
        fc.constantFrom(...SERVED),
        (text, lang) => {
          const segments = segmentDocument(text, lang);
          expect(joinSegments(segments)).toBe(text);
          expect(segments.separators).toHaveLength(segments.pieces.length + 1);
          for (const piece of segments.pieces) {
            expect(piece).toMatch(/^[^\s\u0085](?:[^\n\r\u0085\u2028\u2029]*[^\s\u0085])?$/u);
          }
          for (const separator of segments.separators) expect(separator).toMatch(/^[\s\u0085]*$/u);
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('joinTranslations', () => {
  const doc = (text: string, lang: string): Segments => segmentDocument(text, lang);

  it('puts translations back between the original separators', () => {
    const source = doc('  Hallo Welt. Wie geht es?\n\nGut.\n', 'de');
    expect(joinTranslations(source, ['Hello world.', 'How are you?', 'Fine.'], 'en')).toBe(
      '  Hello world. How are you?\n\nFine.\n',
    );
  });

  it('trims the translations, since the separators hold the whitespace', () => {
    expect(joinTranslations(doc('One. Two.', 'en'), [' Un. ', '\nDeux.'], 'fr')).toBe('Un. Deux.');
  });

  it('drops a space after full-width terminal punctuation in a zh or ja target', () => {
    const source = doc('Hello. How are you?\nFine.', 'en');
    expect(joinTranslations(source, ['你好。', '你好吗？', '很好。'], 'zh')).toBe('你好。你好吗？\n很好。');
    expect(joinTranslations(source, ['こんにちは。', 'お元気ですか？', '元気です。'], 'ja')).toBe(
      'こんにちは。お元気ですか？\n元気です。',
    );
    expect(joinTranslations(doc('He said hi. Bye.', 'en'), ['他说“你好。”', '再见。'], 'zh')).toBe(
      '他说“你好。”再见。',
    );
  });

  it('keeps the space in a zh target when the translation ends in a Latin word or ASCII punctuation', () => {
    const source = doc('Use Linux. It works. Yes.', 'en');
    expect(joinTranslations(source, ['使用 Linux', '它可以用.', '是的。'], 'zh')).toBe('使用 Linux 它可以用. 是的。');
  });

  it('inserts a space between sentences that had none in the zh or ja source, for a spaced target', () => {
    const source = doc('你好。你好吗？\n很好。', 'zh');
    expect(source.separators).toEqual(['', '', '\n', '']);
    expect(joinTranslations(source, ['Hello.', 'How are you?', 'Fine.'], 'en')).toBe('Hello. How are you?\nFine.');
    expect(joinTranslations(source, ['你好。', '你好吗？', '很好。'], 'ja')).toBe('你好。你好吗？\n很好。');
  });

  it('returns the separators alone for a document without sentences', () => {
    expect(joinTranslations(doc('\n \n', 'en'), [], 'zh')).toBe('\n \n');
  });

  it('restores the source from its own pieces, and never drops a line break, for any text', () => {
    const unit = fc.constantFrom(
      ...['Hi.', 'Yes?', 'a', '你好。', '好！', '，', ' ', '  ', '\n', '\r\n', '\u3000', '\t'],
    );
    fc.assert(
      fc.property(
        fc.array(unit, { maxLength: 40 }).map((units) => units.join('')),
        (text) => {
          const segments = segmentDocument(text, 'zh');
          const unchanged = segments.separators.slice(1, -1).every((s) => s !== '');
          if (unchanged) expect(joinTranslations(segments, segments.pieces, 'de')).toBe(text);
          const lineBreaks = (t: string): number => t.match(/\r\n|\n/g)?.length ?? 0;
          expect(lineBreaks(joinTranslations(segments, segments.pieces, 'ja'))).toBe(lineBreaks(text));
        },
      ),
      { numRuns: 300 },
    );
  });

  it('rejects a translation count that differs from the piece count', () => {
    expect(() => joinTranslations(doc('One. Two.', 'en'), ['Un.'], 'fr')).toThrow(
      new RangeError('joinTranslations: 1 translations for 2 pieces'),
    );
  });
});

describe('segmentDocument with a sentence limit', () => {
  it('stops at the first sentence past the limit, before reading the rest', () => {
    const text = 'One.\nTwo.\nThree.\n' + 'x\n'.repeat(50_000);
    expect(() => segmentDocument(text, 'en', 3)).toThrow(TooManySentencesError);
    expect(() => segmentDocument(text, 'en', 3)).toThrow(expect.objectContaining({ maxSentences: 3 }));
    expect(segmentDocument('One.\nTwo.\nThree.', 'en', 3).pieces).toHaveLength(3);
  });
});

describe('bidirectional controls around sentences', () => {
  const BIDI = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/u;
  const SPACE = /[\s\u0085]/u;
  /**
   * Each run of bidi controls with the nearest characters around it that are neither whitespace nor bidi
   * controls: what "stays exactly where it was" means when only whitespace may change around translations.
   */
  const anchors = (text: string): [string, string, string][] => {
    const out: [string, string, string][] = [];
    const chars = [...text];
    for (let i = 0; i < chars.length;) {
      if (!BIDI.test(chars[i]!)) {
        i++;
        continue;
      }
      let j = i;
      while (j < chars.length && (BIDI.test(chars[j]!) || SPACE.test(chars[j]!))) j++;
      let before = i - 1;
      while (before >= 0 && SPACE.test(chars[before]!)) before--;
      const run = chars
        .slice(i, j)
        .filter((c) => BIDI.test(c))
        .join('');
      out.push([chars[before] ?? '^', run, chars[j] ?? '$']);
      i = j;
    }
    return out;
  };

  it('the issue example: the marks stay where they were, and no space is added', () => {
    const text = '\u200Fمرحبا. \u200EHello. \u200Fمرحبا.';
    const segments = segmentDocument(text, 'ar');
    expect(segments.pieces).toEqual(['مرحبا.', 'Hello.', 'مرحبا.']);
    expect(joinTranslations(segments, segments.pieces, 'en')).toBe(text);
  });

  it('property: bidi controls around separators stay exactly where they were after rejoin', () => {
    const control = fc.constantFrom(...'\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069');
    const sentence = fc.constantFrom('Hello there.', 'How are you?', 'مرحبا بك.', 'שלום לך!', '你好。', 'Fine');
    const separator = fc.constantFrom(' ', '  ', '\n', '\n\n', '\t', '');
    const around = fc.array(control, { maxLength: 3 }).map((c) => c.join(''));
    const text = fc
      .array(fc.tuple(around, sentence, around, separator), { minLength: 1, maxLength: 8 })
      .map((parts) => parts.map(([a, s, b, sep]) => `${a}${s}${b}${sep}`).join(''));
    fc.assert(
      fc.property(text, fc.constantFrom('en', 'ar', 'zh', 'ja'), (input, tgt) => {
        const segments = segmentDocument(input, 'en');
        expect(joinSegments(segments)).toBe(input);
        for (const piece of segments.pieces) {
          expect(BIDI.test(piece[0]!)).toBe(false);
          expect(BIDI.test(piece.at(-1)!)).toBe(false);
        }
        // Translations that are the pieces themselves: only separators' whitespace may differ.
        const joined = joinTranslations(segments, segments.pieces, tgt);
        expect(anchors(joined)).toEqual(anchors(input));
        expect(joined.replace(/[\s\u0085]/gu, '')).toBe(input.replace(/[\s\u0085]/gu, ''));
      }),
      { numRuns: 500 },
    );
  });
});
