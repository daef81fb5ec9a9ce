/**
 * @module model-server/text/markup/xml-spans — the units of an XML document or fragment (saxes, with source offsets):
 * its runs of text and inline elements, told inline by DeepL's rules (./markup.ts `MarkupOptions`), and each other
 * text node. Elements never translated are kept whole, their content not read.
 */
import { SaxesParser } from 'saxes';
import { ServeError } from '../../../common/errors.js';
import { type Location, MAX_INLINE_DEPTH, type RunNode, addRunSpans, type Span, textSpan } from './spans.js';

/** How XML elements are told inline or block (MarkupOptions). */
export interface XmlKinds {
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
export function xmlSpans(source: string, ignored: ReadonlySet<string>, fragment: boolean, kinds: XmlKinds): Span[] {
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
    addRunSpans(source, xmlRuns(node.childNodes, kinds), spans, inRuns);
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
