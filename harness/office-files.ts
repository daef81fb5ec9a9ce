/**
 * @module harness/office-files — Office and EPUB files generated for tests and the bench (never downloaded, never
 * committed): each a small, valid file of its type, built with fflate from the XML written here, with text in the
 * places model-server/text/office/ translates and things it must leave alone (an image, a field code, a number, a
 * formula). `readerText` asks LibreOffice (headless) for a file's text as it reads it.
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { strToU8, zipSync, type Zippable } from 'fflate';

const execFileAsync = promisify(execFile);

const XML = '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n';
const W = 'http://schemas.openxmlformats.org/wordprocessingml/2006/main';
const R = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
const A = 'http://schemas.openxmlformats.org/drawingml/2006/main';
const P = 'http://schemas.openxmlformats.org/presentationml/2006/main';
const S = 'http://schemas.openxmlformats.org/spreadsheetml/2006/main';
const REL = 'http://schemas.openxmlformats.org/officeDocument/2006/relationships';
const PKG_REL = 'http://schemas.openxmlformats.org/package/2006/relationships';
const OFFICE_CT = 'application/vnd.openxmlformats-officedocument';

/** A 1×1 PNG: a part that must come back byte for byte. */
export const PNG = Uint8Array.from(
  Buffer.from(
    'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==',
    'base64',
  ),
);

const esc = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

function contentTypes(overrides: Record<string, string>, defaults: Record<string, string> = {}): string {
  const all = { rels: 'application/vnd.openxmlformats-package.relationships+xml', xml: 'application/xml', ...defaults };
  return (
    `${XML}<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">` +
    Object.entries(all)
      .map(([ext, type]) => `<Default Extension="${ext}" ContentType="${type}"/>`)
      .join('') +
    Object.entries(overrides)
      .map(([part, type]) => `<Override PartName="/${part}" ContentType="${type}"/>`)
      .join('') +
    '</Types>'
  );
}

function rels(targets: [id: string, type: string, target: string][]): string {
  return (
    `${XML}<Relationships xmlns="${PKG_REL}">` +
    targets
      .map(([id, type, target]) => `<Relationship Id="${id}" Type="${REL}/${type}" Target="${target}"/>`)
      .join('') +
    '</Relationships>'
  );
}

const zip = (files: Record<string, string | Uint8Array>): Uint8Array =>
  zipSync(
    Object.fromEntries(
      Object.entries(files).map(([name, data]) => [name, typeof data === 'string' ? strToU8(data) : data]),
    ) as Zippable,
  );

/** A Word run: its text, bold when asked (formatting that Word would cut a sentence's runs at). */
const run = (text: string, bold = false) =>
  `<w:r>${bold ? '<w:rPr><w:b/></w:rPr>' : ''}<w:t xml:space="preserve">${esc(text)}</w:t></w:r>`;
const para = (runs: string) => `<w:p>${runs}</w:p>`;

/**
 * A .docx: `body`'s paragraphs (each an array of runs, every second one bold), then a paragraph with a tab, a PAGE
 * field and a footnote, a text box, a table cell, an image; a header, a footer, a footnote and a comment.
 */
