/**
 * Hostile text costs linear time in every text function a request reaches: each property builds inputs from a short
 * adversarial unit repeated (the runs that make patterns backtrack and scans restart) and times the function at n and
 * 4n (harness/linear-time.ts): a quadratic cost shows 16× and more at these sizes, against the 5× allowed; the known
 * worst cases come first. docs/reliability.md's hostile-input table lists them.
 */
import fc from 'fast-check';
import { describe, it } from 'vitest';
import { expectLinearTime, repeatTo } from '../../harness/linear-time.js';
import served from '../../setup_config.json' with { type: 'json' };
import { detectLanguage } from './detect-language.js';
import { glossaryEntries, termsFor } from './glossary.js';
import { planMarkup, type MarkupFormat } from './markup/markup.js';
import { segmentDocument } from './segment.js';
import { fitSegments } from './split-long.js';
import { planSubtitles, type SubtitleFormat } from './subtitles.js';

const SERVED = Object.keys(served.cuda_id);

/** A unit of one to `maxLength` fragments. */
const unitOf = (fragments: readonly string[], maxLength = 4) =>
  fc.array(fc.constantFrom(...fragments), { minLength: 1, maxLength }).map((parts) => parts.join(''));

/** A few generated units besides the known worst cases; no shrinking, which would time each smaller case again. */
const assertLinear = <T extends unknown[]>(property: fc.IProperty<T>, examples: T[]) =>
  fc.assert(property, { numRuns: 6, seed: 40, examples, endOnFailure: true });

describe('linear time on hostile input', () => {
  it('markup: HTML and XML', () => {
    const fragments = [
      '<!---->',
      '<!--',
      '-->',
      '<',
      '>',
      '</',
      '<p>',
      '<b>',
      '</b>',
      '&amp;',
      '&',
      'word ',
      ' ',
      '\n',
    ];
    const tables = ['<table>', 'Stray', '<tr><td>cell</td></tr>', '</x>', '<![CDATA[', ']]>', '<?x?>', '<!DOCTYPE x>'];
    assertLinear(
      fc.property(unitOf([...fragments, ...tables]), fc.constantFrom<MarkupFormat>('html', 'xml'), (unit, format) => {
        const input = (n: number) => (format === 'xml' ? repeatTo(unit, n, '<doc>', '</doc>') : repeatTo(unit, n));
        expectLinearTime(
          input,
          (source) => {
            try {
              const plan = planMarkup(source, format);
              plan.render(plan.texts);
            } catch {
              // Not well-formed XML: refused, and the time to find out is what counts.
            }
          },
          1_000,
        );
      }),
      // 32 comments before a fragment took 34 s: a pattern backtracked exponentially over them.
      [
        ['<!---->', 'html'],
        ['<table>Stray<tr><td>cell</td></tr>More', 'html'],
        // One run of many inline elements: a sentence whose tags are all placed in one unit.
        ['word <b>word</b> <i><a href="#">x</a> y</i> ', 'html'],
        // The same in XML, where outline detection tells each element's kind from its content.
        ['word <b>word</b> <i><a href="#">x</a> y</i> ', 'xml'],
      ],
    );
  });

  it('subtitles: SRT and WebVTT cue lines of tags', () => {
    const fragments = ['<', '>', '</', '<i>', '</i>', '<v Bob>', '</v>', '<c.yellow>', '</b>', 'word', ' ', '.', '\n'];
    assertLinear(
      fc.property(unitOf(fragments), fc.constantFrom<SubtitleFormat>('srt', 'vtt'), (unit, format) => {
        const head = format === 'vtt' ? 'WEBVTT\n\n00:01.000 --> 00:02.000\n' : '1\n00:00:01,000 --> 00:00:02,000\n';
        expectLinearTime(
          (n) => repeatTo(unit, n, `${head}Hello `, '\n'),
          (source) => {
            const plan = planSubtitles(source, format);
            plan.render(plan.texts);
          },
          2_000,
        );
      }),
      // `<` ×6,000 in one cue line took 50 s (cubic), 100,000 unmatched tags 23 s.
      [
        ['<', 'srt'],
        ['<a></b>', 'srt'],
      ],
    );
  });

  it('glossary: entries and the terms of a sentence', () => {
    const fragments = ['a', 'a', 'ab', ' ', '-', '东', 'A', '_', '.'];
    assertLinear(
      fc.property(unitOf(fragments, 3), (unit) => {
        // Terms of about 100 characters, one for every 100 of the text, that share the text's runs and each other's
        // prefixes and suffixes, each ending in its own character or number.
        const input = (n: number) => {
          const pairs = Array.from({ length: n / 100 }, (_, i): [string, string] => [
            repeatTo(unit, 95).slice(0, 95) + (i % 2 === 0 ? String.fromCharCode(0x4e00 + i) : String(i)),
            `t${i}`,
          ]);
          return { pairs, text: repeatTo(unit, n) };
        };
        expectLinearTime(input, ({ pairs, text }) => termsFor(text, glossaryEntries(pairs)), 2_000);
      }),
      // 3,000 terms of `a` ×99 and a CJK character over `a` ×10,000 took 8.7 s.
      [['a']],
    );
  });

  it('segmentation: sentences, then pieces that fit', () => {
    const fragments = [
      'Mr. ',
      'a',
      'B',
      ' ',
      '  ',
      '.',
      '. ',
      '!',
      '\n',
      '\r\n',
      '\u0085',
      '。',
      '「',
      '」',
      'z. B. ',
      '3.14',
    ];
    assertLinear(
      fc.property(unitOf(fragments), fc.constantFrom('en', 'de', 'zh', 'ja'), (unit, lang) => {
        expectLinearTime(
          (n) => repeatTo(unit, n),
          (text) => fitSegments(segmentDocument(text, lang), (p) => p.length, 500),
          2_000,
        );
      }),
      // A 50,000-space run took 4.5 s through a `\s*$` pattern; a 400,000-character line 156 s through ICU whole.
      [
        [' ', 'en'],
        ['This is one sentence, and it goes on. ', 'en'],
      ],
    );
  });

  it('language detection', () => {
    const fragments = ['@', 'a@b.', 'http://', 'www.', ' ', 'hello ', '东', '<', '"', 'x'];
    assertLinear(
      fc.property(unitOf(fragments), (unit) => {
        // Only the first 2,000 characters are read: sizes below that.
        expectLinearTime(
          (n) => repeatTo(unit, n),
          (text) => {
            detectLanguage(text, SERVED, { guess: true });
          },
          400,
        );
      }),
      // One pattern over "@" ×2,000 took 3.6 s.
      [['@']],
    );
  });
});
