/**
 * Office paragraphs whole across their runs (issue 38 item 1, Office): a .docx and a .pptx through the router's
 * document path (`POST /documents`, the office thread, `POST /` of a real model server asked for `alignment`) with
 * the copy model (tools/demo-model/copy-weights.ts), whose translation is its source token for token and whose
 * cross-attention says which source token each target token copies. So every run must come back holding exactly the
 * text it held: the file's parts come back byte for byte, and LibreOffice reads the same paragraphs. The same for
 * ODF's spans and a spreadsheet's rich shared string.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { strFromU8, strToU8, unzipSync, zipSync } from 'fflate';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DocumentJobs } from '../../router/apis/documents.js';
import { translateTexts } from '../../router/apis/translate-texts.js';
import { createRouterApp } from '../../router/app.js';
import { Upstream } from '../../router/upstream/upstream.js';
import { docxFile, hasLibreOffice, odfFile, pptxFile, readerTexts, xlsxFile } from '../../harness/office-files.js';
import { startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

const LANGUAGES = ['en', 'de'];
const MAX_REQUEST_CHARS = 80;
let server: TestServer;
let upstream: Upstream;
let jobs: DocumentJobs;
let app: ReturnType<typeof createRouterApp>;
const dir = mkdtempSync(path.join(tmpdir(), 'mt-office-runs-'));

beforeAll(async () => {
  // MAX_REQUEST_CHARS below the long paragraph's length: its unit is cut at its sentences and its halves' links
  // joined again (router/apis/document-office.ts `cutUnits`).
  server = await startTinyTranslationServer(['de'], {
    preset: 'tiny-copy',
    config: { maxNewTokens: 120, maxRequestChars: MAX_REQUEST_CHARS },
  });
  upstream = new Upstream({ url: server.inference, connections: 4, timeoutMs: 30_000 });
  jobs = new DocumentJobs({ dir, translate: (request) => translateTexts({ languages: LANGUAGES, upstream }, request) });
  app = createRouterApp(
    { maxBodyBytes: 1 << 22, languages: LANGUAGES, logBodies: false, maxRequestChars: 50_000 },
    { upstream, logger: pino({ level: 'silent' }), documents: jobs },
  );
});
afterAll(async () => {
  await jobs?.close(0);
  await upstream?.close();
  await server?.close();
  rmSync(dir, { recursive: true, force: true });
});

/** `bytes` translated en → de through `POST /documents`, its status polled, its result fetched. */
async function translateFile(bytes: Uint8Array, filename: string): Promise<Uint8Array> {
  const form = new FormData();
  form.append('src_lang', 'en');
  form.append('tgt_lang', 'de');
  form.append('file', new Blob([bytes as Uint8Array<ArrayBuffer>]), filename);
  const made = await app.request('/documents', { method: 'POST', body: form });
  expect(made.status, await made.clone().text()).toBe(202);
  const { document_id: id, document_key: key } = (await made.json()) as Record<string, string>;
  await until(`${filename} translated`, async () => {
    const status = (await (await app.request(`/documents/${id}?document_key=${key}`)).json()) as Record<
      string,
      unknown
    >;
    expect(status.status, JSON.stringify(status)).not.toBe('error');
    return status.status === 'done';
  });
  const result = await app.request(`/documents/${id}/result?document_key=${key}`);
  expect(result.status).toBe(200);
  return new Uint8Array(await result.arrayBuffer());
}

/** `text` translated en → de through `POST /`. */
async function plainTranslation(text: string): Promise<string> {
  const res = await app.request('/', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ src_lang: 'en', tgt_lang: 'de', src_text: text }),
  });
  expect(res.status).toBe(200);
  return ((await res.json()) as { translated: string }).translated;
}

/** A file that must come back as it went. */
const same = (bytes: Uint8Array): [Uint8Array, Uint8Array] => [bytes, bytes];

/** `bytes` with one part's text changed by `edit`. */
function withPart(bytes: Uint8Array, name: string, edit: (xml: string) => string): Uint8Array {
  const entries = unzipSync(bytes);
  entries[name] = strToU8(edit(strFromU8(entries[name]!)));
  return zipSync(entries);
}

/**
 * Paragraphs with a bold word and an italic word (docxFile makes every second run bold; the second is italic), the
 * second longer than a request may be, and with characters the copy model cannot write before its italic word: it
 * comes back shorter, so only the second half's links (shifted to where that half stands), not places in proportion,
 * put the italic run back on its word.
 */
