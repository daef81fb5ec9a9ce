/**
 * @module model-server/text/split-long — cuts a sentence too long for the model's input window into
 * pieces that fit, at the best boundaries available, without losing a character, in time linear in its length.
 *
 * Boundaries are tried from the most to the least natural (follows the recursive character splitter of
 * LangChain's text splitters): inner sentence ends, then strong clause marks (; : —), then commas
 * (, 、 ، …), then whitespace, then word boundaries (ICU's dictionary-based word breaks, which cover
 * Chinese and Japanese text without spaces), then single grapheme clusters. At each level the units are
 * packed greedily: each piece takes as many consecutive units as fit, and a unit that does not fit on its own
 * is cut at the next level.
 *
 * Why measure atoms: the caller's measure is a tokenization, ~8 µs per character. Asking "does this prefix fit"
 * re-tokenizes overlapping prefixes (a 100k-word sentence cost 38× its length, 15 s). Instead the sentence is cut
 * once into atoms (the text between boundaries of levels 0-3, atoms over `maxAtomChars` cut at word, then
 * grapheme, boundaries), each atom is measured once, and pieces are packed from the atoms' costs added up
 * (a token count adds up across whitespace; across a word boundary inside unspaced text nearly so). Each piece
 * is measured once more to confirm it fits, so every character is measured twice; a piece the sum misjudged
 * (rare: tokens merging across a boundary without whitespace) is cut again from its atoms at its middle.
 *
 * The work is a generator that yields after each measurement, so a caller can spread a long sentence over
 * several turns of its event loop (`splitLongSentenceAsync`) instead of blocking it.
 */
import { boundarySteps } from './icu-boundaries.js';
import {
  leadingWhitespaceEnd,
  SegmentsBuilder,
  trailingWhitespaceStart,
  WHITESPACE,
  type Segments,
} from './segments.js';

/**
 * The caller's cost of a piece (its token count, usually), compared with the limit: expected to add up over
 * atoms joined at whitespace, and to be 0 for whitespace alone when whitespace inside a piece is free.
 */
export type Measure = (piece: string) => number;

/** Longest atom, in UTF-16 units, by default: about 2 ms of tokenization. */
const MAX_ATOM_CHARS = 256;
/**
 * Longest piece, in UTF-16 units, by default: confirming it fits is one tokenization of ~16 ms (M2M100, Latin
 * text), the longest stretch the split spends without a pause. ~500 M2M100 tokens of ordinary text, twice the
 * longest sentences it was trained on.
 */
const MAX_PIECE_CHARS = 2_048;

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
const WORD_LEVEL = PUNCTUATION_RES.length + 1;
const GRAPHEME_LEVEL = WORD_LEVEL + 1;

