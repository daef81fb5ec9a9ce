/**
 * @module model-server/text/markup/html-spans — the units of an HTML document (parse5, with source offsets): each
 * block's runs of text and inline elements, the text nodes outside them, and the attributes people read.
 */
import { parse, parseFragment, type DefaultTreeAdapterMap } from 'parse5';
import {
  escapeText,
  INNER_WHITESPACE,
  type Location,
  MAX_INLINE_DEPTH,
  addRunSpans,
  type Span,
  textSpan,
  WORDS,
} from './spans.js';

/** HTML elements whose content is never translated: code, scripts, styles, form values, foreign content. */
const HTML_UNTRANSLATED = new Set([
  'script',
  'style',
  'code',
  'pre',
  'kbd',
  'samp',
  'var',
  'textarea',
  'noscript',
  'template',
  'svg',
  'math',
]);

/** HTML attributes people read, translated where they stand. */
export const TRANSLATED_ATTRIBUTES: readonly string[] = ['alt', 'title', 'placeholder', 'aria-label'];

type Node = DefaultTreeAdapterMap['node'];
type Element = DefaultTreeAdapterMap['element'];

const DOCUMENT_START = /^<(?:!doctype|html[\s>]|head[\s>]|body[\s>])/i;
const SPACE = /\s/;

/**
 * Whether `source` is a whole document: a doctype, `<html>`, `<head>` or `<body>` first, after whitespace and
 * comments. Scanned, because a pattern such as `^\s*(?:<!--[\s\S]*?-->\s*)*<…` backtracks exponentially over a run
 * of comments: 32 `<!---->` took 34 s.
 */
function isFullDocument(source: string): boolean {
  let at = 0;
  for (;;) {
    while (at < source.length && SPACE.test(source[at]!)) at++;
    if (!source.startsWith('<!--', at)) break;
    const end = source.indexOf('-->', at + 4);
    if (end < 0) return false;
    at = end + 3;
  }
  return DOCUMENT_START.test(source.slice(at, at + '<!doctype'.length));
}

// A tag, end tag, comment or declaration opens at `<` followed by one of these; any other `<` is text.
const MARKUP_OPEN = /<[A-Za-z!/?]/g;
const LINE_BREAK = /\r\n?/g;

/**
 * The source runs that make up a text node, each with its text. Usually its whole span; but parse5 joins text that
 * lands next to an earlier text node into it and stretches the span over whatever lay between: a tag it ignores
 * (`a</x>b`), or a table's rows, for text foster-parented out of a table (`<table>Stray<tr><td>Cell</td></tr>More`
 * gives one node "StrayMore"). Replacing that span would delete the markup, so the runs between its tags are the
 * units when they spell the node's text exactly (no entity to decode), and otherwise there is none: the node is kept
 * as it is. A `<` that opens nothing is text, as is `<b>` inside a `<title>` (the span is then the node's text).
 */
function textRuns(source: string, at: { startOffset: number; endOffset: number }, value: string) {
  const { startOffset: start, endOffset: end } = at;
  const raw = source.slice(start, end);
  if (raw.search(MARKUP_OPEN) < 0 || raw.replace(LINE_BREAK, '\n') === value) return [[start, end, value] as const];
  const runs: (readonly [number, number, string])[] = [];
  for (let from = 0; from < raw.length;) {
    MARKUP_OPEN.lastIndex = from;
    const open = MARKUP_OPEN.exec(raw)?.index ?? raw.length;
    runs.push([start + from, start + open, raw.slice(from, open).replace(LINE_BREAK, '\n')]);
    const close = open < raw.length ? raw.indexOf('>', open) : raw.length;
    if (close < 0) return [];
    from = close + 1;
  }
  const spelled = runs.every(([, , text]) => !text.includes('&')) && runs.map(([, , text]) => text).join('') === value;
  return spelled ? runs : [];
}

