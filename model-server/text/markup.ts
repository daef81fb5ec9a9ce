/**
 * @module model-server/text/markup — which parts of an HTML or XML document are text to translate, and the
 * document rebuilt around their translations.
 *
 * The document is parsed by a spec-compliant parser (parse5 for HTML, saxes for XML) with source offsets, and the
 * output is the input with only the translated text spans (and allowed attribute values) replaced: every tag,
 * attribute, entity outside translated text, comment, doctype, CDATA section and byte of whitespace between
 * elements is the input's own. So the output parses to the same element tree as the input.
 *
 * In HTML, a block's run of text and inline elements (`Click <b>here</b> to continue.`) is one unit, translated
 * sentence by sentence as plain text, and each inline element is put back around the target words it aligns with
 * (inline-tags.ts, from the word alignment the worker answers for units that ask). A block element, a `<br>`, an
 * element never translated (`code`, `translate="no"`, ignore_tags), a comment, or an inline element whose markup
 * parse5 reshaped (misnested, unclosed) ends a run, so those stay whole and in place. Elsewhere, and in XML, each
 * text node is one unit, so an inline element stays around the translation of the words it covered.
 */
import { parse, parseFragment, type DefaultTreeAdapterMap } from 'parse5';
import { SaxesParser } from 'saxes';
import { ServeError } from '../../common/errors.js';
import { type InlineElement, type Links, placeInlineTags } from './inline-tags.js';

export type MarkupFormat = 'html' | 'xml';

export interface MarkupOptions {
  /** Elements whose content is kept as it is (DeepL's `ignore_tags`), besides the format's own. */
  ignoreTags?: readonly string[];
  /**
   * XML only: the source may be a fragment — text outside any element, several top-level elements — as DeepL's
   * `tag_handling=xml` takes it. A source that is a whole document (an XML declaration, a doctype) parses as one.
   */
  fragment?: boolean;
}

/** Text units to translate, and the document rebuilt from their translations. */
export interface MarkupPlan {
  /** Each unit's text: whitespace runs collapsed to one space, trimmed, entities decoded. Has a letter. */
  readonly texts: readonly string[];
  /** Per unit, whether it holds inline elements, whose placement wants the translation's word alignment. */
  readonly aligned: readonly boolean[];
  /**
   * The source with each unit replaced by its translation (escaped), in the order of `texts`; `links`: per unit,
   * its translation's word alignment (inline-tags.ts `Links`), where there is one.
   */
  render(translations: readonly string[], links?: readonly (Links | undefined)[]): string;
}

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

// HTML and XML whitespace: space, tab, CR, LF (and FF for HTML).
const MARKUP_WHITESPACE = '\t\n\f\r ';
const INNER_WHITESPACE = /[\t\n\f\r ]+/g;
// A span with no letter (punctuation, a number, an emoji between two tags) has nothing to translate.
const WORDS = /\p{L}/u;

/** One span of the source replaced by a translation. */
interface Span {
  start: number;
  end: number;
  /** The translatable text, collapsed and trimmed. */
  text: string;
  /** The inline elements over `text`, for a run of text and inline elements (none: a text node or an attribute). */
  elements?: InlineElement[];
  /** Writes the translation back as source text (escaping and any whitespace or quotes kept around it). */
  write(translation: string, links?: Links): string;
}

/**
 * Plan the translation of an HTML or XML document.
 * @throws ServeError BAD_REQUEST for XML that is not well-formed, naming the line and column.
 */
export function planMarkup(source: string, format: MarkupFormat, options: MarkupOptions = {}): MarkupPlan {
  const ignored = new Set((options.ignoreTags ?? []).map((tag) => (format === 'html' ? tag.toLowerCase() : tag)));
  const spans = format === 'html' ? htmlSpans(source, ignored) : xmlSpans(source, ignored, options.fragment === true);
  spans.sort((a, b) => a.start - b.start);
  // parse5 reports every node at its own place in the source, so spans never overlap; one that did would be
  // written twice, so it is kept as it is instead.
  const kept = spans.filter((span, i) => i === 0 || span.start >= spans[i - 1]!.end);
  return {
    texts: kept.map((span) => span.text),
    aligned: kept.map((span) => (span.elements?.length ?? 0) > 0),
    render(translations, links) {
      if (translations.length !== kept.length) {
        throw new RangeError(`planMarkup: ${translations.length} translations for ${kept.length} units`);
      }
      let out = '';
      let at = 0;
      kept.forEach((span, i) => {
        out += source.slice(at, span.start) + span.write(translations[i]!, links?.[i]);
        at = span.end;
      });
      return out + source.slice(at);
    },
  };
}

