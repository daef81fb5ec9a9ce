/**
 * @module model-server/text/atoms — a long sentence cut once into atoms for split-long.ts: the text between its
 * boundaries (inner sentence ends, clause marks, commas, whitespace; then ICU words and grapheme clusters for an atom
 * over the longest allowed), each measured once, with the level of the boundary after it and the cost of the
 * whitespace there. split-long.ts packs pieces from their costs.
 */
import { boundarySteps } from './icu-boundaries.js';
import { WHITESPACE } from './segments.js';

/**
 * The caller's cost of a piece (its token count, usually), compared with the limit: expected to add up over
 * atoms joined at whitespace, and to be 0 for whitespace alone when whitespace inside a piece is free.
 */
export type Measure = (piece: string) => number;

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

/** Boundary levels: 0-2 punctuation, 3 whitespace, 4 ICU words, 5 grapheme clusters. */
export const WORD_LEVEL = PUNCTUATION_RES.length + 1;
export const GRAPHEME_LEVEL = WORD_LEVEL + 1;
/** One past the weakest level: the boundary after a sentence's last atom. */
export const LEVELS = GRAPHEME_LEVEL + 1;

/** A stretch of the sentence between two boundaries, measured once; `level` is the boundary after it. */
export interface Atom {
  start: number;
  end: number;
  cost: number;
  /** The level of the boundary after it (the last atom's is unused), and the whitespace there, measured. */
  level: number;
  gapCost: number;
}

/**
 * Boundaries of levels 0-3 in `text` (trimmed), in order, found lazily (each regex scans on as the walk needs
 * its next match): `[end of the unit before, start of the next, level]`, the strongest level where marks meet.
 */
function* clauseBoundaries(text: string): Generator<[number, number, number]> {
  const sources = [
    ...PUNCTUATION_RES.map((re, level) => ({ matches: text.matchAll(re), level, spaced: false })),
    { matches: text.matchAll(WHITESPACE_RE), level: PUNCTUATION_RES.length, spaced: true },
  ].map((source) => ({ ...source, head: undefined as [number, number] | undefined }));
  const advance = (source: (typeof sources)[number]) => {
    const next = source.matches.next();
    source.head = next.done
      ? undefined
      : source.spaced
        ? [next.value.index, next.value.index + next.value[0].length]
        : [next.value.index + next.value[0].length - next.value[1]!.length, next.value.index + next.value[0].length];
  };
  sources.forEach(advance);
  let position = 0;
  for (;;) {
    let end = Infinity;
    for (const source of sources) if (source.head !== undefined) end = Math.min(end, source.head[0]);
    if (end === Infinity) return;
    let next = end;
    let level = Infinity;
    for (const source of sources) {
      if (source.head?.[0] !== end) continue;
      next = Math.max(next, source.head[1]);
      level = Math.min(level, source.level);
      advance(source);
    }
    if (end > position && next < text.length) {
      yield [end, next, level];
      position = next;
    }
  }
}

/**
 * `[start, end)` of `text` cut at `level` (word or grapheme) boundaries into runs of at most `maxChars` (a run
 * is longer only when no boundary falls inside it). Yields `undefined` between ICU's windows.
 */
export function* finerRuns(
  text: string,
  start: number,
  end: number,
  level: number,
  maxChars: number,
): Generator<undefined, [number, number][]> {
  const segmenter = level === WORD_LEVEL ? wordSegmenter : graphemeSegmenter;
  const runs: [number, number][] = [];
  let runStart = start;
  let last = start;
  const take = (b: number) => {
    if (b - runStart > maxChars && last > runStart) {
      runs.push([runStart, last]);
      runStart = last;
    }
    last = b;
  };
  for (const at of boundarySteps(segmenter, text.slice(start, end))) {
    if (at === undefined) yield;
    else take(start + at);
  }
  take(end);
  runs.push([runStart, end]);
  return runs;
}

/**
 * Atoms of `text` (trimmed, non-empty): its clause and whitespace units, a unit over `maxChars` cut at word
 * boundaries and a word over it at grapheme clusters. Yields after each measurement and each ICU window.
 */
export function* atomsOf(text: string, measure: Measure, maxChars: number): Generator<void, Atom[]> {
  const atoms: Atom[] = [];
  const gapCosts = new Map<string, number>();
  const push = function* (start: number, end: number, level: number, next: number): Generator<void> {
    const cost = measure(text.slice(start, end));
    yield;
    const gap = text.slice(end, next);
    let gapCost = gapCosts.get(gap);
    if (gapCost === undefined) {
      gapCost = gap === '' ? 0 : measure(gap);
      if (gapCosts.size < 64) gapCosts.set(gap, gapCost);
    }
    atoms.push({ start, end, cost, level, gapCost });
  };
  const unit = function* (start: number, end: number, level: number, next: number): Generator<void> {
    if (end - start <= maxChars) return yield* push(start, end, level, next);
    const words = yield* finerRuns(text, start, end, WORD_LEVEL, maxChars);
    for (let w = 0; w < words.length; w++) {
      const [ws, we] = words[w]!;
      const wordNext = w + 1 < words.length ? we : next;
      const wordLevel = w + 1 < words.length ? WORD_LEVEL : level;
      if (we - ws <= maxChars) {
        yield* push(ws, we, wordLevel, wordNext);
        continue;
      }
      const clusters = yield* finerRuns(text, ws, we, GRAPHEME_LEVEL, maxChars);
      for (let g = 0; g < clusters.length; g++) {
        const [gs, ge] = clusters[g]!;
        const last = g + 1 === clusters.length;
        yield* push(gs, ge, last ? wordLevel : GRAPHEME_LEVEL, last ? wordNext : ge);
      }
    }
  };
  let start = 0;
  let steps = 0;
  for (const [end, next, level] of clauseBoundaries(text)) {
    yield* unit(start, end, level, next);
    start = next;
    if (++steps % 64 === 0) yield;
  }
  yield* unit(start, text.length, LEVELS, text.length);
  return atoms;
}

/** Grapheme-cluster atoms of one atom, measured (the atom's own boundary after the last). */
export function* atomsOfRuns(
  text: string,
  runs: [number, number][],
  parent: Atom,
  measure: Measure,
): Generator<void, Atom[]> {
  const atoms: Atom[] = [];
  for (let k = 0; k < runs.length; k++) {
    const [s, e] = runs[k]!;
    atoms.push({
      start: s,
      end: e,
      cost: measure(text.slice(s, e)),
      level: k + 1 < runs.length ? GRAPHEME_LEVEL : parent.level,
      gapCost: k + 1 < runs.length ? 0 : parent.gapCost,
    });
    yield;
  }
  return atoms;
}