/** A stretch of the sentence between two boundaries, measured once; `level` is the boundary after it. */
interface Atom {
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
function* finerRuns(
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
function* atomsOf(text: string, measure: Measure, maxChars: number): Generator<void, Atom[]> {
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

const LEVELS = GRAPHEME_LEVEL + 1;

/** Prefix sums over atoms: the estimated cost of atoms `i..j` (inclusive), gaps between them included. */
function spanCost(atoms: readonly Atom[], sums: Float64Array, i: number, j: number): number {
  // sums[k] = Σ_{m<k} (cost_m + gapCost_m); the gap after j is not inside the span.
  return sums[j + 1]! - sums[i]! - atoms[j]!.gapCost;
}

/** What a piece may hold: a cost and, so that confirming it stays short, a length in UTF-16 units. */
interface Bounds {
  limit: number;
  maxChars: number;
}

/**
 * Packs atoms `[from, to)` into runs, most natural boundaries first (the recursive splitter, on estimated costs):
 * at `level`, units are the runs between boundaries of that level or a stronger one; consecutive units are taken
 * while their sum fits, and a unit over the bounds on its own is packed at the next level. Yields now and then.
 */
function* pack(
  atoms: readonly Atom[],
  sums: Float64Array,
  from: number,
  to: number,
  level: number,
  bounds: Bounds,
  out: [number, number][],
): Generator<void> {
  const fits = (i: number, j: number) =>
    atoms[j]!.end - atoms[i]!.start <= bounds.maxChars && spanCost(atoms, sums, i, j) <= bounds.limit;
  if (to - from === 1 || level >= LEVELS) {
    for (let i = from; i < to; i++) out.push([i, i]);
    return;
  }
  // Units at this level: [a, b] with a boundary of level ≤ `level` after b (or b = to - 1).
  const units: [number, number][] = [];
  let a = from;
  for (let i = from; i < to; i++) {
    if (i === to - 1 || atoms[i]!.level <= level) {
      units.push([a, i]);
      a = i + 1;
    }
    if (i % 4096 === 4095) yield;
  }
  if (units.length === 1) return yield* pack(atoms, sums, from, to, level + 1, bounds, out);
  let u = 0;
  while (u < units.length) {
    const [first, firstEnd] = units[u]!;
    if (!fits(first, firstEnd)) {
      yield* pack(atoms, sums, first, firstEnd + 1, level + 1, bounds, out);
      u++;
      continue;
    }
    let v = u;
    while (v + 1 < units.length && fits(first, units[v + 1]![1])) v++;
    out.push([first, units[v]![1]]);
    u = v + 1;
    if (out.length % 64 === 0) yield;
  }
}

/** The strongest boundary nearest the middle of atoms `[i, j]` (i < j): the last atom of the first half. */
function middleCut(atoms: readonly Atom[], i: number, j: number): number {
  let best = i;
  const middle = (atoms[i]!.start + atoms[j]!.end) / 2;
  for (let k = i; k < j; k++) {
    const a = atoms[k]!;
    const b = atoms[best]!;
    if (a.level < b.level || (a.level === b.level && Math.abs(a.end - middle) < Math.abs(b.end - middle))) best = k;
  }
  return best;
}

function* splitSteps(
  sentence: string,
  measure: Measure,
  limit: number,
  { maxAtomChars = MAX_ATOM_CHARS, maxPieceChars = MAX_PIECE_CHARS }: SplitOptions,
): Generator<void, Segments> {
  const out = new SegmentsBuilder();
  const start = leadingWhitespaceEnd(sentence);
  const end = Math.max(start, trailingWhitespaceStart(sentence));
  if (start === end) {
    out.text(sentence);
    return out.build();
  }
  const text = sentence.slice(start, end);
  const atoms = yield* atomsOf(text, measure, Math.max(1, Math.min(maxAtomChars, limit)));
  const sums = new Float64Array(atoms.length + 1);
  atoms.forEach((a, i) => (sums[i + 1] = sums[i]! + a.cost + a.gapCost));
  const runs: [number, number][] = [];
  const bounds = { limit, maxChars: maxPieceChars };
  if (text.length <= maxPieceChars && spanCost(atoms, sums, 0, atoms.length - 1) <= limit) {
    runs.push([0, atoms.length - 1]);
  } else {
    yield* pack(atoms, sums, 0, atoms.length, 0, bounds, runs);
  }
  out.gap(sentence.slice(0, start));
  // Each run measured once; one the estimate misjudged is cut in two at its middle and both halves checked.
  const pending = runs.reverse();
  let previous: number | undefined;
  while (pending.length > 0) {
    const [i, j] = pending.pop()!;
    const piece = text.slice(atoms[i]!.start, atoms[j]!.end);
    const cost = i === j && atoms[i]!.cost > limit ? atoms[i]!.cost : measure(piece);
    yield;
    if (cost > limit && i < j) {
      const cut = middleCut(atoms, i, j);
      pending.push([cut + 1, j], [i, cut]);
      continue;
    }
    if (cost > limit && atoms[i]!.end - atoms[i]!.start > 1 && i === j) {
      // One atom over the limit (a word costlier than its characters): its grapheme clusters, measured.
      const clusters = yield* finerRuns(text, atoms[i]!.start, atoms[i]!.end, GRAPHEME_LEVEL, 1);
      if (clusters.length > 1) {
        const sub = yield* atomsOfRuns(text, clusters, atoms[i]!, measure);
        const subRuns: [number, number][] = [];
        const subSums = new Float64Array(sub.length + 1);
        sub.forEach((a, k) => (subSums[k + 1] = subSums[k]! + a.cost + a.gapCost));
        yield* pack(sub, subSums, 0, sub.length, GRAPHEME_LEVEL, bounds, subRuns);
        for (const [si, sj] of subRuns) {
          if (previous !== undefined) out.gap(text.slice(previous, sub[si]!.start));
          out.text(text.slice(sub[si]!.start, sub[sj]!.end));
          previous = sub[sj]!.end;
        }
        continue;
      }
    }
    if (previous !== undefined) out.gap(text.slice(previous, atoms[i]!.start));
    out.text(piece);
    previous = atoms[j]!.end;
  }
  out.gap(sentence.slice(end));
  return out.build();
}

/** Grapheme-cluster atoms of one atom, measured (the atom's own boundary after the last). */
function* atomsOfRuns(text: string, runs: [number, number][], parent: Atom, measure: Measure): Generator<void, Atom[]> {
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

export interface SplitOptions {
  /** Longest atom in UTF-16 units (default 256); capped at `limit`, so a cost of one per character fits. */
  maxAtomChars?: number;
  /** Longest piece in UTF-16 units (default 2,048), so that measuring one piece stays short too. */
  maxPieceChars?: number;
}

/**
 * Splits `sentence` into pieces whose `measure` is at most `limit`, with the exact whitespace between them
 * (`joinSegments` restores `sentence`; whitespace at its ends goes to the outer separators).
 *
 * A sentence whose atoms add up to no more than `limit` (and that measures so) comes back as one piece.
 * Otherwise it is cut at the most natural boundaries that make every piece fit, each piece as long as the
 * atoms allow. Every piece fits, except a single grapheme cluster that does not fit even alone (then nothing
 * can be done, and the caller must reject the input). Each character is measured twice (once in its atom,
 * once in its piece), plus once more in a piece the atoms' sum misjudged.
 */
export function splitLongSentence(
  sentence: string,
  measure: Measure,
  limit: number,
  options: SplitOptions = {},
): Segments {
  const steps = splitSteps(sentence, measure, limit, options);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * `splitLongSentence` spread over turns of the event loop: it yields to the loop (a macrotask, so timers and
 * I/O run) whenever it has worked `sliceMs` since the last turn, and rejects with `signal`'s reason when it was
 * aborted meanwhile.
 */
export async function splitLongSentenceAsync(
  sentence: string,
  measure: Measure,
  limit: number,
  options: SplitOptions & { sliceMs?: number; signal?: AbortSignal } = {},
): Promise<Segments> {
  const sliceMs = options.sliceMs ?? 10;
  options.signal?.throwIfAborted();
  const steps = splitSteps(sentence, measure, limit, options);
  let sliceStart = performance.now();
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    if (performance.now() - sliceStart >= sliceMs) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      // Given up meanwhile (its deadline, its client gone): stop here, with the reason.
      options.signal?.throwIfAborted();
      sliceStart = performance.now();
    }
  }
}

/**
 * `segments` with every piece over `limit` replaced by its `splitLongSentence` pieces, so a document can go
 * segment → fit → translate → `joinTranslations` in one flow.
 */
export function fitSegments(segments: Segments, measure: Measure, limit: number): Segments {
  const out = new SegmentsBuilder();
  out.gap(segments.separators[0] ?? '');
  for (let i = 0; i < segments.pieces.length; i++) {
    const piece = segments.pieces[i]!;
    out.append(splitLongSentence(piece, measure, limit));
    out.gap(segments.separators[i + 1] ?? '');
  }
  return out.build();
}
