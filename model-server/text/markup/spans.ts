/**
 * @module model-server/text/markup/spans — what the HTML and XML readers (./html-spans.ts, ./xml-spans.ts) share: a
 * span of the source replaced by its translation, a text node's span, and a run's span (its text and inline
 * elements, collapsed to one unit whose tags are put back by the word alignment, ./inline-tags.ts).
 */
import { type InlineElement, type Links, placeInlineTags } from './inline-tags.js';

// HTML and XML whitespace: space, tab, CR, LF (and FF for HTML).
export const MARKUP_WHITESPACE = '\t\n\f\r ';
export const INNER_WHITESPACE = /[\t\n\f\r ]+/g;
// A span with no letter (punctuation, a number, an emoji between two tags) has nothing to translate.
export const WORDS = /\p{L}/u;

/** One span of the source replaced by a translation. */
export interface Span {
  start: number;
  end: number;
  /** The translatable text, collapsed and trimmed. */
  text: string;
  /** The inline elements over `text`, for a run of text and inline elements (none: a text node or an attribute). */
  elements?: InlineElement[];
  /** Writes the translation back as source text (escaping and any whitespace or quotes kept around it). */
  write(translation: string, links?: Links): string;
}

export const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A text span: the raw source's leading and trailing whitespace stay, the middle becomes the translation. */
export function textSpan(source: string, start: number, end: number, decoded: string): Span | undefined {
  const text = decoded.replace(INNER_WHITESPACE, ' ').trim();
  if (!WORDS.test(text)) return undefined;
  const raw = source.slice(start, end);
  let first = 0;
  while (first < raw.length && MARKUP_WHITESPACE.includes(raw[first]!)) first++;
  let last = raw.length;
  while (last > first && MARKUP_WHITESPACE.includes(raw[last - 1]!)) last--;
  return {
    start: start + first,
    end: start + last,
    text,
    write: (translation) => escapeText(translation.trim()),
  };
}

/** Deepest nesting of inline elements a run holds; a deeper one is left to the text nodes (hostile input). */
export const MAX_INLINE_DEPTH = 32;

export type Location = { startOffset: number; endOffset: number };

/** What a run is built from: parse5's nodes, and the XML tree's nodes (`XmlNode`), which take their shape. */
export interface RunNode {
  readonly nodeName: string;
  readonly value?: string;
  readonly sourceCodeLocation?: (Location & { startTag?: Location; endTag?: Location }) | null;
  readonly childNodes?: readonly RunNode[];
}

/** A run's span: its text (collapsed, trimmed) with its elements' ranges in it, and its tags written around it. */
export function runSpan(source: string, run: readonly RunNode[]): Span | undefined {
  let raw = '';
  const elements: InlineElement[] = [];
  // Elements' ranges in raw offsets for now, mapped to the collapsed text below. Walked with a stack: an entry
  // either visits a node or, once its children are done, ends an element.
  const all: InlineElement[] = [];
  const stack: ({ node: RunNode; into: InlineElement[] } | { ends: InlineElement })[] = run
    .map((node) => ({ node, into: elements }))
    .reverse();
  while (stack.length > 0) {
    const entry = stack.pop()!;
    if ('ends' in entry) {
      entry.ends.end = raw.length;
      continue;
    }
    const { node, into } = entry;
    if (node.nodeName === '#text') {
      raw += (node as { value: string }).value;
      continue;
    }
    const location = node.sourceCodeLocation!;
    const element: InlineElement = {
      start: raw.length,
      end: raw.length,
      open: source.slice(location.startTag!.startOffset, location.startTag!.endOffset),
      close: source.slice(location.endTag!.startOffset, location.endTag!.endOffset),
      children: [],
    };
    into.push(element);
    all.push(element);
    stack.push({ ends: element });
    const children = node.childNodes ?? [];
    for (let i = children.length - 1; i >= 0; i--) stack.push({ node: children[i]!, into: element.children });
  }
  // Collapse whitespace runs to one space and trim, keeping where each raw offset lands.
  const map = new Int32Array(raw.length + 1);
  let text = '';
  let space = false;
  for (let i = 0; i < raw.length; i++) {
    map[i] = text.length + (space && text.length > 0 ? 1 : 0);
    if (MARKUP_WHITESPACE.includes(raw[i]!)) {
      space = true;
      continue;
    }
    if (space && text.length > 0) text += ' ';
    space = false;
    text += raw[i];
  }
  map[raw.length] = text.length;
  if (!WORDS.test(text)) return undefined;
  for (const element of all) {
    element.start = Math.min(map[element.start]!, text.length);
    element.end = Math.max(element.start, Math.min(map[element.end]!, text.length));
    // A range that starts or ends on a collapsed space holds the words only.
    if (text[element.start] === ' ' && element.end > element.start) element.start++;
    if (text[element.end - 1] === ' ' && element.end > element.start) element.end--;
  }
  const first = run[0]!;
  const last = run.at(-1)!;
  const startOf = (node: RunNode) => node.sourceCodeLocation!.startOffset;
  const endOf = (node: RunNode) => node.sourceCodeLocation!.endOffset;
  let start = startOf(first);
  let end = endOf(last);
  // Whitespace at the run's ends, outside any element, stays as it stood.
  if (first.nodeName === '#text') while (start < end && MARKUP_WHITESPACE.includes(source[start]!)) start++;
  if (last.nodeName === '#text') while (end > start && MARKUP_WHITESPACE.includes(source[end - 1]!)) end--;
  return {
    start,
    end,
    text,
    elements,
    write: (translation, links) => placeInlineTags(text, elements, translation, links, escapeText),
  };
}

/** Each run's span added to `spans` (a run with no letter adds none), and its nodes to `inRuns`, not walked again. */
export function addRunSpans<N extends RunNode>(
  source: string,
  runs: readonly (readonly N[])[],
  spans: Span[],
  inRuns: Set<N>,
): void {
  for (const run of runs) {
    const span = runSpan(source, run);
    if (span === undefined) continue;
    spans.push(span);
    for (const member of run) inRuns.add(member);
  }
}
