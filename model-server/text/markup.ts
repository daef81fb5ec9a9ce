/**
 * @module model-server/text/markup — which parts of an HTML or XML document are text to translate, and the
 * document rebuilt around their translations.
 *
 * The document is parsed by a spec-compliant parser (parse5 for HTML, saxes for XML) with source offsets, and the
 * output is the input with only the translated text spans (and allowed attribute values) replaced: every tag,
 * attribute, entity outside translated text, comment, doctype, CDATA section and byte of whitespace between
 * elements is the input's own. So the output parses to the same element tree as the input.
 *
 * Each text node is one unit (then cut into sentences like any document), so an inline element (`<b>`, `<a>`…)
 * stays around the translation of the words it covered and a block element is a sentence boundary. The price is
 * that a sentence broken by an inline element is translated in pieces: there is no word alignment to move a tag
 * inside one translated sentence.
 */
import { parse, parseFragment, type DefaultTreeAdapterMap } from 'parse5';
import { SaxesParser } from 'saxes';
import { ServeError } from '../../common/errors.js';

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
  /** The source with each unit replaced by its translation (escaped), in the order of `texts`. */
  render(translations: readonly string[]): string;
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
  /** Writes the translation back as source text (escaping and any whitespace or quotes kept around it). */
  write(translation: string): string;
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
    render(translations) {
      if (translations.length !== kept.length) {
        throw new RangeError(`planMarkup: ${translations.length} translations for ${kept.length} units`);
      }
      let out = '';
      let at = 0;
      kept.forEach((span, i) => {
        out += source.slice(at, span.start) + span.write(translations[i]!);
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
  while (pending.length > 0) {
    const node = pending.pop()!;
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
    if ('childNodes' in node) for (let i = node.childNodes.length - 1; i >= 0; i--) pending.push(node.childNodes[i]!);
  }
  return spans;
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
