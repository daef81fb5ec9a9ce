/**
 * @module model-server/text/segment — cuts a document into sentences (with the exact whitespace between
 * them) and puts translated sentences back together.
 *
 * Sentence boundaries come from ICU through `Intl.Segmenter` (granularity "sentence"), which knows the
 * terminal punctuation of every served script (。！？ for zh/ja, । for hi, ؟ for ar, …) and does not break
 * inside numbers such as 3.14, 1.000,50 or 10:30. Node's ICU applies no per-locale break suppressions,
 * so `abbreviations.ts` supplies them, and a quotation closed inside a zh/ja sentence does not end
 * it. Line breaks always end a sentence and belong to the separators.
 */
import { abbreviationRules, type AbbreviationRules } from './abbreviations.js';
import { boundarySteps } from './icu-boundaries.js';
import { isWhitespace, SegmentsBuilder, trailingWhitespaceStart, WHITESPACE, type Segments } from './segments.js';

export { joinSegments, type Segments } from './segments.js';

// ICU's paragraph separators (its Sep and CR/LF classes): a line break in any of these forms.
const LINE = /[^\n\r\u0085\u2028\u2029]+/gu;
const OPENING_PUNCTUATION = /^[\p{Ps}\p{Pi}\p{Pf}"'¿¡]+/u;
const INITIAL = /^\p{Lu}$/u;
const DOTTED = /^(?:[\p{L}\p{M}]{1,3}\.)+[\p{L}\p{M}]{1,3}$/u;
const ORDINAL = /^\p{Nd}{1,2}$/u;
const FIRST_WORD = /^[\p{L}\p{M}]+/u;
const STARTS_WITH_DIGIT = /^\p{Nd}/u;
const CLOSED_QUOTE = /[\p{Pe}\p{Pf}]$/u;
const UNSPACED_START = /^[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}]/u;

// Keyed by the caller's language string, which may come from a request: bounded, so junk codes cannot
// grow it without limit (past the bound a segmenter is built per call).
const segmenters = new Map<string, Intl.Segmenter>();
const MAX_CACHED_SEGMENTERS = 64;

function sentenceSegmenter(lang: string): Intl.Segmenter {
  let segmenter = segmenters.get(lang);
  if (segmenter === undefined) {
    // ICU's sentence rules barely depend on the locale (Greek's ";" aside); a code Intl rejects gets the root's.
    let locale: string | undefined;
    try {
      locale = Intl.Segmenter.supportedLocalesOf(lang)[0];
    } catch {
      locale = undefined;
    }
    segmenter = new Intl.Segmenter(locale, { granularity: 'sentence' });
    if (segmenters.size < MAX_CACHED_SEGMENTERS) segmenters.set(lang, segmenter);
  }
  return segmenter;
}

/**
 * Whether ICU's break between `before` and `after` falls after an abbreviation, an initial or an
 * ordinal, i.e. inside a sentence.
 */
function continuesSentence(before: string, after: string, rules: AbbreviationRules): boolean {
  // ICU breaks after a quoted sentence's closing mark even when the sentence goes on right after it
  // ("「行くよ！」と叫んだ。", "“你好。”他说。"); unspaced text continuing after it is the same sentence.
  if (CLOSED_QUOTE.test(before) && UNSPACED_START.test(after)) return true;
  const coreEnd = trailingWhitespaceStart(before);
  if (before[coreEnd - 1] !== '.') return false;
  let tokenStart = coreEnd;
  while (tokenStart > 0 && !isWhitespace(before[tokenStart - 1]!)) tokenStart--;
  const token = before.slice(tokenStart, coreEnd);
  const word = token.replace(OPENING_PUNCTUATION, '').slice(0, -1);
  if (word === '') return false;
  const lower = word.toLowerCase();
  if (rules.mayEnd.has(lower)) return false;
  if (rules.always.has(lower) || INITIAL.test(word) || DOTTED.test(word)) return true;
  const next = after.trimStart();
  if (rules.beforeNumber.has(lower) && STARTS_WITH_DIGIT.test(next)) return true;
  return ORDINAL.test(word) && rules.afterOrdinal.has((FIRST_WORD.exec(next)?.[0] ?? '').toLowerCase());
}

/** A line's sentences, from ICU's boundaries inside it (relative to the line, in order). */
function* sentencesOfLine(line: string, boundaries: readonly number[], rules: AbbreviationRules): Generator<string> {
  let start = 0;
  let previous = 0;
  for (const end of [...boundaries, line.length]) {
    if (previous > start && !continuesSentence(line.slice(start, previous), line.slice(previous, end), rules)) {
      yield line.slice(start, previous);
      start = previous;
    }
    previous = end;
  }
  if (line.length > start) yield line.slice(start);
}

/**
 * Splits `text` into sentences and the exact whitespace around them (`joinSegments` restores `text`).
 *
 * Paragraphs and lines are kept apart: every line break is separator text, so no sentence spans two
 * lines. Whitespace-only stretches (blank lines, indentation, spaces between sentences) are separators,
 * never sentences. `lang` is the M2M100 code of the text, used for its abbreviations; any string works.
 * @throws TooManySentencesError as soon as a sentence past `maxSentences` is found: the rest is never segmented.
 */