export function docxFile(body: readonly (readonly string[])[]): Uint8Array {
  const paragraphs = body.map((runs) => para(runs.map((text, i) => run(text, i % 2 === 1)).join('')));
  const document =
    `${XML}<w:document xmlns:w="${W}" xmlns:r="${R}" xmlns:v="urn:schemas-microsoft-com:vml"><w:body>` +
    paragraphs.join('') +
    para(
      run('Name:') +
        '<w:r><w:tab/></w:r>' +
        run('John Smith is ') +
        run('here', true) +
        run(' today.') +
        '<w:r><w:footnoteReference w:id="1"/></w:r>',
    ) +
    para(
      '<w:commentRangeStart w:id="0"/>' +
        run('Page ') +
        '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>' +
        '<w:r><w:fldChar w:fldCharType="separate"/></w:r>' +
        run('1') +
        '<w:r><w:fldChar w:fldCharType="end"/></w:r>' +
        '<w:commentRangeEnd w:id="0"/><w:r><w:commentReference w:id="0"/></w:r>',
    ) +
    para(
      '<w:r><w:pict><v:shape style="width:200pt;height:50pt"><v:textbox><w:txbxContent>' +
        para(run('The text box speaks.')) +
        '</w:txbxContent></v:textbox></v:shape></w:pict></w:r>',
    ) +
    `<w:tbl><w:tblGrid><w:gridCol w:w="4000"/></w:tblGrid><w:tr><w:tc>${para(run('A table cell talks.'))}</w:tc></w:tr></w:tbl>` +
    '<w:sectPr><w:headerReference w:type="default" r:id="rIdH"/><w:footerReference w:type="default" r:id="rIdF"/></w:sectPr>' +
    '</w:body></w:document>';
  const notes = (kind: 'footnote', text: string) =>
    `${XML}<w:${kind}s xmlns:w="${W}">` +
    `<w:${kind} w:type="separator" w:id="-1"><w:p><w:r><w:separator/></w:r></w:p></w:${kind}>` +
    `<w:${kind} w:type="continuationSeparator" w:id="0"><w:p><w:r><w:continuationSeparator/></w:r></w:p></w:${kind}>` +
    `<w:${kind} w:id="1">${para('<w:r><w:footnoteRef/></w:r>' + run(' ' + text))}</w:${kind}></w:${kind}s>`;
  const ct = `${OFFICE_CT}.wordprocessingml`;
  return zip({
    '[Content_Types].xml': contentTypes(
      {
        'word/document.xml': `${ct}.document.main+xml`,
        'word/header1.xml': `${ct}.header+xml`,
        'word/footer1.xml': `${ct}.footer+xml`,
        'word/footnotes.xml': `${ct}.footnotes+xml`,
        'word/comments.xml': `${ct}.comments+xml`,
      },
      { png: 'image/png' },
    ),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'word/document.xml']]),
    'word/_rels/document.xml.rels': rels([
      ['rIdH', 'header', 'header1.xml'],
      ['rIdF', 'footer', 'footer1.xml'],
      ['rIdN', 'footnotes', 'footnotes.xml'],
      ['rIdC', 'comments', 'comments.xml'],
      ['rIdI', 'image', 'media/image1.png'],
    ]),
    'word/document.xml': document,
    'word/header1.xml': `${XML}<w:hdr xmlns:w="${W}">${para(run('The header ') + run('reads', true) + run(' well.'))}</w:hdr>`,
    'word/footer1.xml': `${XML}<w:ftr xmlns:w="${W}">${para(run('The footer is quiet.'))}</w:ftr>`,
    'word/footnotes.xml': notes('footnote', 'A footnote explains it.'),
    'word/comments.xml':
      `${XML}<w:comments xmlns:w="${W}"><w:comment w:id="0" w:author="Ann" w:initials="A">` +
      `${para(run('A comment asks why.'))}</w:comment></w:comments>`,
    'word/media/image1.png': PNG,
  });
}

/** The translatable texts of `docxFile(body)`, in document order, then the header, footer, footnote and comment. */
export const DOCX_FIXED_TEXTS = {
  afterBody: ['Name:', 'John Smith is here today.', 'Page', 'The text box speaks.', 'A table cell talks.'],
  parts: ['The header reads well.', 'The footer is quiet.', 'A footnote explains it.', 'A comment asks why.'],
};