const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A text span: the raw source's leading and trailing whitespace stay, the middle becomes the translation. */
function textSpan(source: string, start: number, end: number, decoded: string): Span | undefined {
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

function htmlSpans(source: string, ignored: ReadonlySet<string>): Span[] {
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
    for (const run of inlineRuns(source, node.childNodes, ignored)) {
      const span = runSpan(source, run);
      if (span === undefined) continue;
      spans.push(span);
      for (const member of run) inRuns.add(member);
    }
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
/** Deepest nesting of inline elements a run holds; a deeper one is left to the text nodes (hostile input). */
const MAX_INLINE_DEPTH = 32;

type Location = { startOffset: number; endOffset: number };

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

/** A run's span: its text (collapsed, trimmed) with its elements' ranges in it, and its tags written around it. */
function runSpan(source: string, run: readonly Node[]): Span | undefined {
  let raw = '';
  const elements: InlineElement[] = [];
  // Elements' ranges in raw offsets for now, mapped to the collapsed text below. Walked with a stack: an entry
  // either visits a node or, once its children are done, ends an element.
  const all: InlineElement[] = [];
  const stack: ({ node: Node; into: InlineElement[] } | { ends: InlineElement })[] = run
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
    const location = (node as Element).sourceCodeLocation!;
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
    const children = (node as Element).childNodes;
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
  const startOf = (node: Node) => (node as Element).sourceCodeLocation!.startOffset;
  const endOf = (node: Node) => (node as Element).sourceCodeLocation!.endOffset;
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

/**
 * The text spans of an XML source. A fragment is parsed as one (saxes' fragment mode refuses an XML declaration or a
 * doctype, which only a document has); when that fails the source is tried as a document, and when both fail the
 * error reported is the one found further into the source, the one that says what is wrong with it.
 */
function xmlSpans(source: string, ignored: ReadonlySet<string>, fragment: boolean): Span[] {
  const first = parseXml(source, ignored, fragment);
  if (!fragment || !(first instanceof XmlError)) return orThrow(first);
  const asDocument = parseXml(source, ignored, false);
  if (!(asDocument instanceof XmlError)) return asDocument;
  return orThrow(asDocument.at > first.at ? asDocument : first);
}

/** Where saxes stopped on a source that is not well-formed, and what it said. */
class XmlError {
  constructor(
    readonly at: number,
    readonly error: Error,
  ) {}
}

function orThrow(spans: Span[] | XmlError): Span[] {
  if (!(spans instanceof XmlError)) return spans;
  const [, line, column, what] = /^(\d+):(\d+): (.*)$/.exec(spans.error.message) ?? [];
  const where = line === undefined ? '' : ` at line ${line}, column ${column}`;
  throw new ServeError('BAD_REQUEST', `The XML is not well-formed${where}: ${what ?? spans.error.message}`);
}

function parseXml(source: string, ignored: ReadonlySet<string>, fragment: boolean): Span[] | XmlError {
  const parser = new SaxesParser({ xmlns: false, fragment });
  const spans: Span[] = [];
  // Depth inside an ignored element, and where the last event ended: text starts there.
  let ignoredDepth = 0;
  let eventEnd = 0;
  let failure: XmlError | undefined;
  const markEnd = () => {
    eventEnd = parser.position;
  };
  parser.on('error', (error) => {
    failure ??= new XmlError(parser.position, error);
  });
  parser.on('text', (text) => {
    // saxes reports text when it reaches the next `<`, already consumed; positions count UTF-16 units.
    const end = source[parser.position - 1] === '<' ? parser.position - 1 : parser.position;
    if (ignoredDepth === 0) {
      const span = textSpan(source, eventEnd, end, text);
      if (span) spans.push(span);
    }
    eventEnd = end;
  });
  parser.on('opentag', (tag) => {
    if (ignoredDepth > 0 || ignored.has(tag.name) || tag.attributes['translate'] === 'no') ignoredDepth++;
    if (tag.isSelfClosing && ignoredDepth > 0) ignoredDepth--;
    markEnd();
  });
  parser.on('closetag', (tag) => {
    if (!tag.isSelfClosing && ignoredDepth > 0) ignoredDepth--;
    markEnd();
  });
  for (const event of ['xmldecl', 'doctype', 'processinginstruction', 'comment', 'cdata'] as const) {
    parser.on(event, markEnd);
  }
  try {
    parser.write(source).close();
  } catch (error) {
    failure ??= new XmlError(parser.position, error as Error);
  }
  return failure ?? spans;
}
