/**
 * @module model-server/text/split-long — cuts a sentence too long for the model's input window into
 * pieces that fit, at the best boundaries available, without losing a character.
 *
 * Boundaries are tried from the most to the least natural (follows the recursive character splitter of
 * LangChain's text splitters): inner sentence ends, then strong clause marks (; : —), then commas
 * (, 、 ، …), then whitespace, then word boundaries (ICU's dictionary-based word breaks, which cover
 * Chinese and Japanese text without spaces), then single grapheme clusters. At each level the units are
 * packed greedily: each piece takes as many consecutive units as `fits` allows, and a unit that does not
 * fit on its own is cut at the next level.
 */
import { segmentBoundaries } from './icu-boundaries.js';
import {
  leadingWhitespaceEnd,
  SegmentsBuilder,
  trailingWhitespaceStart,
  WHITESPACE,
  type Segments,
} from './segments.js';

/** The caller's "does this piece fit the model's input window" check (a token count, usually). */
export type FitsCheck = (piece: string) => boolean;

// A mark closes its clause together with any closing brackets or quotes right after it.
const CLOSERS = `[\\p{Pe}\\p{Pf}"'»]*`;

/**
 * A level of boundaries: marks that need whitespace after them (ASCII "," in "1,000" is no boundary)
 * and full-width marks that end a clause on their own, since zh/ja put no space after them.
 */
interface PunctuationLevel {
  readonly spaced: string;
  readonly unspaced: string;
}

const PUNCTUATION_LEVELS: readonly PunctuationLevel[] = [
  // "." is left out: inside one sentence it follows an abbreviation ("Dr. Smith"), not a sentence end.
  { spaced: '!?…।॥؟', unspaced: '。！？' },
  { spaced: ';:؛—–', unspaced: '；：' },
  { spaced: ',،、', unspaced: '，、､' },
];

const escapeClass = (chars: string): string => chars.replace(/[\\\]^-]/g, '\\$&');

const PUNCTUATION_RES = PUNCTUATION_LEVELS.map(
  ({ spaced, unspaced }) =>
    new RegExp(
      `(?:[${escapeClass(spaced)}]${CLOSERS}(?=[${WHITESPACE}])|[${escapeClass(unspaced)}]${CLOSERS})([${WHITESPACE}]*)`,
      'gu',
    ),
);
const WHITESPACE_RE = new RegExp(`[${WHITESPACE}]+`, 'gu');

const wordSegmenter = new Intl.Segmenter(undefined, { granularity: 'word' });
const graphemeSegmenter = new Intl.Segmenter(undefined, { granularity: 'grapheme' });

/** A unit of text: `[start, end)` in the text being cut; the whitespace after it runs to the next unit's start. */
interface Unit {
  readonly start: number;
  readonly end: number;
}

/** Units of `text` (no leading or trailing whitespace) at boundary level `level`. */
function unitsAt(text: string, level: number): Unit[] {
  const units: Unit[] = [];
  let start = 0;
  const cut = (end: number, next: number): void => {
    if (end > start && next < text.length) {
      units.push({ start, end });
      start = next;
    }
  };
  if (level < PUNCTUATION_RES.length) {
    for (const m of text.matchAll(PUNCTUATION_RES[level]!)) {
      cut(m.index + m[0].length - m[1]!.length, m.index + m[0].length);
    }
  } else if (level === PUNCTUATION_RES.length) {
    for (const m of text.matchAll(WHITESPACE_RE)) cut(m.index, m.index + m[0].length);
  } else {
    const segmenter = level === PUNCTUATION_RES.length + 1 ? wordSegmenter : graphemeSegmenter;
    for (const index of segmentBoundaries(segmenter, text)) cut(index, index);
  }
  units.push({ start, end: text.length });
  return units;
}

const LEVELS = PUNCTUATION_RES.length + 3;

/** Cuts `text` (trimmed, non-empty, known not to fit) from boundary level `level` down. */
function cut(text: string, level: number, fits: FitsCheck, out: SegmentsBuilder): void {
  if (level === LEVELS) {
    // A single grapheme cluster that does not fit: nothing finer to cut at.
    out.text(text);
    return;
  }
  const units = unitsAt(text, level);
  if (units.length === 1) {
    cut(text, level + 1, fits, out);
    return;
  }
  let i = 0;
  while (i < units.length) {
    const first = units[i]!;
    if (!fits(text.slice(first.start, first.end))) {
      cut(text.slice(first.start, first.end), level + 1, fits, out);
      i++;
    } else {
      // Binary search for the longest run of units from i that fits, assuming that a run that fits
      // stays fitting when shortened (true of token counts); only runs `fits` accepted are emitted.
      let lo = i;
      let hi = units.length - 1;
      while (lo < hi) {
        const mid = Math.ceil((lo + hi) / 2);
        if (fits(text.slice(first.start, units[mid]!.end))) lo = mid;
        else hi = mid - 1;
      }
      out.text(text.slice(first.start, units[lo]!.end));
      i = lo + 1;
    }
    if (i < units.length) out.gap(text.slice(units[i - 1]!.end, units[i]!.start));
  }
}

/**
 * Splits `sentence` into pieces that each pass `fits`, with the exact whitespace between them
 * (`joinSegments` restores `sentence`; whitespace at its ends goes to the outer separators).
 *
 * A sentence that fits comes back as one piece. Otherwise it is cut at the most natural boundaries
 * that make every piece fit, and each piece is as long as `fits` allows. Every piece fits, except a
 * single grapheme cluster that does not fit even alone (then nothing can be done, and the caller must
 * reject the input). Cost: about log2(units) calls of `fits` per piece produced, plus one per level
 * tried.
 *
 * @param fits the caller's check that the model can read a piece whole, e.g.
 *   `(piece) => tokenizer.encode(piece).length <= maxSourceTokens`; expected to stay true when a
 *   fitting piece is shortened.
 */
export function splitLongSentence(sentence: string, fits: FitsCheck): Segments {
  const out = new SegmentsBuilder();
  const start = leadingWhitespaceEnd(sentence);
  const end = Math.max(start, trailingWhitespaceStart(sentence));
  if (start === end || fits(sentence.slice(start, end))) {
    out.text(sentence);
  } else {
    out.gap(sentence.slice(0, start));
    cut(sentence.slice(start, end), 0, fits, out);
    out.gap(sentence.slice(end));
  }
  return out.build();
}

/**
 * `segments` with every piece that does not pass `fits` replaced by its `splitLongSentence` pieces, so
 * a document can go segment → fit → translate → `joinTranslations` in one flow.
 */
export function fitSegments(segments: Segments, fits: FitsCheck): Segments {
  const out = new SegmentsBuilder();
  out.gap(segments.separators[0] ?? '');
  for (let i = 0; i < segments.pieces.length; i++) {
    const piece = segments.pieces[i]!;
    if (fits(piece)) out.text(piece);
    else out.append(splitLongSentence(piece, fits));
    out.gap(segments.separators[i + 1] ?? '');
  }
  return out.build();
}