export function segmentDocument(text: string, lang: string, maxSentences = Infinity): Segments {
  const segmenter = sentenceSegmenter(lang);
  const rules = abbreviationRules(lang);
  const out = new SegmentsBuilder();
  // ICU over the whole text (in windows, as far as the lines need), not line by line: it breaks after every line
  // break and decides inside a line from that line alone, so these are each line's boundaries. One call a line cost
  // a break iterator each (~3 µs and its memory: 2.7 s for a megabyte of one-letter lines).
  const steps = boundarySteps(segmenter, text);
  const nextBoundary = (): number => {
    for (let step = steps.next(); !step.done; step = steps.next()) if (step.value !== undefined) return step.value;
    return Infinity;
  };
  let boundary = nextBoundary();
  let end = 0;
  for (const match of text.matchAll(LINE)) {
    out.gap(text.slice(end, match.index));
    const inside: number[] = [];
    while (boundary <= match.index) boundary = nextBoundary();
    for (; boundary < match.index + match[0].length; boundary = nextBoundary()) inside.push(boundary - match.index);
    for (const sentence of sentencesOfLine(match[0], inside, rules)) {
      out.text(sentence);
      if (out.pieceCount > maxSentences) throw new TooManySentencesError(maxSentences);
    }
    end = match.index + match[0].length;
  }
  out.gap(text.slice(end));
  return out.build();
}

/** A document has more sentences than the caller allows (`segmentDocument`'s `maxSentences`). */
export class TooManySentencesError extends RangeError {
  constructor(readonly maxSentences: number) {
    super(`more than ${maxSentences} sentences`);
  }
}

// Chinese and Japanese put no space between sentences: the full-width mark carries its own spacing.
const UNSPACED_LANGS: ReadonlySet<string> = new Set(['zh', 'ja']);
const FULL_WIDTH_MARK = /^[。．！？，、；：…]$/u;
const CLOSER = /^[\p{Pe}\p{Pf}]$/u;

/** Whether `text` ends in full-width punctuation, possibly followed by closing quotes or brackets. */
function endsInFullWidthMark(text: string): boolean {
  let i = text.length;
  while (i > 0 && CLOSER.test(text[i - 1]!)) i--;
  return i > 0 && FULL_WIDTH_MARK.test(text[i - 1]!);
}
const HORIZONTAL = /^[^\n\r\u0085\u2028\u2029]+$/u;
const SEPARATOR_WHITESPACE = new RegExp(`[${WHITESPACE}]`, 'gu');
const SEPARATOR_WHITESPACE_ONE = new RegExp(`[${WHITESPACE}]`, 'u');

/**
 * The separator to put between two translated pieces in a `tgtLang` text, given the source's.
 *
 * Bidi controls in a separator are kept, in place; only its whitespace changes.
 * - zh/ja target: spaces (no line break) after a piece ending in full-width punctuation are dropped,
 *   since "你好。 再见。" reads as a stray space there. After anything else (a Latin word, a URL, ASCII
 *   punctuation) the space is kept, because dropping it would glue two words.
 * - any other target: a separator without whitespace (the source was zh/ja, or a hard split) gets one space, so
 *   "Hello." and "How are you?" do not run together.
 */
function targetSeparator(separator: string, before: string, after: string, tgtLang: string): string {
  // Bidi controls in a separator stay as they are, in place: only its whitespace is adapted.
  if (UNSPACED_LANGS.has(tgtLang)) {
    return separator !== '' && HORIZONTAL.test(separator) && endsInFullWidthMark(before)
      ? separator.replace(SEPARATOR_WHITESPACE, '')
      : separator;
  }
  return !SEPARATOR_WHITESPACE_ONE.test(separator) && before !== '' && after !== '' ? ' ' + separator : separator;
}

/**
 * Rebuilds a `tgtLang` document from the translations of `segments.pieces` (same order and count),
 * keeping the source's separators: paragraphs, line breaks and indentation survive translation. Each
 * translation is trimmed, since the separators already hold the whitespace. The separators between
 * pieces are adapted to the target script (see `targetSeparator`); the leading and trailing ones are
 * kept as they are.
 *
 * @throws RangeError when `translations.length !== segments.pieces.length`.
 */
export function joinTranslations(segments: Segments, translations: readonly string[], tgtLang: string): string {
  const { pieces, separators } = segments;
  if (translations.length !== pieces.length) {
    throw new RangeError(`joinTranslations: ${translations.length} translations for ${pieces.length} pieces`);
  }
  const trimmed = translations.map((t) => t.trim());
  let text = separators[0] ?? '';
  for (let i = 0; i < trimmed.length; i++) {
    if (i > 0) text += targetSeparator(separators[i]!, trimmed[i - 1]!, trimmed[i]!, tgtLang);
    text += trimmed[i];
  }
  return pieces.length === 0 ? text : text + (separators[pieces.length] ?? '');
}

/**
 * Where `text` may be cut in two, each half segmenting as it did whole (router/apis/document-pieces.ts): after the
 * whitespace between two sentences nearest the middle, a blank line first, then a line break, then any; null if none.
 */
export function cutNearMiddle(text: string, lang: string): number | null {
  const { pieces, separators } = segmentDocument(text, lang);
  let best: { rank: number; at: number } | null = null;
  for (let i = 1, at = separators[0]!.length; i < pieces.length; i++) {
    const separator = separators[i]!;
    at += pieces[i - 1]!.length + separator.length;
    const breaks = separator.replaceAll('\r\n', '\n').match(/[\n\r\u0085\u2028\u2029]/gu)?.length ?? 0;
    const rank = (breaks > 1 ? 0 : breaks === 1 ? 1 : 2) * text.length + Math.abs(at - text.length / 2);
    if (separator !== '' && (best === null || rank < best.rank)) best = { rank, at };
  }
  return best?.at ?? null;
}