/** A .pptx of `slides` (each its paragraphs, cut into runs), a slide-number field, and notes for the first slide. */
export function pptxFile(slides: readonly (readonly (readonly string[])[])[], notes: string): Uint8Array {
  const spTree = (body: string) =>
    `<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>${body}</p:spTree></p:cSld>`;
  const shape = (id: number, paragraphs: string) =>
    `<p:sp><p:nvSpPr><p:cNvPr id="${id}" name="Text ${id}"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr>` +
    `<p:spPr><a:xfrm><a:off x="457200" y="${457200 * id}"/><a:ext cx="8000000" cy="400000"/></a:xfrm><a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>` +
    `<p:txBody><a:bodyPr/><a:lstStyle/>${paragraphs}</p:txBody></p:sp>`;
  const aRun = (text: string, bold: boolean) =>
    `<a:r><a:rPr lang="en-US"${bold ? ' b="1"' : ''}/><a:t>${esc(text)}</a:t></a:r>`;
  const aPara = (runs: readonly string[]) => `<a:p>${runs.map((text, i) => aRun(text, i % 2 === 1)).join('')}</a:p>`;
  const ns = `xmlns:a="${A}" xmlns:r="${R}" xmlns:p="${P}"`;
  const files: Record<string, string | Uint8Array> = {};
  const overrides: Record<string, string> = {
    'ppt/presentation.xml': `${OFFICE_CT}.presentationml.presentation.main+xml`,
  };
  slides.forEach((paragraphs, i) => {
    const n = i + 1;
    const field = `<a:p><a:fld id="{B6F15528-21DE-4FAA-801E-634DDDAF4B2B}" type="slidenum"><a:t>${n}</a:t></a:fld></a:p>`;
    files[`ppt/slides/slide${n}.xml`] =
      `${XML}<p:sld ${ns}>${spTree(shape(2, paragraphs.map(aPara).join('')) + shape(3, field))}</p:sld>`;
    files[`ppt/slides/_rels/slide${n}.xml.rels`] = rels(
      n === 1 ? [['rIdN', 'notesSlide', '../notesSlides/notesSlide1.xml']] : [],
    );
    overrides[`ppt/slides/slide${n}.xml`] = `${OFFICE_CT}.presentationml.slide+xml`;
  });
  files['ppt/notesSlides/notesSlide1.xml'] = `${XML}<p:notes ${ns}>${spTree(shape(2, aPara([notes])))}</p:notes>`;
  files['ppt/notesSlides/_rels/notesSlide1.xml.rels'] = rels([['rIdS', 'slide', '../slides/slide1.xml']]);
  overrides['ppt/notesSlides/notesSlide1.xml'] = `${OFFICE_CT}.presentationml.notesSlide+xml`;
  files['ppt/presentation.xml'] =
    `${XML}<p:presentation ${ns}><p:sldIdLst>` +
    slides.map((_, i) => `<p:sldId id="${256 + i}" r:id="rIdS${i + 1}"/>`).join('') +
    '</p:sldIdLst><p:sldSz cx="9144000" cy="6858000"/><p:notesSz cx="6858000" cy="9144000"/></p:presentation>';
  files['ppt/_rels/presentation.xml.rels'] = rels(
    slides.map((_, i): [string, string, string] => [`rIdS${i + 1}`, 'slide', `slides/slide${i + 1}.xml`]),
  );
  files['ppt/media/image1.png'] = PNG;
  return zip({
    '[Content_Types].xml': contentTypes(overrides, { png: 'image/png' }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'ppt/presentation.xml']]),
    ...files,
  });
}

/** A .xlsx: shared strings (one rich, cut into runs), an inline string, a number, a date and a formula. */
export function xlsxFile(shared: readonly (readonly string[])[], inline: string): Uint8Array {
  const si = shared.map((runs) =>
    runs.length === 1
      ? `<si><t xml:space="preserve">${esc(runs[0]!)}</t></si>`
      : `<si>${runs.map((text, i) => `<r>${i % 2 ? '<rPr><b/></rPr>' : ''}<t xml:space="preserve">${esc(text)}</t></r>`).join('')}</si>`,
  );
  const cells = shared.map((_, i) => `<c r="A${i + 1}" t="s"><v>${i}</v></c>`).join('');
  const n = shared.length + 1;
  const sheet =
    `${XML}<worksheet xmlns="${S}"><sheetData>` +
    `<row r="1">${cells}</row>` +
    `<row r="${n}"><c r="A${n}" t="inlineStr"><is><t>${esc(inline)}</t></is></c><c r="B${n}"><v>42.5</v></c>` +
    `<c r="C${n}" s="1"><v>45000</v></c><c r="D${n}"><f>B${n}*2</f><v>85</v></c></row>` +
    '</sheetData></worksheet>';
  const ct = `${OFFICE_CT}.spreadsheetml`;
  return zip({
    '[Content_Types].xml': contentTypes({
      'xl/workbook.xml': `${ct}.sheet.main+xml`,
      'xl/worksheets/sheet1.xml': `${ct}.worksheet+xml`,
      'xl/sharedStrings.xml': `${ct}.sharedStrings+xml`,
      'xl/styles.xml': `${ct}.styles+xml`,
    }),
    '_rels/.rels': rels([['rId1', 'officeDocument', 'xl/workbook.xml']]),
    'xl/workbook.xml': `${XML}<workbook xmlns="${S}" xmlns:r="${R}"><sheets><sheet name="Data" sheetId="1" r:id="rId1"/></sheets></workbook>`,
    'xl/_rels/workbook.xml.rels': rels([
      ['rId1', 'worksheet', 'worksheets/sheet1.xml'],
      ['rId2', 'sharedStrings', 'sharedStrings.xml'],
      ['rId3', 'styles', 'styles.xml'],
    ]),
    'xl/worksheets/sheet1.xml': sheet,
    'xl/sharedStrings.xml': `${XML}<sst xmlns="${S}" count="${shared.length}" uniqueCount="${shared.length}">${si.join('')}</sst>`,
    'xl/styles.xml':
      `${XML}<styleSheet xmlns="${S}"><numFmts count="1"><numFmt numFmtId="164" formatCode="yyyy-mm-dd"/></numFmts>` +
      '<fonts count="1"><font/></fonts><fills count="1"><fill/></fills><borders count="1"><border/></borders>' +
      '<cellStyleXfs count="1"><xf/></cellStyleXfs><cellXfs count="2"><xf/><xf numFmtId="164" applyNumberFormat="1"/></cellXfs></styleSheet>',
  });
}

