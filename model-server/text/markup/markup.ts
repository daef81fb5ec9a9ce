/**
 * @module model-server/text/markup/markup — which parts of an HTML or XML document are text to translate, and the
 * document rebuilt around their translations.
 *
 * The document is parsed by a spec-compliant parser (parse5 for HTML, saxes for XML) with source offsets, and the
 * output is the input with only the translated text spans (and allowed attribute values) replaced: every tag,
 * attribute, entity outside translated text, comment, doctype, CDATA section and byte of whitespace between
 * elements is the input's own. So the output parses to the same element tree as the input.
 *
 * In HTML, a block's run of text and inline elements (`Click <b>here</b> to continue.`) is one unit, translated
 * sentence by sentence as plain text, and each inline element is put back around the target words it aligns with
 * (./inline-tags.ts, from the word alignment the worker answers for units that ask). A block element, a `<br>`, an
 * element never translated (`code`, `translate="no"`, ignore_tags), a comment, or an inline element whose markup
 * parse5 reshaped (misnested, unclosed) ends a run, so those stay whole and in place. XML has no vocabulary of its
 * own, so an element is inline by DeepL's rules: listed in `non_splitting_tags`, or (outline detection on, listed in
 * neither list) inside mixed content with text or inline content of its own. Elsewhere each text node is one unit, so
 * an element that is not inline stays around the translation of the words it covered. The HTML tree is read in
 * ./html-spans.ts, the XML tree in ./xml-spans.ts, and both build their units with ./spans.ts.
 */
import { htmlSpans } from './html-spans.js';
import type { Edges, InlineElement, Links } from './inline-tags.js';
import { xmlSpans } from './xml-spans.js';

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
