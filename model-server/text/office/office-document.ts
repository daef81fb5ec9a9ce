/**
 * @module model-server/text/office/office-document — `planOffice`: the text units of an Office or EPUB file and the
 * file rebuilt from their translations. Which parts of the container hold text, per type:
 *
 * | type | parts translated | must be there |
 * | --- | --- | --- |
 * | docx | word/document.xml, headers, footers, footnotes, endnotes, comments | [Content_Types].xml, word/document.xml |
 * | pptx | ppt/slides/slideN.xml, ppt/notesSlides/notesSlideN.xml | [Content_Types].xml, ppt/presentation.xml |
 * | xlsx | xl/sharedStrings.xml, inline strings of xl/worksheets/sheetN.xml | [Content_Types].xml, xl/workbook.xml |
 * | odt, odp | content.xml, styles.xml (headers, footers, master pages) | mimetype of the type, content.xml |
 * | epub | every .xhtml/.html/.htm (chapters, the EPUB 3 nav), every .ncx (the EPUB 2 toc) | mimetype, META-INF/container.xml |
 *
 * Every other entry — images, styles, relationships, settings, a sheet's numbers, dates and formulas — is written back
 * with the same bytes, in the same order, stored or deflated as it was. EPUB chapters are HTML to
 * model-server/text/markup/markup.ts (each text node a unit, as for an HTML document); the rest are paragraphs
 * (./paragraphs.ts). Pure: the caller runs it off its event loop (router/apis/office-task.ts).
 */
import { ServeError } from '../../../common/errors.js';
import type { Edges, Links } from '../markup/inline-tags.js';
import { planMarkup } from '../markup/markup.js';
import { NCX_DIALECT, ODF, OOXML } from './dialects.js';
import { planParagraphs, type PartPlan } from './paragraphs.js';
import {
  DEFAULT_PACKAGE_LIMITS,
  type PackageEntry,
  type PackageLimits,
  readPackage,
  writePackage,
} from './zip-package.js';

export const OFFICE_KINDS = ['docx', 'pptx', 'xlsx', 'odt', 'odp', 'epub'] as const;
export type OfficeKind = (typeof OFFICE_KINDS)[number];

/**
 * An Office file's units to translate, and the file rebuilt from their translations; `links` (per unit, absent: none)
 * put each run of a paragraph onto the words its own align with (./paragraphs.ts).
 */
export interface OfficePlan {
  readonly texts: readonly string[];
  /** Per unit, where its formatting changes (../inline-tags.ts `Edges`): the sentences they cut want aligning. */
  readonly edges: readonly Edges[];
  render(translations: readonly string[], links?: readonly (Links | undefined)[]): Uint8Array;
}

interface KindParts {
  required: readonly string[];
  /** Entries whose text is translated, and how each is read. */
  part(name: string): ((source: string) => PartPlan) | undefined;
  /** The `mimetype` entry's content, for ODF and EPUB. */
  mimetype?: string;
}

const paragraphs = (dialect: typeof OOXML) => (name: string) => (source: string) =>
  planParagraphs(source, dialect, name);

const KINDS: Record<OfficeKind, KindParts> = {
  docx: {
    required: ['[Content_Types].xml', 'word/document.xml'],
    part: (name) =>
      /^word\/(document|header\d*|footer\d*|footnotes|endnotes|comments)\.xml$/.test(name)
        ? paragraphs(OOXML)(name)
        : undefined,
  },
  pptx: {
    required: ['[Content_Types].xml', 'ppt/presentation.xml'],
    part: (name) =>
      /^ppt\/(slides\/slide|notesSlides\/notesSlide)\d+\.xml$/.test(name) ? paragraphs(OOXML)(name) : undefined,
  },
  xlsx: {
    required: ['[Content_Types].xml', 'xl/workbook.xml'],
    part: (name) =>
      /^xl\/(sharedStrings|worksheets\/sheet\d+)\.xml$/.test(name) ? paragraphs(OOXML)(name) : undefined,
  },
  odt: {
    required: ['mimetype', 'content.xml'],
    mimetype: 'application/vnd.oasis.opendocument.text',
    part: (name) => (name === 'content.xml' || name === 'styles.xml' ? paragraphs(ODF)(name) : undefined),
  },
  odp: {
    required: ['mimetype', 'content.xml'],
    mimetype: 'application/vnd.oasis.opendocument.presentation',
    part: (name) => (name === 'content.xml' || name === 'styles.xml' ? paragraphs(ODF)(name) : undefined),
  },
  epub: {
    required: ['mimetype', 'META-INF/container.xml'],
    mimetype: 'application/epub+zip',
    part: (name) => {
      if (/\.(xhtml|html?)$/i.test(name)) return (source) => planMarkup(source, 'html');
      return /\.ncx$/i.test(name) ? paragraphs(NCX_DIALECT)(name) : undefined;
    },
  },
};

const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const BOM = '\ufeff';

function decodePart(entry: PackageEntry): string {
  try {
    return UTF8.decode(entry.data);
  } catch {
    throw new ServeError('BAD_REQUEST', `${entry.name} is not UTF-8 text.`);
  }
}

/**
 * Plan the translation of an Office or EPUB file.
 * @throws ServeError BAD_REQUEST for a file that is not the type it is named (a part missing, another mimetype), a
 *   part that is not well-formed or declares entities, an unsafe or duplicate entry name; PAYLOAD_TOO_LARGE past a
 *   limit of ./zip-package.ts
 */
export function planOffice(
  bytes: Uint8Array,
  kind: OfficeKind,
  limits: PackageLimits = DEFAULT_PACKAGE_LIMITS,
): OfficePlan {
  const parts = KINDS[kind];
  const entries = readPackage(bytes, limits);
  const byName = new Map(entries.map((entry) => [entry.name, entry]));
  for (const name of parts.required)
    if (!byName.has(name)) throw new ServeError('BAD_REQUEST', `The file is not a .${kind}: it has no ${name}.`);
  if (parts.mimetype !== undefined) {
    const mimetype = decodePart(byName.get('mimetype')!).trim();
    if (mimetype !== parts.mimetype)
      throw new ServeError(
        'BAD_REQUEST',
        `The file is not a .${kind}: its mimetype is ${JSON.stringify(mimetype.slice(0, 100))}.`,
      );
  }
  const planned = entries.flatMap((entry, index) => {
    const plan = parts.part(entry.name);
    if (plan === undefined) return [];
    const text = decodePart(entry);
    const bom = text.startsWith(BOM);
    return [{ index, bom, plan: plan(bom ? text.slice(1) : text) }];
  });
  return {
    texts: planned.flatMap(({ plan }) => plan.texts),
    edges: planned.flatMap(({ plan }) => plan.edges),
    render(translations, links) {
      const out = [...entries];
      let at = 0;
      const encoder = new TextEncoder();
      for (const { index, bom, plan } of planned) {
        const mine = translations.slice(at, at + plan.texts.length);
        const linked = links?.slice(at, at + plan.texts.length);
        at += plan.texts.length;
        if (mine.length === 0) continue;
        const entry = entries[index]!;
        out[index] = { ...entry, data: encoder.encode((bom ? BOM : '') + plan.render(mine, linked)) };
      }
      if (at !== translations.length) throw new Error(`${translations.length} translations for ${at} units`);
      return writePackage(out);
    },
  };
}
