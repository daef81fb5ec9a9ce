/**
 * @module model-server/text/markup/inline-tags — inline markup carried onto a translated sentence: a block's text is
 * translated whole, and each inline element (`<b>`, `<a href>`, a Word run's formatting…) is put back around the
 * target words its source words align with (the engine's word alignment: engine/alignment.ts), as Marian and
 * Firefox's Bergamot move tags.
 *
 * Placement, per element, from its source character range:
 * - its target range is the hull of the target tokens linked to a source token that starts inside it (each link is
 *   counted for the innermost element holding it and its ancestors, so the cost is linear in text, links and
 *   elements);
 * - clipped into its parent's target range, and after its previous sibling's (siblings are taken in the order of
 *   their target start, so a reordering translation reorders them): every element appears exactly once and they nest
 *   properly, whatever the alignment says;
 * - an element no target token is linked to (no word of its own, or a model that gives no alignment: a decoder whose
 *   cross-attention cannot be read, a sentence too long for the window) takes the target range proportional to its
 *   source range, widened to whole words when its source range is whole words. It is never dropped.
 */

/** An inline element over a unit's text: its tags as they stand in the source, and what it holds. */
export interface InlineElement {
  /** Source character range in the unit's text `[start, end)`. */
  start: number;
  end: number;
  /** Written before and after the element's translated text, byte for byte (tags with their attributes). */
  open: string;
  close: string;
  children: InlineElement[];
}

/**
 * Links of a translation to its source, flat: per target token `targetStart, targetEnd, sourceStart, sourceEnd`
 * (what the translation handler answers as `alignment`).
 */
export type Links = readonly number[];

interface Placed {
  element: InlineElement;
  start: number;
  end: number;
  children: Placed[];
}

/**
 * The translation of a unit with its inline elements put back, `escape` applied to the text between tags.
 * `links` (absent: no alignment) refer to `source` (the unit's text) and `target`.
 */
export function placeInlineTags(
  source: string,
  elements: readonly InlineElement[],
  target: string,
  links: Links | undefined,
  escape: (text: string) => string,
): string {
  // Per source character, the innermost element holding it (-1: none), filled outermost first.
  const flat: InlineElement[] = [];
  const parentOf: number[] = [];
  const owner = new Int32Array(source.length).fill(-1);
  const pending: [InlineElement, number][] = elements.map((e) => [e, -1]);
  while (pending.length > 0) {
    const [element, parent] = pending.pop()!;
    const index = flat.push(element) - 1;
    parentOf.push(parent);
    owner.fill(index, Math.max(0, element.start), Math.min(source.length, element.end));
    for (const child of element.children) pending.push([child, index]);
  }
  // Hull of linked target characters per element: its own links first, then its descendants' (children come after
  // their parents in `flat`, so a backward pass folds each into its parent).
  const lo = new Float64Array(flat.length).fill(Infinity);
  const hi = new Float64Array(flat.length).fill(-Infinity);
  const widen = (at: number, from: number, to: number) => {
    if (at < 0 || to <= from) return;
    lo[at] = Math.min(lo[at]!, from);
    hi[at] = Math.max(hi[at]!, to);
  };
  for (let i = 0; links !== undefined && i + 3 < links.length; i += 4) {
    const [t0, t1, s0, s1] = [links[i]!, links[i + 1]!, links[i + 2]!, links[i + 3]!];
    if (t0 < 0 || t1 > target.length || t0 >= t1 || s0 < 0 || s0 >= source.length) continue;
    // A source token across an element's edge (`Hello<b>World</b>` read as one word) shares its target characters
    // in proportion, so the edge lands inside the target token rather than the whole token joining one side.
    const end = Math.min(source.length, Math.max(s1, s0 + 1));
    const scale = (t1 - t0) / (end - s0);
    for (let a = s0; a < end;) {
      let b = a + 1;
      while (b < end && owner[b] === owner[a]) b++;
      widen(owner[a]!, t0 + Math.round((a - s0) * scale), t0 + Math.round((b - s0) * scale));
      a = b;
    }
  }
  for (let i = flat.length - 1; i >= 0; i--) {
    const parent = parentOf[i]!;
    if (parent < 0) continue;
    lo[parent] = Math.min(lo[parent]!, lo[i]!);
    hi[parent] = Math.max(hi[parent]!, hi[i]!);
  }
  const indexOf = new Map(flat.map((element, i) => [element, i]));
  const place = (siblings: readonly InlineElement[], from: number, to: number): Placed[] => {
    // Siblings placed in proportion keep their source order: snapping to words could move one before an earlier one.
    let floor = from;
    const wanted = siblings.map((element) => {
      const i = indexOf.get(element)!;
      const linked = lo[i]! <= hi[i]!;
      let [start, end] = linked ? [lo[i]!, hi[i]!] : proportional(source, element, target);
      if (!linked) [start, end, floor] = [Math.max(start, floor), Math.max(end, start, floor), Math.max(start, floor)];
      return { element, start: Math.min(Math.max(start, from), to), end: Math.min(Math.max(end, from), to) };
    });
    wanted.sort((a, b) => a.start - b.start || a.element.start - b.element.start);
    let cursor = from;
    return wanted.map(({ element, start, end }) => {
      const s = Math.max(start, cursor);
      const e = Math.max(end, s);
      cursor = e;
      return { element, start: s, end: e, children: [] };
    });
  };
  const roots = place(elements, 0, target.length);
  // Children placed breadth-first with an explicit queue: no recursion over a deep nesting.
  const queue = [...roots];
  for (let q = 0; q < queue.length; q++) {
    const node = queue[q]!;
    node.children = place(node.element.children, node.start, node.end);
    queue.push(...node.children);
  }
  return write(target, roots, escape);
}

