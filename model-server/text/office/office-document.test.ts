import { strToU8, unzipSync, zipSync } from 'fflate';
import { describe, expect, it } from 'vitest';
import { ServeError } from '../../../common/errors.js';
import { expectLinearTime } from '../../../harness/linear-time.js';
import {
  DOCX_FIXED_TEXTS,
  docxFile,
  epubFile,
  hasLibreOffice,
  odfFile,
  PNG,
  pptxFile,
  readerTexts,
  xlsxFile,
} from '../../../harness/office-files.js';
import { NCX_DIALECT, OOXML } from './dialects.js';
import { type OfficeKind, planOffice } from './office-document.js';
import { planParagraphs } from './paragraphs.js';
import { readPackage } from './zip-package.js';

/** A translation that shows where each unit went: its index and its text upper-cased. */
const translate = (texts: readonly string[]) => texts.map((text, i) => `T${i} ${text.toUpperCase()}`);
const text = (bytes: Uint8Array, name: string) => new TextDecoder().decode(unzipSync(bytes)[name]);

const BODY = [
  ['The quick ', 'brown', ' fox jumps over the lazy dog.'],
  ['Word cuts ', 'one sentence', ' into runs. ', 'It keeps', ' the second too.'],
];
const FILES = {
  docx: docxFile(BODY),
  pptx: pptxFile([[['Slides ', 'have', ' titles.']], [['A second ', 'slide', ' speaks.']]], 'The notes remind me.'),
  xlsx: xlsxFile([['A plain cell.'], ['A rich ', 'bold', ' cell.'], ['2024']], 'An inline string.'),
  odt: odfFile('text', [['Open ', 'documents', ' speak too.']]),
  odp: odfFile('presentation', [['A slide ', 'of', ' ODF.']]),
  epub: epubFile('The Book', [{ title: 'Chapter One', paragraphs: ['It was a dark night.', 'The end.'] }]),
} satisfies Record<OfficeKind, Uint8Array>;

/** Fails with the ServeError `run` throws, or when it throws none. */
function refusal(run: () => unknown): { status: number; message: string } {
  try {
    run();
  } catch (err) {
    if (err instanceof ServeError) return { status: err.status, message: err.message };
    throw err;
  }
  throw new Error('no error');
}

