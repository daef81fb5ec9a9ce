/**
 * @module model-server/text/office/paragraphs — the text units of an Office XML part (a Word, slide or spreadsheet
 * part, ODF content, an EPUB's NCX table of contents) and the part rebuilt from their translations, read with saxes
 * (namespaces resolved, so a producer's prefixes do not matter).
 *
 * A unit is a paragraph's text (`w:p`, `a:p`, a shared string's `si`, `text:p`…) between its breaks (tabs, line
 * breaks, fields, a nested paragraph such as a text box's): the text of every run in it joined, so a sentence that
 * Word cut into runs at each change of formatting, spell-check mark or revision is translated whole. With the
 * translation's word alignment, each run gets the target words its source words align with (./run-placement.ts), in
 * run order; without one, the translation goes into the first run that held text and the unit's other runs are
 * emptied. Either way every run keeps its element and its properties, and none is dropped.
 *
 * Only the text between a run's tags changes; every other byte of the part is the source's own. A DOCTYPE (Office
 * parts never have one; an NCX's names its DTD) is refused when it declares anything, so no entity is ever expanded
 * or fetched; an entity saxes does not know is a 400.
 */
import { SaxesParser, type SaxesTagNS } from 'saxes';
import { ServeError } from '../../../common/errors.js';
import type { Edges, Links } from '../markup/inline-tags.js';
import { placeRuns } from './run-placement.js';

/** What each element of a dialect is to the planner, by `{namespace URI}local name`. */
export interface Dialect {
  /** Elements that hold one paragraph. */
  paragraphs: ReadonlySet<string>;
  /** Elements whose text is the paragraph's text (a run's text element, or the paragraph itself in ODF). */
  holders: ReadonlySet<string>;
  /** Elements that end a unit and start another (a tab, a line break). */
  breaks: ReadonlySet<string>;
  /** Elements kept whole and untranslated (a field, phonetic guides); each also ends a unit. */
  kept: ReadonlySet<string>;
  /** Elements that read as one space inside a unit (ODF's `text:s`). */
  spaces: ReadonlySet<string>;
  /** A DOCTYPE without declarations is allowed (NCX); Office parts have none. */
  allowDoctype: boolean;
  /**
   * Word's complex field marks (`w:fldChar`): the element, and its attribute whose value `begin` or `end` opens or
   * closes a field; what lies between (its code and its shown result) is kept, and ends a unit.
   */
  fieldMarks?: { element: string; attribute: string };
}

/** Text units to translate, and the part rebuilt from their translations (model-server/text/markup/markup.ts's shape). */
export interface PartPlan {
  /** Each unit's text, trimmed; each has a letter. */
  readonly texts: readonly string[];
  /** Per unit, where its runs after the first start in its text: the words around them want aligning. */
  readonly edges: readonly Edges[];
  /**
   * The part with each unit's runs holding its translation, in the order of `texts`; `links` (per unit, absent:
   * none) are each translation's word alignment to its unit's text, as the model server answers `alignment`.
   */
  render(translations: readonly string[], links?: readonly (Links | undefined)[]): string;
}

/** One text node inside a holder: its source span, decoded text, and where it starts in the unit's parts. */
interface Run {
  start: number;
  end: number;
  text: string;
  at: number;
}

const WORDS = /\p{L}/u;
const escapeText = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

const isSpace = (c: string) => c === ' ' || c === '\t' || c === '\n' || c === '\r';
function leading(text: string): string {
  let i = 0;
  while (i < text.length && isSpace(text[i]!)) i++;
  return text.slice(0, i);
}
function trailing(text: string): string {
  let i = text.length;
  while (i > 0 && isSpace(text[i - 1]!)) i--;
  return text.slice(i);
}

/** A unit's runs, and the replacement of each run's span once translated. */
class Unit {
  readonly runs: Run[] = [];
  /** Spaces read from `spaces` elements, where they fall in the text. */
  readonly parts: string[] = [];

  text(): string {
    return this.parts.join('').trim();
  }

  /** The runs from the first with text to the last with text: those the translation is placed in. */
  placed(): Run[] {
    const filled = this.runs.filter((run) => run.text.trim() !== '');
    return this.runs.slice(this.runs.indexOf(filled[0]!), this.runs.indexOf(filled.at(-1)!) + 1);
  }

  /** Where each placed run after the first starts in `text()`. */
  edges(): number[] {
    const joined = this.parts.join('');
    const lead = joined.length - joined.trimStart().length;
    const length = this.text().length;
    return this.placed()
      .slice(1)
      .map((run) => Math.min(Math.max(run.at - lead, 0), length));
  }

  /** Characters in `parts` so far. */
  length = 0;

  add(part: string, run?: Omit<Run, 'text' | 'at'>): void {
    if (run) this.runs.push({ ...run, text: part, at: this.length });
    this.parts.push(part);
    this.length += part.length;
  }