/** The target text with the placed elements' tags, written with a stack rather than by recursion. */
function write(target: string, roots: Placed[], escape: (text: string) => string): string {
  let out = '';
  let cursor = 0;
  const stack: { node: Placed; next: number }[] = [{ node: { children: roots } as Placed, next: 0 }];
  while (stack.length > 0) {
    const top = stack.at(-1)!;
    const child = top.node.children[top.next];
    if (child === undefined) {
      stack.pop();
      if (stack.length > 0) {
        out += escape(target.slice(cursor, top.node.end)) + top.node.element.close;
        cursor = top.node.end;
      }
      continue;
    }
    top.next++;
    out += escape(target.slice(cursor, child.start)) + child.element.open;
    cursor = child.start;
    stack.push({ node: child, next: 0 });
  }
  return out + escape(target.slice(cursor));
}

const isSpace = (c: string | undefined) => c === undefined || c === ' ';

/** The target range at the element's place in proportion, whole words when its source range is whole words. */
export function proportional(
  source: string,
  element: { readonly start: number; readonly end: number },
  target: string,
): [number, number] {
  const scale = source.length === 0 ? 0 : target.length / source.length;
  let start = Math.round(element.start * scale);
  let end = Math.max(start, Math.round(element.end * scale));
  // An empty element (a `<br/>` inside a run) snaps as a non-empty one does, so siblings keep their order.
  if (isSpace(source[element.start - 1])) {
    while (start > 0 && !isSpace(target[start - 1])) start--;
    while (start < target.length && isSpace(target[start])) start++;
  }
  if (element.end === element.start) return [start, start];
  if (isSpace(source[element.end])) {
    while (end < target.length && !isSpace(target[end])) end++;
    while (end > start && isSpace(target[end - 1])) end--;
  }
  return [start, Math.max(start, end)];
}

/**
 * Where a unit's formatting changes: offsets in its text (an inline element's edges, a run's start). A sentence no
 * edge falls strictly inside lies within one element or run, so its words need no aligning: linked whole
 * (`wholeLink`), it lands in that element's or run's place all the same, and only the sentences an edge cuts pay for
 * an alignment.
 */
export type Edges = readonly number[];

/** Per piece of `segments` (a unit cut into sentences), whether an edge falls strictly inside it. */
export function piecesCut(
  segments: { readonly pieces: readonly string[]; readonly separators: readonly string[] },
  edges: Edges,
): boolean[] {
  let start = 0;
  return segments.pieces.map((piece, i) => {
    start += segments.separators[i]!.length;
    const end = start + piece.length;
    const cut = edges.some((edge) => edge > start && edge < end);
    start = end;
    return cut;
  });
}

/** A sentence's translation linked whole to its source `piece` (one link, for a sentence no edge cuts). */
export function wholeLink(piece: string, translation: string): Links {
  const trimmed = translation.trim();
  if (trimmed === '' || piece === '') return [];
  const lead = translation.length - translation.trimStart().length;
  return [lead, lead + trimmed.length, 0, piece.length];
}

/**
 * One unit's translation and links from its sentences' (`segments` cut the unit into `pieces`, translated each to
 * `translations` with `links`), as `joined` (joinTranslations' result) holds them: each sentence's links shifted by
 * where its piece stands in the unit and its translation in `joined`. A sentence without links adds none.
 */
export function joinLinks(
  segments: { readonly pieces: readonly string[]; readonly separators: readonly string[] },
  translations: readonly string[],
  links: readonly (Links | undefined)[],
  joined: string,
): number[] {
  const out: number[] = [];
  let source = 0;
  let target = 0;
  segments.pieces.forEach((piece, i) => {
    source += segments.separators[i]!.length;
    const raw = translations[i] ?? '';
    const trimmed = raw.trim();
    const found = trimmed === '' ? -1 : joined.indexOf(trimmed, target);
    const sentence = links[i];
    if (found >= 0 && sentence !== undefined) {
      // The handler's links refer to the untrimmed translation.
      const shift = found - (raw.length - raw.trimStart().length);
      for (let k = 0; k + 3 < sentence.length; k += 4) {
        out.push(sentence[k]! + shift, sentence[k + 1]! + shift, sentence[k + 2]! + source, sentence[k + 3]! + source);
      }
    }
    if (found >= 0) target = found + trimmed.length;
    source += piece.length;
  });
  return out;
}