describe('planOffice', () => {
  it('reads each paragraph whole across its runs, in document order, then headers, footers, footnotes, comments', () => {
    expect(planOffice(FILES.docx, 'docx').texts).toEqual([
      'The quick brown fox jumps over the lazy dog.',
      'Word cuts one sentence into runs. It keeps the second too.',
      ...DOCX_FIXED_TEXTS.afterBody,
      ...DOCX_FIXED_TEXTS.parts,
    ]);
    expect(planOffice(FILES.pptx, 'pptx').texts).toEqual([
      'Slides have titles.',
      'A second slide speaks.',
      'The notes remind me.',
    ]);
    // Shared strings after the sheet's inline string (entry order); "2024" has no letter to translate.
    expect(planOffice(FILES.xlsx, 'xlsx').texts).toEqual(['An inline string.', 'A plain cell.', 'A rich bold cell.']);
    expect(planOffice(FILES.odt, 'odt').texts).toEqual(['Open documents speak too.']);
    expect(planOffice(FILES.odp, 'odp').texts).toEqual(['A slide of ODF.']);
    expect(planOffice(FILES.epub, 'epub').texts).toContain('It was a dark night.');
  });

  it('puts the translation into the first run with text, empties the others, and keeps every other byte', () => {
    const plan = planOffice(FILES.docx, 'docx');
    const out = plan.render(translate(plan.texts));
    const document = text(out, 'word/document.xml');
    expect(document).toContain(
      '<w:r><w:t xml:space="preserve">T0 THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG.</w:t></w:r>' +
        '<w:r><w:rPr><w:b/></w:rPr><w:t xml:space="preserve"></w:t></w:r><w:r><w:t xml:space="preserve"></w:t></w:r>',
    );
    // A field's code and its shown value stay; so do the tab and the footnote reference between units.
    expect(document).toContain('<w:instrText xml:space="preserve"> PAGE </w:instrText>');
    expect(document).toContain(
      '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t xml:space="preserve">1</w:t>',
    );
    expect(document).toContain('<w:r><w:tab/></w:r><w:r><w:t xml:space="preserve">T3 JOHN SMITH IS HERE TODAY.</w:t>');
    expect(text(out, 'word/footnotes.xml')).toContain('T9 A FOOTNOTE EXPLAINS IT.');
    const source = unzipSync(FILES.docx);
    const result = unzipSync(out);
    expect(Object.keys(result)).toEqual(Object.keys(source));
    expect(result['word/media/image1.png']).toEqual(PNG);
    for (const name of ['[Content_Types].xml', '_rels/.rels', 'word/_rels/document.xml.rels'])
      expect(result[name]).toEqual(source[name]);
    // Outside the runs' text, the part is the source's own, byte for byte.
    const runsEmptied = (xml: string) => xml.replace(/(<w:t[^>]*>)[^<]*(<\/w:t>)/g, '$1$2');
    expect(runsEmptied(document)).toEqual(runsEmptied(text(FILES.docx, 'word/document.xml')));
  });

  it('never touches a sheet’s numbers, dates or formulas, and keeps mimetype first and stored', () => {
    const xlsx = planOffice(FILES.xlsx, 'xlsx');
    const sheet = text(xlsx.render(translate(xlsx.texts)), 'xl/worksheets/sheet1.xml');
    expect(sheet).toContain('<is><t>T0 AN INLINE STRING.</t></is></c><c r="B4"><v>42.5</v></c>');
    expect(sheet).toContain('<c r="C4" s="1"><v>45000</v></c><c r="D4"><f>B4*2</f><v>85</v></c>');
    for (const kind of ['odt', 'epub'] as const) {
      const plan = planOffice(FILES[kind], kind);
      const entries = readPackage(plan.render(translate(plan.texts)));
      expect(entries[0]).toMatchObject({ name: 'mimetype', stored: true });
    }
  });

  // .ci/run installs LibreOffice: on CI a missing reader is a failure, not a skip.
  it.runIf(!hasLibreOffice() && process.env.CI === 'true')('LibreOffice is installed on CI', () => {
    expect.fail('soffice is not installed: .ci/run installs it (apt-get install libreoffice-writer-nogui …)');
  });

  it.skipIf(!hasLibreOffice())(
    'gives files LibreOffice opens, whose text is the translation in order',
    { timeout: 300_000 },
    async () => {
      const outputs: Record<string, Uint8Array> = {};
      const expected: Record<string, string[]> = {};
      for (const kind of ['docx', 'pptx', 'xlsx', 'odt', 'odp'] as const) {
        const plan = planOffice(FILES[kind], kind);
        outputs[`${kind}-out.${kind}`] = plan.render(translate(plan.texts));
        expected[`${kind}-out.${kind}`] = translate(plan.texts);
      }
      const read = await readerTexts(outputs);
      for (const [name, translations] of Object.entries(expected)) {
        const paragraphs = read[name]!.join('\n');
        // Each translation where LibreOffice reads it, in order within the body (headers and masters come first).
        for (const translation of translations) expect(paragraphs, name).toContain(translation);
        // Headers, footers, footnotes, comments and a slide's notes are read where the reader shows them.
        const body = translations.filter((t) => !/HEADER|FOOTER|FOOTNOTE|COMMENT|NOTES/.test(t));
        const at = body.map((t) => paragraphs.indexOf(t));
        if (!name.endsWith('.xlsx')) expect(at, name).toEqual([...at].sort((a, b) => a - b));
      }
      // A sheet's cells in their order: shared strings, the number the formula reads, the date, the formula's value.
      expect(read['xlsx-out.xlsx']).toEqual([
        'T1 A PLAIN CELL.',
        'T2 A RICH BOLD CELL.',
        '2024',
        'T0 AN INLINE STRING.',
        '42.5',
        '2023-03-15',
        '85',
      ]);
      expect(read['docx-out.docx']!.join('\n')).not.toMatch(/quick|brown|footnote explains/);
    },
  );
});

