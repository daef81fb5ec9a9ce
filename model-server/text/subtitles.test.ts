import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { distribute, planSubtitles } from './subtitles.js';

const TIMING = /-->/;

describe('SRT', () => {
  const srt =
    '1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hello there, my</i>\r\n\r\n' +
    '2\r\n00:00:03,000 --> 00:00:04,000 X1:10 X2:20\r\ngood friend. How are\r\nyou today?\r\n\r\n' +
    '3\r\n00:00:05,000 --> 00:00:06,000\r\n♪ ♪\r\n\r\n' +
    '4\r\n00:00:07,000 --> 00:00:08,000\r\nBye.\r\n';

  it('a sentence over several cues is one text; timing, numbering, tags and CRLF stay', () => {
    const plan = planSubtitles(srt, 'srt');
    expect(plan.texts).toEqual(['Hello there, my good friend. How are you today?', 'Bye.']);
    const out = plan.render(['Hallo da, mein guter Freund. Wie geht es dir heute?', 'Tschüss.']);
    expect(out).toBe(
      '1\r\n00:00:01,000 --> 00:00:02,500\r\n<i>Hallo da, mein</i>\r\n\r\n' +
        '2\r\n00:00:03,000 --> 00:00:04,000 X1:10 X2:20\r\nguter Freund. Wie geht es\r\ndir heute?\r\n\r\n' +
        '3\r\n00:00:05,000 --> 00:00:06,000\r\n♪ ♪\r\n\r\n' +
        '4\r\n00:00:07,000 --> 00:00:08,000\r\nTschüss.\r\n',
    );
  });

  it('tags that wrap a line stay; a tag marking only some of its words goes with its partner, so tags stay balanced', () => {
    const cue = (n: number, text: string) => `${n}\n00:00:0${n},000 --> 00:00:0${n},500\n${text}\n`;
    const file = [
      cue(1, 'He said <i>no</i>.'),
      cue(2, '<i>Hello</i> there.'),
      cue(3, '<i><b>Hello</b> there.</i>'),
      cue(4, '<i>An italic run\nover <b>two</b></i>'),
      cue(5, '<font color="#ff0">Done.</font>'),
    ].join('\n');
    const plan = planSubtitles(file, 'srt');
    expect(plan.texts).toEqual(['He said no.', 'Hello there.', 'Hello there.', 'An italic run over two Done.']);
    const out = plan.render(['Er sagte nein.', 'Hallo da.', 'Hallo da.', 'Ein kursiver Lauf über zwei Fertig.']);
    expect(out).toBe(
      [
        cue(1, 'Er sagte nein.'),
        cue(2, 'Hallo da.'),
        cue(3, '<i>Hallo da.</i>'),
        cue(4, '<i>Ein kursiver Lauf\nüber zwei</i>'),
        cue(5, '<font color="#ff0">Fertig.</font>'),
      ].join('\n'),
    );
  });

  // Their cost: linear-time.test.ts.
  it('keeps the tags of a line of a thousand unmatched ones where they are', () => {
    const line = '<a>'.repeat(1_000) + 'word' + '</b>'.repeat(1_000);
    const plan = planSubtitles(`1\n00:00:01,000 --> 00:00:02,000\n${line}\n`, 'srt');
    expect(plan.texts).toEqual(['word']);
    expect(plan.render(['Wort'])).toBe(`1\n00:00:01,000 --> 00:00:02,000\n${line.replace('word', 'Wort')}\n`);
  });

  it('a `<` that no `>` follows is text', () => {
    const plan = planSubtitles('1\n00:00:01,000 --> 00:00:02,000\n<i>one </i>< two <<\n', 'srt');
    expect(plan.texts).toEqual(['one < two <<']);
    expect(plan.render(['eins < zwei <<'])).toBe('1\n00:00:01,000 --> 00:00:02,000\neins < zwei <<\n');
  });

  it('a translation with fewer words than a cue has lines keeps the cue, with fewer lines', () => {
    const plan = planSubtitles('1\n00:00:01,000 --> 00:00:02,000\nTwo\nlines\n', 'srt');
    expect(plan.render(['Eins'])).toBe('1\n00:00:01,000 --> 00:00:02,000\nEins\n');
  });

  it('a block without a timing line is a 400 naming the cue and line', () => {
    let error: unknown;
    try {
      planSubtitles('1\n00:00:01,000 --> 00:00:02,000\nFine\n\n2\n00:00:03 --> 00:00:04\nBad timing\n', 'srt');
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(ServeError);
    expect((error as ServeError).code).toBe('BAD_REQUEST');
    expect((error as ServeError).message).toMatch(/cue 2 \(line 5\) has no timing line/);
  });
});

describe('WebVTT', () => {
  const vtt =
    'WEBVTT - a title\n\nNOTE a note\nover two lines\n\nSTYLE\n::cue { color: red }\n\n' +
    'intro\n00:01.000 --> 00:02.000 align:start position:10%\n<v Bob>I think that</v>\n\n' +
    '00:02.500 --> 00:03.000\nit works.\n';

  it('header, NOTE and STYLE blocks, identifiers and cue settings stay; voice tags stay around the words', () => {
    const plan = planSubtitles(vtt, 'vtt');
    expect(plan.texts).toEqual(['I think that it works.']);
    const out = plan.render(['Ich glaube, dass es geht.']);
    expect(out).toBe(vtt.replace('I think that', 'Ich glaube, dass').replace('it works.', 'es geht.'));
  });

  it('a file without the WEBVTT line, or a cue without timing, is a 400', () => {
    expect(() => planSubtitles('00:01.000 --> 00:02.000\nHi\n', 'vtt')).toThrow(/must start with a "WEBVTT" line/);
    expect(() => planSubtitles('WEBVTT\n\nid\nno timing\n', 'vtt')).toThrow(/cue 1 \(line 3\) has no timing line/);
  });

  it('property: any translation keeps every timing line, the cue count and a non-empty text per cue', () => {
    const cue = fc.tuple(
      fc.array(fc.constantFrom('Hello', 'world.', 'how', 'are', 'you?', 'fine,', 'thanks'), {
        minLength: 1,
        maxLength: 6,
      }),
      fc.integer({ min: 1, max: 3 }),
    );
    fc.assert(
      fc.property(
        fc.array(cue, { minLength: 1, maxLength: 12 }),
        fc.array(fc.string(), { maxLength: 30 }),
        (cues, noise) => {
          let file = 'WEBVTT\n';
          cues.forEach(([words, lines], i) => {
            file += `\n${i}\n00:00:0${i % 10}.000 --> 00:00:0${i % 10}.500\n`;
            const perLine = distribute(words.join(' '), Array(Math.min(lines, words.length)).fill(1));
            file += perLine.join('\n') + '\n';
          });
          const plan = planSubtitles(file, 'vtt');
          const translations = plan.texts.map(
            (_, i) =>
              noise
                .slice(0, i + 3)
                .join(' ')
                .replace(/\s+/g, ' ')
                .trim() || 'x',
          );
          const out = plan.render(translations);
          const timings = (s: string) => s.split('\n').filter((line) => TIMING.test(line));
          expect(timings(out)).toEqual(timings(file));
          expect(out.split('\n\n').length).toBe(file.split('\n\n').length);
          // Every cue keeps its identifier, its timing and at least one line of text.
          for (const block of out.split('\n\n').slice(1)) {
            const [, , ...text] = block.replace(/\n$/, '').split('\n');
            expect(text.length).toBeGreaterThan(0);
            for (const line of text) expect(line.trim()).not.toBe('');
          }
        },
      ),
      { numRuns: 200 },
    );
  });
});

describe('distribute', () => {
  it('cuts at word boundaries in proportion to the weights, else between characters', () => {
    expect(distribute('one two three four', [1, 1])).toEqual(['one two', 'three four']);
    expect(distribute('one two three four', [3, 1])).toEqual(['one two three', 'four']);
    expect(distribute('你好世界再见', [1, 1, 1])).toEqual(['你好', '世界', '再见']);
  });
});