const ODF_NS =
  'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" ' +
  'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" ' +
  'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" office:version="1.3"';

/** An ODF paragraph: its runs, every second in a span; a `text:s` for a space between the first two words. */
const odfPara = (runs: readonly string[]) =>
  `<text:p>${runs.map((text, i) => (i % 2 ? `<text:span text:style-name="T1">${esc(text)}</text:span>` : esc(text))).join('')}</text:p>`;

/** An .odt (`kind` text) or .odp (`presentation`, each paragraph a slide's frame): mimetype first and stored. */
export function odfFile(kind: 'text' | 'presentation', paragraphs: readonly (readonly string[])[]): Uint8Array {
  const body =
    kind === 'text'
      ? `<office:text>${paragraphs.map(odfPara).join('')}</office:text>`
      : `<office:presentation>${paragraphs
          .map(
            (runs, i) =>
              `<draw:page draw:name="page${i + 1}"><draw:frame svg:x="1cm" svg:y="1cm" svg:width="20cm" svg:height="3cm">` +
              `<draw:text-box>${odfPara(runs)}</draw:text-box></draw:frame></draw:page>`,
          )
          .join('')}</office:presentation>`;
  const manifest =
    `${XML}<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3">` +
    `<manifest:file-entry manifest:full-path="/" manifest:media-type="application/vnd.oasis.opendocument.${kind}"/>` +
    '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/>' +
    '<manifest:file-entry manifest:full-path="Pictures/image1.png" manifest:media-type="image/png"/>' +
    '</manifest:manifest>';
  return zipSync({
    mimetype: [strToU8(`application/vnd.oasis.opendocument.${kind}`), { level: 0 }],
    'content.xml': strToU8(
      `${XML}<office:document-content ${ODF_NS}><office:body>${body}</office:body></office:document-content>`,
    ),
    'META-INF/manifest.xml': strToU8(manifest),
    'Pictures/image1.png': PNG,
  });
}

/** An EPUB 3 with EPUB 2's NCX too: one XHTML chapter per entry of `chapters` (its title and paragraphs). */
export function epubFile(
  title: string,
  chapters: readonly { title: string; paragraphs: readonly string[] }[],
): Uint8Array {
  const files: Zippable = { mimetype: [strToU8('application/epub+zip'), { level: 0 }] };
  files['META-INF/container.xml'] = strToU8(
    `${XML}<container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles>` +
      '<rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>',
  );
  const items = chapters.map((_, i) => `<item id="c${i}" href="c${i}.xhtml" media-type="application/xhtml+xml"/>`);
  files['OEBPS/content.opf'] = strToU8(
    `${XML}<package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">` +
      `<dc:identifier id="id">urn:uuid:00000000-0000-4000-8000-000000000000</dc:identifier><dc:title>${esc(title)}</dc:title><dc:language>en</dc:language>` +
      '<meta property="dcterms:modified">2026-01-01T00:00:00Z</meta></metadata><manifest>' +
      '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>' +
      `<item id="ncx" href="toc.ncx" media-type="application/x-dtbncx+xml"/>${items.join('')}</manifest>` +
      `<spine toc="ncx">${chapters.map((_, i) => `<itemref idref="c${i}"/>`).join('')}</spine></package>`,
  );
  const xhtml = (head: string, body: string) =>
    `${XML}<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml" xmlns:epub="http://www.idpf.org/2007/ops"><head><title>${esc(head)}</title></head><body>${body}</body></html>`;
  files['OEBPS/nav.xhtml'] = strToU8(
    xhtml(
      title,
      `<nav epub:type="toc"><ol>${chapters.map((c, i) => `<li><a href="c${i}.xhtml">${esc(c.title)}</a></li>`).join('')}</ol></nav>`,
    ),
  );
  files['OEBPS/toc.ncx'] = strToU8(
    `${XML}<!DOCTYPE ncx PUBLIC "-//NISO//DTD ncx 2005-1//EN" "http://www.daisy.org/z3986/2005/ncx-2005-1.dtd">\n` +
      `<ncx xmlns="http://www.daisy.org/z3986/2005/ncx/" version="2005-1"><head/><docTitle><text>${esc(title)}</text></docTitle><navMap>` +
      chapters
        .map(
          (c, i) =>
            `<navPoint id="n${i}" playOrder="${i + 1}"><navLabel><text>${esc(c.title)}</text></navLabel><content src="c${i}.xhtml"/></navPoint>`,
        )
        .join('') +
      '</navMap></ncx>',
  );
  chapters.forEach((c, i) => {
    files[`OEBPS/c${i}.xhtml`] = strToU8(
      xhtml(c.title, `<h1>${esc(c.title)}</h1>${c.paragraphs.map((p) => `<p>${esc(p)}</p>`).join('')}`),
    );
  });
  files['OEBPS/image1.png'] = PNG;
  return zipSync(files);
}

