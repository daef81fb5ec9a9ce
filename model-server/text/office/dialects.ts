/**
 * @module model-server/text/office/dialects — what each element of the Office vocabularies is to the paragraph planner
 * (./paragraphs.ts): Office Open XML (WordprocessingML, DrawingML text for slides and shapes, SpreadsheetML's shared
 * and inline strings; transitional and strict namespaces), OpenDocument text, and EPUB 2's NCX table of contents.
 */
import type { Dialect } from './paragraphs.js';

const names = (uris: readonly string[], locals: readonly string[]) =>
  new Set(uris.flatMap((uri) => locals.map((local) => `{${uri}}${local}`)));

const WORD = [
  'http://schemas.openxmlformats.org/wordprocessingml/2006/main',
  'http://purl.oclc.org/ooxml/wordprocessingml/main',
];
const DRAWING = ['http://schemas.openxmlformats.org/drawingml/2006/main', 'http://purl.oclc.org/ooxml/drawingml/main'];
const SHEET = [
  'http://schemas.openxmlformats.org/spreadsheetml/2006/main',
  'http://purl.oclc.org/ooxml/spreadsheetml/main',
];
const ODF_TEXT = ['urn:oasis:names:tc:opendocument:xmlns:text:1.0'];
const NCX = ['http://www.daisy.org/z3986/2005/ncx/'];

/**
 * Office Open XML, one dialect for every part: a Word paragraph `w:p` of runs' `w:t` (a text box's paragraphs nest
 * inside a run: each its own unit), a DrawingML paragraph `a:p` of `a:t` (slides, notes, shapes in any part), a shared
 * string `si` or an inline string `is` of `t`. Never text: deleted text (`w:delText`), a field's code and shown value
 * (between `w:fldChar` begin and end, `w:fldSimple`, a slide's `a:fld`: a page or slide number, a date, a TOC), phonetic
 * guides (`rPh`), and in a sheet every cell value and formula (`v`, `f`), which are not `t`.
 */
export const OOXML: Dialect = {
  paragraphs: new Set([...names(WORD, ['p']), ...names(DRAWING, ['p']), ...names(SHEET, ['si', 'is'])]),
  holders: new Set([...names(WORD, ['t']), ...names(DRAWING, ['t']), ...names(SHEET, ['t'])]),
  breaks: new Set([...names(WORD, ['tab', 'br', 'cr', 'ptab']), ...names(DRAWING, ['br'])]),
  kept: new Set([...names(WORD, ['fldSimple']), ...names(DRAWING, ['fld']), ...names(SHEET, ['rPh'])]),
  spaces: new Set(),
  allowDoctype: false,
  fieldMarks: { element: `{${WORD[0]}}fldChar`, attribute: 'fldCharType' },
};

/**
 * OpenDocument (ODT, ODP; content.xml and styles.xml): headings and paragraphs hold their text directly and in spans
 * and links; `text:s` is a space, tabs and line breaks end a unit, a note's citation (its number) is not text.
 */
export const ODF: Dialect = {
  paragraphs: names(ODF_TEXT, ['p', 'h']),
  holders: names(ODF_TEXT, ['p', 'h', 'span', 'a']),
  breaks: names(ODF_TEXT, ['tab', 'line-break']),
  kept: names(ODF_TEXT, ['note-citation']),
  spaces: names(ODF_TEXT, ['s']),
  allowDoctype: false,
};

/** EPUB 2's table of contents: each label's `text` (the book's title and author too). */
export const NCX_DIALECT: Dialect = {
  paragraphs: names(NCX, ['text']),
  holders: names(NCX, ['text']),
  breaks: new Set(),
  kept: new Set(),
  spaces: new Set(),
  allowDoctype: true,
};
