import { describe, expect, it } from 'vitest';
import { cutDocument, type DocumentFormat } from './document-pieces.js';

/** An SRT file of `n` cues, each `Line i.` */
const srt = (n: number) =>
  Array.from({ length: n }, (_, i) => `${i + 1}\n00:00:0${i % 10},000 --> 00:00:0${i % 10},500\nLine ${i + 1}.\n`).join(
    '\n',
  );

/** Cut `text` until no piece is longer than `max` (or cannot be cut), as the document jobs do: the pieces in order. */
function cutAll(text: string, format: DocumentFormat, max: number): string[] {
  if (text.length <= max) return [text];
  const cut = cutDocument(text, format, 'en');
  if (cut === null) return [text];
  return [...cutAll(cut.pieces[0], format, max), ...cutAll(cut.pieces[1], format, max)];
}

describe('cutDocument', () => {
  it('cuts plain text at the paragraph break nearest the middle, the pieces joining back to it', () => {
    const text = 'One. Two.\n\nThree four five six.\n\nSeven.\n';
    const cut = cutDocument(text, 'text', 'en')!;
    expect(cut.pieces).toEqual(['One. Two.\n\n', 'Three four five six.\n\nSeven.\n']);
    expect(cut.join(cut.pieces)).toBe(text);
  });

  it('cuts plain text without paragraphs at a line break, else after a sentence, else not at all', () => {
    expect(cutDocument('first line\nsecond line', 'text', 'en')!.pieces).toEqual(['first line\n', 'second line']);
    expect(cutDocument('One sentence. Another one.', 'text', 'en')!.pieces).toEqual(['One sentence. ', 'Another one.']);
    expect(cutDocument('one long run of words with no end', 'text', 'en')).toBeNull();
  });

  it('cuts SRT only between cues: every piece a whole subtitle file', () => {
    const text = srt(20);
    const pieces = cutAll(text, 'srt', 120);
    expect(pieces.length).toBeGreaterThan(4);
    expect(pieces.join('')).toBe(text);
    for (const piece of pieces) expect(piece).toMatch(/^\d+\n\d\d:\d\d:\d\d,\d{3} --> /);
  });

  it('lends WebVTT’s header to the second piece and takes it off the translation', () => {
    const text = `WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n\n00:03.000 --> 00:04.000\nBye.\n`;
    const cut = cutDocument(text, 'vtt', 'en')!;
    expect(cut.pieces).toEqual([
      'WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n\n',
      'WEBVTT\n\n00:03.000 --> 00:04.000\nBye.\n',
    ]);
    expect(cut.join(cut.pieces)).toBe(text);
    // A header and one cue: nothing to cut between.
    expect(cutDocument('WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n', 'vtt', 'en')).toBeNull();
  });

  it('cuts Windows (CRLF) and old Mac (CR) files as their LF twins: subtitles between cues, text at paragraphs', () => {
    for (const lineBreak of ['\r\n', '\r']) {
      const text = srt(20).replace(/\n/g, lineBreak);
      const pieces = cutAll(text, 'srt', 150);
      expect(pieces.length).toBeGreaterThan(4);
      expect(pieces.join('')).toBe(text);
      for (const piece of pieces) expect(piece).toMatch(/^\d+\r\n?\d\d:\d\d:\d\d,\d{3} --> /);
      const vtt = `WEBVTT\n\n00:01.000 --> 00:02.000\nHello.\n\n00:03.000 --> 00:04.000\nBye.\n`.replace(
        /\n/g,
        lineBreak,
      );
      const cut = cutDocument(vtt, 'vtt', 'en')!;
      expect(cut.pieces[1]).toBe(`WEBVTT\n\n00:03.000 --> 00:04.000${lineBreak}Bye.${lineBreak}`);
      expect(cut.join(cut.pieces)).toBe(vtt);
      const paragraphs = 'One. Two.\n\nThree four five six.\n\nSeven.\n'.replace(/\n/g, lineBreak);
      expect(cutDocument(paragraphs, 'text', 'en')!.pieces[0]).toBe(`One. Two.${lineBreak}${lineBreak}`);
    }
  });

  it('reads CRLF as one line break, never as a blank line: cues not parted by one are not cut apart', () => {
    expect(
      cutDocument(
        '1\r\n00:00:01,000 --> 00:00:02,000\r\nOne.\r\n2\r\n00:00:03,000 --> 00:00:04,000\r\nTwo.\r\n',
        'srt',
        'en',
      ),
    ).toBeNull();
  });

  it("cuts plain text where the model server's segmentation parts it: never after an abbreviation", () => {
    // "Mr. " and "Dr. " are nearer the middle, but end no sentence: their halves would each be translated broken.
    const text = 'It was late. Then Mr. Smith and Dr. Jones arrived.';
    expect(cutDocument(text, 'text', 'en')!.pieces).toEqual(['It was late. ', 'Then Mr. Smith and Dr. Jones arrived.']);
    // Every line break the segmentation knows separates; sentences that touch (zh) are never cut apart.
    expect(cutDocument('first line\u2028second line', 'text', 'en')!.pieces).toEqual([
      'first line\u2028',
      'second line',
    ]);
    expect(cutDocument('你好。再见。', 'text', 'zh')).toBeNull();
  });

  it('never cuts markup', () => {
    expect(cutDocument('<p>One.</p>\n\n<p>Two.</p>', 'html', 'en')).toBeNull();
  });
});