  /**
   * The runs from the first with text to the last with text rewritten: the first keeps its own leading whitespace,
   * the last its trailing whitespace; whitespace-only runs around them are kept. With `links`, each gets the target
   * words its source words align with; without, the first holds the whole translation and the others are emptied.
   */
  spans(translation: string, links: Links | undefined): Run[] {
    const placed = this.placed();
    const target = translation.trim();
    let cuts: number[];
    // No link at all (a model whose cross-attention cannot be read answers none): nothing to place runs by.
    if (links === undefined || links.length === 0) cuts = [0, ...placed.map(() => target.length)];
    else {
      const joined = this.parts.join('');
      const lead = joined.length - joined.trimStart().length;
      const source = this.text();
      // The links refer to the translation as answered, before its surrounding whitespace was trimmed here.
      const shift = translation.length - translation.trimStart().length;
      const shifted = links.map((value, k) => (k % 4 < 2 ? value - shift : value));
      const spans = placed.map((run) => ({ start: run.at - lead, end: run.at - lead + run.text.length }));
      cuts = placeRuns(source, spans, target, shifted);
    }
    return placed.map((run, i) => {
      const text = target.slice(cuts[i]!, cuts[i + 1]!);
      const before = i === 0 ? leading(run.text) : '';
      const after = i === placed.length - 1 ? trailing(run.text) : '';
      return { ...run, text: escapeText(before + text + after) };
    });
  }
}

/**
 * Plan the translation of one XML part read as `dialect`.
 * @throws ServeError BAD_REQUEST for XML that is not well-formed (line and column named), or that declares entities
 */
export function planParagraphs(source: string, dialect: Dialect, partName: string): PartPlan {
  const units: Unit[] = [];
  /** The open paragraphs, innermost last: each its unit being filled (null after a break until text comes). */
  const paragraphs: { unit: Unit | null }[] = [];
  /** Open elements, innermost last, by their `{uri}local` key. */
  const open: string[] = [];
  let kept = 0;
  /** Complex fields open (Word's nest). */
  let fields = 0;
  let eventEnd = 0;
  let failure: Error | null = null;
  const parser = new SaxesParser({ xmlns: true, position: true });
  const key = (tag: SaxesTagNS) => `{${tag.uri}}${tag.local}`;
  const fail = (message: string) => {
    failure ??= new ServeError('BAD_REQUEST', `${partName}: ${message}`);
  };
  const breakUnit = () => {
    const paragraph = paragraphs[paragraphs.length - 1];
    if (paragraph) paragraph.unit = null;
  };
  const markEnd = () => {
    eventEnd = parser.position;
  };

  parser.on('error', (error) => {
    failure ??= error;
  });
  parser.on('doctype', (doctype) => {
    if (!dialect.allowDoctype || doctype.includes('['))
      fail('a DOCTYPE declaring entities is refused (never expanded).');
    markEnd();
  });
  parser.on('text', (text) => {
    // saxes reports text when it reaches the next `<`, already consumed; positions count UTF-16 units.
    const end = source[parser.position - 1] === '<' ? parser.position - 1 : parser.position;
    const paragraph = paragraphs[paragraphs.length - 1];
    if (paragraph && kept === 0 && fields === 0 && dialect.holders.has(open[open.length - 1]!)) {
      if (paragraph.unit === null) units.push((paragraph.unit = new Unit()));
      paragraph.unit.add(text, { start: eventEnd, end });
    }
    eventEnd = end;
  });
  parser.on('opentag', (tag) => {
    const name = key(tag);
    if (kept > 0 || dialect.kept.has(name)) {
      kept++;
      breakUnit();
    } else if (dialect.paragraphs.has(name)) {
      breakUnit();
      paragraphs.push({ unit: null });
    } else if (dialect.breaks.has(name)) breakUnit();
    else if (dialect.spaces.has(name)) paragraphs[paragraphs.length - 1]?.unit?.add(' ');
    else if (name === dialect.fieldMarks?.element) {
      const mark = Object.values(tag.attributes).find((a) => a.local === dialect.fieldMarks!.attribute)?.value;
      if (mark === 'begin') fields++;
      else if (mark === 'end') fields = Math.max(0, fields - 1);
      breakUnit();
    }
    open.push(name);
    if (tag.isSelfClosing) close(name);
    markEnd();
  });
  const close = (name: string) => {
    open.pop();
    if (kept > 0) kept--;
    else if (dialect.paragraphs.has(name)) {
      paragraphs.pop();
      breakUnit();
    }
  };
  parser.on('closetag', (tag) => {
    if (!tag.isSelfClosing) close(key(tag));
    markEnd();
  });
  for (const event of ['xmldecl', 'processinginstruction', 'comment', 'cdata'] as const) parser.on(event, markEnd);
  try {
    parser.write(source).close();
  } catch (error) {
    failure ??= error as Error;
  }
  if (failure) {
    if (failure instanceof ServeError) throw failure;
    const message = (failure as Error).message;
    const [, line, column, what] = /^(\d+):(\d+): (.*)$/.exec(message) ?? [];
    const where = line === undefined ? '' : ` at line ${line}, column ${column}`;
    throw new ServeError('BAD_REQUEST', `${partName} is not well-formed XML${where}: ${what ?? message}`);
  }

  const translated = units.filter((unit) => WORDS.test(unit.text()));
  return {
    texts: translated.map((unit) => unit.text()),
    edges: translated.map((unit) => unit.edges()),
    render(translations, links) {
      if (translations.length !== translated.length)
        throw new Error(`${partName}: ${translations.length} translations for ${translated.length} units`);
      const spans = translated
        .flatMap((unit, i) => unit.spans(translations[i]!, links?.[i]))
        .sort((a, b) => a.start - b.start);
      const out: string[] = [];
      let at = 0;
      for (const span of spans) {
        out.push(source.slice(at, span.start), span.text);
        at = span.end;
      }
      out.push(source.slice(at));
      return out.join('');
    },
  };
}