describe('hostile files', () => {
  it('refuses a zip bomb by its declared sizes before inflating it', () => {
    const bomb = zipSync({ '[Content_Types].xml': new Uint8Array(8 * 1024 * 1024) });
    expect(refusal(() => planOffice(bomb, 'docx'))).toEqual({
      status: 413,
      message: expect.stringMatching(
        /^The entry "\[Content_Types\]\.xml" inflates \d+ times, more than 200: a zip bomb\.$/,
      ),
    });
    // A million tiny runs fit an upload only by compressing hundreds of times: refused the same way.
    const runs = docxFile([Array.from({ length: 1_000_000 }, () => 'a')]);
    expect(runs.length).toBeLessThan(1024 * 1024);
    expect(refusal(() => planOffice(runs, 'docx'))).toEqual({
      status: 413,
      message: expect.stringMatching(
        /^The entry "word\/document\.xml" inflates \d+ times, more than 200: a zip bomb\.$/,
      ),
    });
    const limits = { maxEntries: 3, maxEntryBytes: 1000, maxTotalBytes: 1500, maxRatio: 200 };
    expect(refusal(() => planOffice(FILES.docx, 'docx', limits)).status).toBe(413);
    expect(refusal(() => readPackage(zipSync({ a: new Uint8Array(900), b: new Uint8Array(900) }), limits))).toEqual({
      status: 413,
      message: 'The file inflates to more than 1500 bytes.',
    });
  });

  it('refuses unsafe and duplicate names, missing parts, and files that are not zips', () => {
    for (const name of ['../evil.xml', '/etc/passwd', 'a/../../b', 'C:/x', 'a\\..\\b'])
      expect(refusal(() => readPackage(zipSync({ [name]: strToU8('x') })))).toEqual({
        status: 400,
        message: `The file holds an unsafe entry name: ${JSON.stringify(name)}.`,
      });
    // Two entries of one name: the second entry's name patched (local and central headers) to the first's.
    const twice = Buffer.from(zipSync({ 'a.xml': strToU8('<a/>'), 'b.xml': strToU8('<b/>') }));
    for (let at = twice.indexOf('b.xml'); at >= 0; at = twice.indexOf('b.xml', at + 1)) twice.write('a', at);
    expect(refusal(() => readPackage(twice))).toEqual({
      status: 400,
      message: 'The file holds the entry "a.xml" twice.',
    });
    expect(refusal(() => planOffice(FILES.pptx, 'docx'))).toEqual({
      status: 400,
      message: 'The file is not a .docx: it has no word/document.xml.',
    });
    expect(refusal(() => planOffice(FILES.odt, 'odp'))).toEqual({
      status: 400,
      message: 'The file is not a .odp: its mimetype is "application/vnd.oasis.opendocument.text".',
    });
    expect(refusal(() => planOffice(strToU8('hello'), 'docx')).status).toBe(400);
  });

  it('never expands or fetches an entity', () => {
    const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
    const laughs =
      '<?xml version="1.0"?><!DOCTYPE d [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]>' +
      `<w:document ${W}><w:p><w:r><w:t>&b;</w:t></w:r></w:p></w:document>`;
    expect(refusal(() => planParagraphs(laughs, OOXML, 'word/document.xml'))).toEqual({
      status: 400,
      message: 'word/document.xml: a DOCTYPE declaring entities is refused (never expanded).',
    });
    // An NCX may name its DTD (never fetched), but not declare anything.
    const ncx = (doctype: string) =>
      `<!DOCTYPE ncx ${doctype}><ncx xmlns="http://www.daisy.org/z3986/2005/ncx/"><docTitle><text>A title</text></docTitle></ncx>`;
    expect(
      planParagraphs(ncx('SYSTEM "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd"'), NCX_DIALECT, 'toc.ncx').texts,
    ).toEqual(['A title']);
    expect(
      refusal(() => planParagraphs(ncx('[<!ENTITY x SYSTEM "file:///etc/passwd">]'), NCX_DIALECT, 'toc.ncx')),
    ).toEqual({
      status: 400,
      message: 'toc.ncx: a DOCTYPE declaring entities is refused (never expanded).',
    });
    const external = `<w:document ${W}><w:p><w:r><w:t>&xxe;</w:t></w:r></w:p></w:document>`;
    expect(refusal(() => planParagraphs(external, OOXML, 'word/document.xml'))).toEqual({
      status: 400,
      message: expect.stringMatching(
        /^word\/document\.xml is not well-formed XML at line 1, column \d+: undefined entity/,
      ),
    });
  });

  it('plans and renders a paragraph of many tiny runs in linear time', () => {
    const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
    const doc = (n: number) =>
      `<w:document ${W}><w:body><w:p>${'<w:r><w:rPr><w:b/></w:rPr><w:t>a</w:t></w:r>'.repeat(Math.ceil(n / 40))}</w:p></w:body></w:document>`;
    expectLinearTime(
      doc,
      (source) => {
        const plan = planParagraphs(source, OOXML, 'word/document.xml');
        return plan.render(plan.texts);
      },
      20_000,
    );
  });
});
