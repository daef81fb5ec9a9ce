/**
 * @module model-server/text/alternatives — alternative translations of a text made of several translated parts
 * (a long sentence's pieces in the worker, a document's sentences in the model server).
 */

/** A part's translation with beam search's runners-up (best first) and their scores. */
export interface RankedPart {
  text: string;
  score: number;
  alternatives?: readonly { text: string; score: number }[];
}

/**
 * Up to `wanted` alternatives of the text the parts make: the k-th joins each part's k-th runner-up (its best
 * where it has fewer), scored by the sum of the parts' scores; each distinct from the best text and the others.
 */
export function joinAlternatives(
  parts: readonly RankedPart[],
  wanted: number,
  join: (texts: string[]) => string,
): { text: string; score: number }[] {
  const seen = new Set([join(parts.map((p) => p.text))]);
  const out: { text: string; score: number }[] = [];
  const most = Math.max(0, ...parts.map((p) => p.alternatives?.length ?? 0));
  for (let k = 0; k < most && out.length < wanted; k++) {
    const picks = parts.map((p) => p.alternatives?.[k] ?? p);
    const text = join(picks.map((pick) => pick.text));
    if (seen.has(text)) continue;
    seen.add(text);
    out.push({ text, score: picks.reduce((sum, pick) => sum + pick.score, 0) });
  }
  return out;
}
