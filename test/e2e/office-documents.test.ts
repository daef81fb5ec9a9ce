/**
 * Office documents end to end: the official DeepL client's `translateDocument` of a .docx and a .pptx,
 * LibreTranslate's `/translate_file` of an .odt and an .epub, and the native `POST /documents` of the .docx, against
 * the whole stack (tiny generated model, model server, router). Each file that comes back opens in LibreOffice, and
 * its text is the model's translation of each of its units, in order: the same units sent through `POST /` come back byte for byte (the model server's translation
 * cache), so the generated model's output — not a translation — can still be checked exactly.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as deepl from 'deepl-node';
import { unzipSync } from 'fflate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  DOCX_FIXED_TEXTS,
  docxFile,
  epubFile,
  hasLibreOffice,
  odfFile,
  pptxFile,
  readerTexts,
} from '../../harness/office-files.js';
import { until } from '../../harness/polling.js';
import { stopAll } from '../../harness/process-registry.js';
import { type Stack, startStack, translateBody } from '../../harness/stack.js';
import { type OfficeKind, planOffice } from '../../model-server/text/office/office-document.js';

let stack: Stack;
const dir = mkdtempSync(path.join(tmpdir(), 'mt-office-e2e-'));

beforeAll(async () => {
  stack = await startStack({
    languages: ['en', 'de'],
    handler: 'translation',
    demoModel: 'tiny',
    register: { batchSize: 8, maxBatchDelayMs: 5, workers: 1 },
  });
});

afterAll(async () => {
  await stack?.stop();
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
});

const BODY = [
  ['The weather is ', 'very', ' nice today.'],
  ['We are going to ', 'the park', ' together. It is not far.'],
];
const FILES = {
  docx: docxFile(BODY),
  pptx: pptxFile([[['Welcome to ', 'our', ' meeting.']], [['Thank you ', 'for', ' listening.']]], 'Speak slowly.'),
  odt: odfFile('text', [['Good morning, ', 'everyone', '.'], ['The train leaves at noon.']]),
  epub: epubFile('A Short Story', [{ title: 'The Beginning', paragraphs: ['It was a quiet evening.'] }]),
} satisfies Partial<Record<OfficeKind, Uint8Array>>;

/** Each unit of `kind`'s file as `POST /` translates it into German, trimmed as the file gets it. */
async function unitTranslations(kind: keyof typeof FILES): Promise<string[]> {
  const units = planOffice(FILES[kind], kind).texts;
  const res = await fetch(stack.routerUrls[0]!, { method: 'POST', body: translateBody('de', [...units]) });
  expect(res.status).toBe(200);
  return ((await res.json()) as { translated: string[] }).translated.map((text) => text.trim());
}

/** Fails unless each of `texts` is found in `read`, each after the one before. */
function expectInOrder(read: readonly string[], texts: readonly string[], name: string): void {
  const whole = read.join('\n');
  let at = 0;
  for (const text of texts.filter((t) => t !== '')) {
    const found = whole.indexOf(text, at);
    expect(
      found,
      `${name}: ${JSON.stringify(text)} after offset ${at} of ${JSON.stringify(whole)}`,
    ).toBeGreaterThanOrEqual(0);
    at = found + text.length;
  }
}