/** Whether LibreOffice's `soffice` is installed (the reader checks need it: docs/text.md). */
export const hasLibreOffice = (): boolean =>
  ['/usr/bin/soffice', '/usr/local/bin/soffice'].some((file) => existsSync(file));

/**
 * The paragraphs LibreOffice reads in each file (by name; its extension says its type), in its order: the files
 * converted headless to flat OpenDocument and each `text:p` / `text:h`'s text taken, empty ones left out. One
 * `soffice` run per target type, all at once, each with its own profile (LibreOffice locks a profile, and most of a
 * run is its ~5 s start). Rejects when it cannot open a file.
 */
export async function readerTexts(files: Record<string, Uint8Array>): Promise<Record<string, string[]>> {
  const dir = mkdtempSync(path.join(tmpdir(), 'office-reader-'));
  const targetOf = (name: string) =>
    ({ docx: 'fodt', odt: 'fodt', pptx: 'fodp', odp: 'fodp', xlsx: 'fods' })[path.extname(name).slice(1)] ?? 'fodt';
  try {
    const byTarget = new Map<string, string[]>();
    for (const [name, bytes] of Object.entries(files)) {
      writeFileSync(path.join(dir, name), bytes);
      byTarget.set(targetOf(name), [...(byTarget.get(targetOf(name)) ?? []), path.join(dir, name)]);
    }
    await Promise.all(
      [...byTarget].map(([target, inputs]) =>
        execFileAsync(
          'soffice',
          [
            `-env:UserInstallation=file://${dir}/profile-${target}`,
            '--headless',
            '--convert-to',
            target,
            '--outdir',
            `${dir}/out`,
            ...inputs,
          ],
          { timeout: 180_000 },
        ),
      ),
    );
    return Object.fromEntries(
      Object.keys(files).map((name) => {
        const out = path.join(dir, 'out', `${path.basename(name, path.extname(name))}.${targetOf(name)}`);
        if (!existsSync(out)) throw new Error(`LibreOffice did not open ${name}`);
        return [name, paragraphsOf(readFileSync(out, 'utf8'))];
      }),
    );
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * The text of each non-empty `text:p` / `text:h` of a flat OpenDocument file, master pages and styles first; the
 * paragraphs of notes and comments, which nest inside another paragraph, after the rest.
 */
function paragraphsOf(xml: string): string[] {
  const nested = /<(office:annotation|text:note)\b[\s\S]*?<\/\1>/g;
  const inner = [...xml.matchAll(nested)].map((m) => m[0].replace(/<dc:[^>]*>[^<]*<\/dc:[^>]*>/g, ''));
  return [xml.replace(nested, ''), ...inner].flatMap(flatParagraphs);
}

function flatParagraphs(xml: string): string[] {
  return [...xml.matchAll(/<text:(p|h)\b[^>]*?(?:\/>|>([\s\S]*?)<\/text:\1>)/g)]
    .map((m) =>
      (m[2] ?? '')
        .replace(/<text:s\/>/g, ' ')
        .replace(/<text:tab\/>/g, '\t')
        .replace(/<[^>]*>/g, '')
        .replace(/&lt;/g, '<')
        .replace(/&gt;/g, '>')
        .replace(/&quot;/g, '"')
        .replace(/&apos;/g, "'")
        .replace(/&amp;/g, '&')
        .trim(),
    )
    .filter((text) => text !== '');
}
