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
import { type Atom, atomsOf, atomsOfRuns, finerRuns, GRAPHEME_LEVEL, LEVELS, type Measure } from './atoms.js';
import { leadingWhitespaceEnd, SegmentsBuilder, type Segments, trailingWhitespaceStart } from './segments.js';

export type { Measure } from './atoms.js';

/** Longest atom, in UTF-16 units, by default: about 2 ms of tokenization. */
const MAX_ATOM_CHARS = 256;
/**
 * Longest piece, in UTF-16 units, by default: confirming it fits is one tokenization of ~16 ms (M2M100, Latin
 * text), the longest stretch the split spends without a pause. ~500 M2M100 tokens of ordinary text, twice the
 * longest sentences it was trained on.
 */
const MAX_PIECE_CHARS = 2_048;

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
