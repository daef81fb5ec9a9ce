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
 * parse5 reshaped (misnested, unclosed) ends a run, so those stay whole and in place. XML has no vocabulary of its
 * own, so an element is inline by DeepL's rules: listed in `non_splitting_tags`, or (outline detection on, listed in
 * neither list) inside mixed content with text or inline content of its own. Elsewhere each text node is one unit, so
 * an element that is not inline stays around the translation of the words it covered.
 */
import { parse, parseFragment, type DefaultTreeAdapterMap } from 'parse5';
import { SaxesParser } from 'saxes';
import { ServeError } from '../../common/errors.js';
import { type Edges, type InlineElement, type Links, placeInlineTags } from './inline-tags.js';

export type MarkupFormat = 'html' | 'xml';

export interface MarkupOptions {
  /** Elements whose content is kept as it is (DeepL's `ignore_tags`), besides the format's own. */
  ignoreTags?: readonly string[];
  /**
   * XML only: the source may be a fragment — text outside any element, several top-level elements — as DeepL's
   * `tag_handling=xml` takes it. A source that is a whole document (an XML declaration, a doctype) parses as one.
   */
  fragment?: boolean;
  /** XML only: elements inside a sentence, part of their parent's run (DeepL's `non_splitting_tags`). */
  nonSplittingTags?: readonly string[];
  /** XML only: elements that always end a run (DeepL's `splitting_tags`). */
  splittingTags?: readonly string[];
  /**
   * XML only: an element in neither list is inline when it sits in mixed content (its parent holds text beside
   * elements) and holds text or inline elements itself; otherwise a block. False: only `nonSplittingTags` are
   * inline. Default true, as DeepL's `outline_detection`.
   */
  outlineDetection?: boolean;
}

/** Text units to translate, and the document rebuilt from their translations. */
export interface MarkupPlan {
  /** Each unit's text: whitespace runs collapsed to one space, trimmed, entities decoded. Has a letter. */
  readonly texts: readonly string[];
  /** Per unit, its inline elements' edges, whose placement wants the words around them aligned (none: empty). */
  readonly edges: readonly Edges[];
  /**
   * The source with each unit replaced by its translation (escaped), in the order of `texts`; `links`: per unit,
   * its translation's word alignment (inline-tags.ts `Links`), where there is one.
   */
  render(translations: readonly string[], links?: readonly (Links | undefined)[]): string;
}