const BODY = [
  ['The ', 'bold', ' word and the ', 'italic', ' word stay where they were.'],
  ['A second ', 'bold', ' sentence comes first here. Then Ωμέγα Ωμέγα Ωμέγα says it, with ', 'more', ' words in it.'],
];
const DOCX = withPart(docxFile(BODY), 'word/document.xml', (xml) =>
  xml.replace(/<w:rPr><w:b\/><\/w:rPr>(<w:t xml:space="preserve">(italic|more))/g, '<w:rPr><w:i/></w:rPr>$1'),
);
const PPTX = withPart(
  pptxFile([[['Press the ', 'red', ' button and the ', 'green', ' light turns on.']]], 'Speak slowly.'),
  'ppt/slides/slide1.xml',
  (xml) => xml.replace('b="1"/><a:t>green', 'i="1"/><a:t>green'),
);

describe('Office runs carried by the word alignment (copy model)', () => {
  it('POST / with alignment: each target word linked to the same source word', async () => {
    const text = 'Press the red button. The light turns on.';
    const post = async (extra: object) => {
      const res = await app.request('/', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ src_lang: 'en', tgt_lang: 'de', src_text: [text], ...extra }),
      });
      const body = (await res.json()) as { translated: string[]; alignment: number[][] };
      expect(res.status, JSON.stringify(body)).toBe(200);
      return body;
    };
    // Off unless asked; the sentences then cached without it are not what a request asking for it gets.
    expect(await post({})).toEqual({ translated: [text] });
    const body = await post({ alignment: true });
    expect(body.translated).toEqual([text]);
    const links = body.alignment[0]!;
    const words = [];
    for (let k = 0; k < links.length; k += 4) {
      const [t0, t1, s0, s1] = links.slice(k, k + 4) as [number, number, number, number];
      expect(text.slice(s0, s1).trim(), `link ${k / 4}`).toBe(body.translated[0]!.slice(t0, t1).trim());
      words.push(text.slice(s0, s1).trim());
    }
    // Every token of both sentences linked (joined across them as the text's translation was), in order.
    expect(words.join('')).toBe(text.replace(/\s/g, ''));
  });

  it(
    'a .docx, .pptx, .odt, .odp and a .xlsx rich string come back with every run holding the text it held',
    { timeout: 300_000 },
    async () => {
      expect(BODY[1]!.join('').length).toBeGreaterThan(MAX_REQUEST_CHARS);
      expect(strFromU8(unzipSync(DOCX)['word/document.xml']!).match(/<w:i\/>/g)).toHaveLength(2);
      // What the copy model writes for the long paragraph's middle run (the characters it cannot write left out).
      const long = BODY[1]!.join('');
      // Sent in its two sentences, as the document path cuts it (the whole is over MAX_REQUEST_CHARS).
      const cut = long.indexOf('Then');
      const copied = `${(await plainTranslation(long.slice(0, cut))).trim()} ${(await plainTranslation(long.slice(cut))).trim()}`;
      expect(copied.length).toBeLessThan(long.length - 6);
      const middle = BODY[1]![2]!;
      const copiedMiddle = copied.slice(copied.indexOf(' sentence'), copied.lastIndexOf('more'));
      expect(copied).toBe(BODY[1]![0]! + BODY[1]![1]! + copiedMiddle + BODY[1]![3]! + BODY[1]![4]!);
      const runs = ['Open the ', 'blue', ' door, then close the ', 'old', ' gate.'];
      // Each file, and what it must come back as: itself, but for what the copy model cannot write.
      const files: Record<string, [Uint8Array, Uint8Array]> = {
        'word.docx': [DOCX, withPart(DOCX, 'word/document.xml', (xml) => xml.replace(middle, copiedMiddle))],
        'slides.pptx': same(PPTX),
        'writer.odt': same(odfFile('text', [runs, ['One run alone.']])),
        'impress.odp': same(odfFile('presentation', [runs])),
        'sheet.xlsx': same(xlsxFile([runs, ['A plain cell.']], 'An inline cell.')),
      };
      const reader: Record<string, Uint8Array> = {};
      for (const [name, [source, expected]] of Object.entries(files)) {
        const result = await translateFile(source, name);
        const [before, after] = [unzipSync(expected), unzipSync(result)];
        expect(Object.keys(after)).toEqual(Object.keys(before));
        for (const part of Object.keys(before))
          expect(strFromU8(after[part]!), `${name} ${part}`).toBe(strFromU8(before[part]!));
        [reader[`in-${name}`], reader[`out-${name}`]] = [expected, result];
      }
      if (!hasLibreOffice()) {
        console.warn('office-runs.test: LibreOffice is not installed; the files are NOT opened in a reader here');
        return;
      }
      // One reader run per kind of file (each file's name its own: the reader names its output by it): each
      // translated file reads as the paragraphs it should hold.
      const texts = await readerTexts(reader);
      for (const name of Object.keys(files)) expect(texts[`out-${name}`], name).toEqual(texts[`in-${name}`]);
      expect(texts['out-word.docx']).toContain('The bold word and the italic word stay where they were.');
    },
  );
});
