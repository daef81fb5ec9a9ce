/**
 * @module model-server/text/office/run-placement — where each run of an Office paragraph goes in its translation: the
 * paragraph is translated whole, and each run's text (its formatting: a bold word, an italic one) is put onto the
 * target words its source words align with (the engine's word alignment, as model-server/text/markup/inline-tags.ts places
 * HTML's inline elements).
 *
 * Runs are flat siblings that tile the paragraph's text, and every target character must fall in one of them (a Word
 * paragraph has no text outside its runs). They keep their order: moving a run's XML would move whatever is anchored
 * between runs (a comment's range, a bookmark, a revision) and could leave it invalid. So the translation is cut into
 * consecutive pieces, one per run:
 * - a run starts at the first target token, after the previous run's start, linked to a source token starting inside
 *   it (a token's leading space is not its word), or, with no such token, at its place in proportion (inline-tags.ts
 *   `proportional`), clipped after the previous run's start: a translation that moves a run's words before an earlier
 *   run's leaves them to that run, so a run may end shorter, or empty, but never out of order;
 * - a run that starts between two source words starts between two target words; the space between them goes to the
 *   run that held it in the source.
 */
import { type Links, proportional } from '../markup/inline-tags.js';

/** A run's source character range in the paragraph's text, `[start, end)`. */
export interface RunSpan {
  readonly start: number;
  readonly end: number;
}

const isSpace = (c: string | undefined) => c === ' ' || c === '\t' || c === '\n' || c === '\r' || c === '\u00a0';

/**
 * Where each of `runs` (in order, tiling `source`) starts in `target`, and where the last ends: `runs.length + 1`
 * offsets, non-decreasing, the first 0 and the last `target.length`; run i's text is `target.slice(cuts[i],
 * cuts[i + 1])`. `links` refer to `source` and `target`.
 */
export function placeRuns(source: string, runs: readonly RunSpan[], target: string, links: Links): number[] {
  const owner = new Int32Array(source.length).fill(-1);
  runs.forEach((run, i) => owner.fill(i, Math.max(0, run.start), Math.min(source.length, run.end)));
  // Per run, where its linked target tokens start, in target order.
  const starts: number[][] = runs.map(() => []);
  for (let k = 0; k + 3 < links.length; k += 4) {
    const [t0, t1, s0, s1] = [links[k]!, links[k + 1]!, links[k + 2]!, links[k + 3]!];
    if (t0 < 0 || t1 > target.length || t0 >= t1) continue;
    let s = s0;
    while (s < s1 - 1 && isSpace(source[s])) s++;
    const at = s >= 0 && s < source.length ? owner[s]! : -1;
    if (at >= 0) starts[at]!.push(t0);
  }
  for (const list of starts) list.sort((a, b) => a - b);
  const cuts = [0];
  for (let i = 1; i < runs.length; i++) {
    const previous = cuts[i - 1]!;
    // Its first word after the previous run's start: a word the translation moved before it is left to that run.
    const own = starts[i]!.find((t) => t >= previous);
    const wanted = own ?? proportional(source, runs[i]!, target)[0];
    let at = Math.min(Math.max(wanted, previous), target.length);
    const start = runs[i]!.start;
    // A run that starts between words in the source starts between words in the target, never inside one.
    if (start > 0 && (isSpace(source[start - 1]) || isSpace(source[start])))
      while (at > previous && at < target.length && !isSpace(target[at - 1]) && !isSpace(target[at])) at++;
    if (isSpace(source[start])) while (at > previous && isSpace(target[at - 1])) at--;
    else while (at < target.length && isSpace(target[at])) at++;
    cuts.push(at);
  }
  cuts.push(target.length);
  return cuts;
}