export function htmlSpans(source: string, ignored: ReadonlySet<string>): Span[] {
  const root = isFullDocument(source)
    ? parse(source, { sourceCodeLocationInfo: true })
    : parseFragment(source, { sourceCodeLocationInfo: true });
  const spans: Span[] = [];
  // Walked with a stack of its own, not by recursion: a body may nest elements deeper than the call stack goes.
  const pending: Node[] = [root];
  const inRuns = new Set<Node>();
  while (pending.length > 0) {
    const node = pending.pop()!;
    if (inRuns.has(node)) continue;
    if (node.nodeName === '#text') {
      const location = (node as DefaultTreeAdapterMap['textNode']).sourceCodeLocation;
      if (location) {
        for (const [start, end, text] of textRuns(source, location, (node as { value: string }).value)) {
          const span = textSpan(source, start, end, text);
          if (span) spans.push(span);
        }
      }
      continue;
    }
    if ('tagName' in node) {
      const element = node as Element;
      if (!translatable(element, ignored)) continue;
      for (const attribute of element.attrs) {
        const location = element.sourceCodeLocation?.attrs?.[attribute.name];
        if (TRANSLATED_ATTRIBUTES.includes(attribute.name) && location) {
          const span = attributeSpan(source, location.startOffset, location.endOffset, attribute.value);
          if (span) spans.push(span);
        }
      }
    }
    if (!('childNodes' in node)) continue;
    addRunSpans(source, inlineRuns(source, node.childNodes, ignored), spans, inRuns);
    for (let i = node.childNodes.length - 1; i >= 0; i--) pending.push(node.childNodes[i]!);
  }
  return spans;
}

/** Inline formatting elements: moved with the words they wrap, inside one sentence. */
const INLINE_ELEMENTS = new Set([
  'a',
  'abbr',
  'b',
  'bdi',
  'bdo',
  'big',
  'cite',
  'del',
  'dfn',
  'em',
  'font',
  'i',
  'ins',
  'mark',
  'q',
  's',
  'small',
  'span',
  'strike',
  'strong',
  'sub',
  'sup',
  'time',
  'tt',
  'u',
]);

/** A node's place in the source when it can sit in a run: text whose span is its own, or a pure inline element. */
function runLocation(source: string, node: Node, ignored: ReadonlySet<string>, depth: number): Location | undefined {
  if (node.nodeName === '#text') {
    const location = (node as DefaultTreeAdapterMap['textNode']).sourceCodeLocation;
    if (!location) return undefined;
    const runs = textRuns(source, location, (node as { value: string }).value);
    return runs.length === 1 && runs[0]![0] === location.startOffset && runs[0]![1] === location.endOffset
      ? location
      : undefined;
  }
  if (!('tagName' in node) || depth >= MAX_INLINE_DEPTH) return undefined;
  const element = node as Element;
  const location = element.sourceCodeLocation;
  if (!INLINE_ELEMENTS.has(element.tagName) || !translatable(element, ignored) || !location?.startTag) return undefined;
  if (!location.endTag || element.attrs.some((a) => TRANSLATED_ATTRIBUTES.includes(a.name))) return undefined;
  // The children must fill the element's source exactly: parse5 reshapes misnested markup, and a run is only
  // rebuilt from tags that stood where the tree says.
  let at = location.startTag.endOffset;
  for (const child of element.childNodes) {
    const inner = runLocation(source, child, ignored, depth + 1);
    if (inner === undefined || inner.startOffset !== at) return undefined;
    at = inner.endOffset;
  }
  return at === location.endTag.startOffset ? location : undefined;
}

/**
 * The runs among `children` to translate whole: consecutive text nodes and pure inline elements, next to each other
 * in the source, with at least one element.
 */
function inlineRuns(source: string, children: readonly Node[], ignored: ReadonlySet<string>): Node[][] {
  const runs: Node[][] = [];
  let run: Node[] = [];
  let end = -1;
  const close = () => {
    if (run.some((member) => member.nodeName !== '#text')) runs.push(run);
    run = [];
  };
  for (const child of children) {
    const location = runLocation(source, child, ignored, 0);
    if (location === undefined) {
      close();
      continue;
    }
    if (run.length > 0 && location.startOffset !== end) close();
    run.push(child);
    end = location.endOffset;
  }
  close();
  return runs;
}

function translatable(element: Element, ignored: ReadonlySet<string>): boolean {
  if (HTML_UNTRANSLATED.has(element.tagName) || ignored.has(element.tagName)) return false;
  for (const { name, value } of element.attrs) {
    if (name === 'translate' && value.trim().toLowerCase() === 'no') return false;
    if (name === 'class' && value.split(/[\t\n\f\r ]+/).includes('notranslate')) return false;
  }
  return true;
}

/** An attribute `name="value"` (any quoting) whose value becomes the translation, double-quoted. */
function attributeSpan(source: string, start: number, end: number, value: string): Span | undefined {
  const text = value.replace(INNER_WHITESPACE, ' ').trim();
  if (!WORDS.test(text)) return undefined;
  const raw = source.slice(start, end);
  const equals = raw.indexOf('=');
  if (equals < 0) return undefined;
  return {
    start,
    end,
    text,
    write: (translation) =>
      `${raw.slice(0, equals)}="${translation.trim().replace(/&/g, '&amp;').replace(/"/g, '&quot;')}"`,
  };
}