describe('Office files through every API', () => {
  it(
    'deepl-node translates a .docx and a .pptx (translateDocument); LibreTranslate an .odt and an .epub; POST /documents a .docx',
    { timeout: 300_000 },
    async () => {
      const translator = new deepl.Translator('any-key', { serverUrl: stack.routerUrls[0]!, maxRetries: 0 });
      for (const kind of ['docx', 'pptx'] as const) writeFileSync(path.join(dir, `in.${kind}`), FILES[kind]);
      const statuses = await Promise.all(
        (['docx', 'pptx'] as const).map((kind) =>
          translator.translateDocument(path.join(dir, `in.${kind}`), path.join(dir, `out.${kind}`), 'en', 'de'),
        ),
      );
      expect(statuses.map((s) => s.status)).toEqual(['done', 'done']);
      const results: Record<string, Uint8Array> = {
        'docx-out.docx': readFileSync(path.join(dir, 'out.docx')),
        'pptx-out.pptx': readFileSync(path.join(dir, 'out.pptx')),
      };
      for (const kind of ['odt', 'epub'] as const) {
        const form = new FormData();
        for (const [name, value] of Object.entries({ source: 'en', target: 'de' })) form.append(name, value);
        form.append('file', new Blob([FILES[kind] as Uint8Array<ArrayBuffer>]), `in.${kind}`);
        const res = await fetch(`${stack.routerUrls[0]}/translate_file`, { method: 'POST', body: form });
        expect(res.status).toBe(200);
        const { translatedFileUrl } = (await res.json()) as { translatedFileUrl: string };
        const download = await fetch(`${stack.routerUrls[0]}${new URL(translatedFileUrl).pathname}`);
        expect(download.status).toBe(200);
        results[`${kind}-out.${kind}`] = new Uint8Array(await download.arrayBuffer());
      }

      // The native API: the same .docx through POST /documents, its status, then its result.
      const form = new FormData();
      form.append('tgt_lang', 'de');
      form.append('file', new Blob([FILES.docx as Uint8Array<ArrayBuffer>]), 'native.docx');
      const made = await fetch(`${stack.routerUrls[0]}/documents`, { method: 'POST', body: form });
      expect(made.status).toBe(202);
      const { document_id: id, document_key: key } = (await made.json()) as Record<string, string>;
      const status = async () =>
        (
          (await (await fetch(`${stack.routerUrls[0]}/documents/${id}?document_key=${key}`)).json()) as Record<
            string,
            string
          >
        ).status;
      await until('the native document done', async () => (await status()) === 'done');
      const nativeResult = await fetch(`${stack.routerUrls[0]}/documents/${id}/result?document_key=${key}`);
      expect(nativeResult.status).toBe(200);
      results['native-out.docx'] = new Uint8Array(await nativeResult.arrayBuffer());

      const docx = await unitTranslations('docx');
      const pptx = await unitTranslations('pptx');
      const odt = await unitTranslations('odt');
      const epub = await unitTranslations('epub');
      // The EPUB's chapter holds its paragraph's translation (escaped as XHTML text).
      const chapter = new TextDecoder().decode(unzipSync(results['epub-out.epub']!)['OEBPS/c0.xhtml']);
      const escaped = (text: string) => text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
      const paragraph = planOffice(FILES.epub, 'epub').texts.indexOf('It was a quiet evening.');
      expect(chapter).toContain(`<p>${escaped(epub[paragraph]!)}</p>`);

      if (!hasLibreOffice()) {
        console.warn('office-documents.test: LibreOffice is not installed; the files are NOT opened in a reader here');
        return;
      }
      const read = await readerTexts({
        'docx-out.docx': results['docx-out.docx']!,
        'pptx-out.pptx': results['pptx-out.pptx']!,
        'odt-out.odt': results['odt-out.odt']!,
        'native-out.docx': results['native-out.docx']!,
      });
      // The body's units in order (the header, footer, footnote and comment are read where LibreOffice puts them).
      const bodyUnits = BODY.length + DOCX_FIXED_TEXTS.afterBody.length;
      expectInOrder(read['docx-out.docx']!, docx.slice(0, bodyUnits), 'docx');
      for (const text of docx.slice(bodyUnits)) expect(read['docx-out.docx']!.join('\n')).toContain(text);
      expect(read['native-out.docx']).toEqual(read['docx-out.docx']);
      // The slides in order; the notes after their slide.
      expectInOrder(read['pptx-out.pptx']!, pptx.slice(0, 2), 'pptx');
      expect(read['pptx-out.pptx']!.join('\n')).toContain(pptx[2]);
      expectInOrder(read['odt-out.odt']!, odt, 'odt');
      expect(read['odt-out.odt']).toHaveLength(2);
    },
  );
});