/** Where `elements` and their descendants start and end. */
function elementEdges(elements: readonly InlineElement[]): number[] {
  const edges: number[] = [];
  const pending = [...elements];
  for (let element = pending.pop(); element !== undefined; element = pending.pop()) {
    edges.push(element.start, element.end);
    pending.push(...element.children);
  }
  return edges;
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
  const spans =
    format === 'html'
      ? htmlSpans(source, ignored)
      : xmlSpans(source, ignored, options.fragment === true, {
          nonSplitting: new Set(options.nonSplittingTags),
          splitting: new Set(options.splittingTags),
          outline: options.outlineDetection !== false,
        });
  spans.sort((a, b) => a.start - b.start);
  // parse5 reports every node at its own place in the source, so spans never overlap; one that did would be
  // written twice, so it is kept as it is instead.
  const kept = spans.filter((span, i) => i === 0 || span.start >= spans[i - 1]!.end);
  return {
    texts: kept.map((span) => span.text),
    edges: kept.map((span) => elementEdges(span.elements ?? [])),
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

/** What a run is built from: parse5's nodes, and the XML tree's nodes (`XmlNode`), which take their shape. */
interface RunNode {
  readonly nodeName: string;
  readonly value?: string;
  readonly sourceCodeLocation?: (Location & { startTag?: Location; endTag?: Location }) | null;
  readonly childNodes?: readonly RunNode[];
}

/** A run's span: its text (collapsed, trimmed) with its elements' ranges in it, and its tags written around it. */
function runSpan(source: string, run: readonly RunNode[]): Span | undefined {
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

/** How XML elements are told inline or block (MarkupOptions). */
interface XmlKinds {
  nonSplitting: ReadonlySet<string>;
  splitting: ReadonlySet<string>;
  outline: boolean;
}

/**
 * A node of the XML tree, shaped as parse5's so runs are built alike: `#text`, `#other` (a comment, CDATA section,
 * processing instruction or declaration: it ends a run and is kept), `#root`, or an element by its qualified name.
 */
interface XmlNode extends RunNode {
  readonly nodeName: string;
  readonly value?: string;
  readonly sourceCodeLocation: Location & { startTag?: Location; endTag?: Location };
  readonly childNodes: XmlNode[];
  /** An element never translated (ignore_tags, `translate="no"`): kept whole and in place, its content not read. */
  readonly kept?: boolean;
}

/**
 * The text spans of an XML source. A fragment is parsed as one (saxes' fragment mode refuses an XML declaration or a
 * doctype, which only a document has); when that fails the source is tried as a document, and when both fail the
 * error reported is the one found further into the source, the one that says what is wrong with it.
 */
function xmlSpans(source: string, ignored: ReadonlySet<string>, fragment: boolean, kinds: XmlKinds): Span[] {
  let root = parseXml(source, ignored, fragment);
  if (fragment && root instanceof XmlError) {
    const asDocument = parseXml(source, ignored, false);
    root = asDocument instanceof XmlError && asDocument.at <= root.at ? root : asDocument;
  }
  if (root instanceof XmlError) orThrow(root);
  return xmlTreeSpans(source, root as XmlNode, kinds);
}

/** Where saxes stopped on a source that is not well-formed, and what it said. */
class XmlError {
  constructor(
    readonly at: number,
    readonly error: Error,
  ) {}
}

function orThrow(failure: XmlError): never {
  const [, line, column, what] = /^(\d+):(\d+): (.*)$/.exec(failure.error.message) ?? [];
  const where = line === undefined ? '' : ` at line ${line}, column ${column}`;
  throw new ServeError('BAD_REQUEST', `The XML is not well-formed${where}: ${what ?? failure.error.message}`);
}

/** The XML tree with source offsets; the content of a kept element is not in it. */
function parseXml(source: string, ignored: ReadonlySet<string>, fragment: boolean): XmlNode | XmlError {
  const parser = new SaxesParser({ xmlns: false, fragment });
  const root: XmlNode = { nodeName: '#root', sourceCodeLocation: { startOffset: 0, endOffset: 0 }, childNodes: [] };
  const open: XmlNode[] = [root];
  // Depth inside a kept element (the element itself is 1), and where the last event ended: text starts there.
  let keptDepth = 0;
  let keptElement: XmlNode | undefined;
  let eventEnd = 0;
  let failure: XmlError | undefined;
  const add = (node: XmlNode) => {
    if (keptDepth === 0) open.at(-1)!.childNodes.push(node);
  };
  // saxes reports a tag once past its `>`; `<` stands in no attribute value, so the last one before is its start.
  const tagAt = () => ({ startOffset: source.lastIndexOf('<', parser.position - 1), endOffset: parser.position });
  // saxes reports a comment on its closing `--`, before the `>`; `past` is what it has left to read.
  const other = (past: number) => () => {
    const end = parser.position + past;
    add({ nodeName: '#other', sourceCodeLocation: { startOffset: eventEnd, endOffset: end }, childNodes: [] });
    eventEnd = end;
  };
  parser.on('error', (error) => {
    failure ??= new XmlError(parser.position, error);
  });
  parser.on('text', (text) => {
    // saxes reports text when it reaches the next `<`, already consumed; positions count UTF-16 units.
    const end = source[parser.position - 1] === '<' ? parser.position - 1 : parser.position;
    add({
      nodeName: '#text',
      value: text,
      sourceCodeLocation: { startOffset: eventEnd, endOffset: end },
      childNodes: [],
    });
    eventEnd = end;
  });
  parser.on('opentag', (tag) => {
    const startTag = tagAt();
    const kept = keptDepth === 0 && (ignored.has(tag.name) || tag.attributes['translate'] === 'no');
    const element: XmlNode = {
      nodeName: tag.name,
      sourceCodeLocation: { startOffset: startTag.startOffset, endOffset: startTag.endOffset, startTag },
      childNodes: [],
      ...(kept ? { kept } : {}),
    };
    add(element);
    if (kept) keptElement = element;
    if (kept || keptDepth > 0) keptDepth++;
    else open.push(element);
    eventEnd = parser.position;
  });
  parser.on('closetag', (tag) => {
    if (keptDepth > 0) {
      keptDepth--;
      if (keptDepth === 0) keptElement!.sourceCodeLocation.endOffset = parser.position;
    } else if (open.length > 1) {
      const location = open.pop()!.sourceCodeLocation;
      location.endOffset = parser.position;
      // A self-closing element's end tag is empty, where its start tag ends.
      location.endTag = tag.isSelfClosing ? { startOffset: parser.position, endOffset: parser.position } : tagAt();
    }
    eventEnd = parser.position;
  });
  for (const event of ['xmldecl', 'doctype', 'processinginstruction', 'cdata'] as const) parser.on(event, other(0));
  parser.on('comment', other(1));
  try {
    parser.write(source).close();
  } catch (error) {
    failure ??= new XmlError(parser.position, error as Error);
  }
  return failure ?? root;
}

/** The spans of the XML tree: its runs of text and inline elements, and each other text node. */
function xmlTreeSpans(source: string, root: XmlNode, kinds: XmlKinds): Span[] {
  const spans: Span[] = [];
  // Walked with a stack of its own, not by recursion, as the HTML tree is.
  const pending: XmlNode[] = [root];
  const inRuns = new Set<XmlNode>();
  while (pending.length > 0) {
    const node = pending.pop()!;
    if (inRuns.has(node) || node.kept || node.nodeName === '#other') continue;
    if (node.nodeName === '#text') {
      const { startOffset, endOffset } = node.sourceCodeLocation;
      const span = textSpan(source, startOffset, endOffset, node.value!);
      if (span) spans.push(span);
      continue;
    }
    for (const run of xmlRuns(node.childNodes, kinds)) {
      const span = runSpan(source, run);
      if (span === undefined) continue;
      spans.push(span);
      for (const member of run) inRuns.add(member);
    }
    for (let i = node.childNodes.length - 1; i >= 0; i--) pending.push(node.childNodes[i]!);
  }
  return spans;
}

const NOT_WHITESPACE = /[^\t\n\r ]/;
const isText = (node: XmlNode) => node.nodeName === '#text';
const isElement = (node: XmlNode) => !node.nodeName.startsWith('#');

/**
 * The runs among `children` to translate whole: consecutive text nodes and inline elements, next to each other in
 * the source, with at least one element. Siblings are in mixed content when one of them is text with a non-space.
 */
function xmlRuns(children: readonly XmlNode[], kinds: XmlKinds): XmlNode[][] {
  const mixed = children.some((child) => isText(child) && NOT_WHITESPACE.test(child.value!));
  const runs: XmlNode[][] = [];
  let run: XmlNode[] = [];
  let end = -1;
  const close = () => {
    if (run.some(isElement)) runs.push(run);
    run = [];
  };
  for (const child of children) {
    if (!isText(child) && !xmlInline(child, mixed, kinds, 0)) {
      close();
      continue;
    }
    if (run.length > 0 && child.sourceCodeLocation.startOffset !== end) close();
    run.push(child);
    end = child.sourceCodeLocation.endOffset;
  }
  close();
  return runs;
}

/**
 * Whether an element sits in its parent's run: listed non-splitting, or (outline detection on, listed in neither
 * list) in mixed content and not structural; and everything inside it is text or inline too. Inside an inline
 * element the content counts as mixed: it is part of a sentence.
 */
function xmlInline(node: XmlNode, mixed: boolean, kinds: XmlKinds, depth: number): boolean {
  if (!isElement(node) || node.kept || depth >= MAX_INLINE_DEPTH || kinds.splitting.has(node.nodeName)) return false;
  if (!kinds.nonSplitting.has(node.nodeName) && !(kinds.outline && mixed && !structural(node))) return false;
  return node.childNodes.every((child) => isText(child) || xmlInline(child, true, kinds, depth + 1));
}

/**
 * An element that holds elements and only whitespace beside them: a list, a record, a section. One that wraps a
 * single element and nothing else (`<b><i>x</i></b>`) is not: it takes its child's kind.
 */
function structural(node: XmlNode): boolean {
  let elements = 0;
  let whitespace = false;
  for (const child of node.childNodes) {
    if (isText(child)) {
      if (NOT_WHITESPACE.test(child.value!)) return false;
      whitespace = true;
    } else if (isElement(child)) elements++;
  }
  return elements > 1 || (elements === 1 && whitespace);
}
