/**
 * @module router/apis/document-office — an Office or EPUB document job (./documents.ts): the file planned in the
 * office thread (./office-threads.ts), its units translated as plain text in batches — a few at once, each a request
 * through the router's path, halved when the model server finds it too large or too slow and a lone unit cut like a
 * text, refusals waited out (./document-pieces.ts) — and the file rebuilt from their translations in the thread.
 * And an upload read: checked and counted, an Office file planned in the thread.
 */
import { randomUUID } from 'node:crypto';
import type { OfficeKind } from '../../model-server/text/office/office-document.js';
import { type DocumentContent, documentType, isOffice, readDocument } from './document-files.js';
import { type Cut, cutDocument, type PieceTranslation, translateInPieces } from './document-pieces.js';
import { UNIT_SEPARATOR } from './office-task.js';
import type { OfficeThreads } from './office-threads.js';

/** Batches of one document in flight at once: enough to keep the model servers' batches full. */
const BATCHES_AT_ONCE = 4;

export interface OfficeJob extends Omit<PieceTranslation<string[]>, 'cut'> {
  threads: OfficeThreads;
  /** The units' language, for where a lone unit may be cut (`cutDocument`). */
  srcLang: string;
}

/** An upload of `filename` read: a text file as UTF-8, an Office file planned in the office thread (and counted). */
export async function readContent(
  filename: string,
  bytes: Uint8Array,
  threads: OfficeThreads,
): Promise<DocumentContent> {
  const format = documentType(filename)?.format;
  if (format !== undefined && isOffice(format))
    return { bytes, characters: (await threads.plan(bytes, format)).characters };
  const { text, bom } = readDocument(bytes);
  return { text, bom, characters: [...text].length };
}

/** `bytes` (a file of `kind`) translated. @throws ServeError as translateInPieces, or the thread's 400 / 413 */
export async function translateOffice(bytes: Uint8Array, kind: OfficeKind, job: OfficeJob): Promise<Uint8Array> {
  // The thread keeps this plan for the rebuild, so the file is parsed once here (and once at its upload).
  const keep = randomUUID();
  const { batches } = await job.threads.plan(bytes, kind, { keep, signal: job.signal });
  const translated: string[] = new Array<string>(batches.length);
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const at = next++;
      const units = batches[at]!.split(UNIT_SEPARATOR);
      const out = await translateInPieces(units, { ...job, cut: (piece) => cutUnits(piece, job.srcLang) });
      // A separator inside a translation would shift every unit after it.
      translated[at] = out.map((text) => text.replaceAll(UNIT_SEPARATOR, '')).join(UNIT_SEPARATOR);
    }
  };
  await Promise.all(Array.from({ length: Math.min(BATCHES_AT_ONCE, batches.length) }, worker));
  return job.threads.render(bytes, kind, translated, { keep, signal: job.signal });
}

/** A batch halved; a lone unit cut as plain text is (its two halves' translations joined as one unit's). */
function cutUnits(units: string[], lang: string): Cut<string[]> | null {
  if (units.length > 1) {
    const half = Math.ceil(units.length / 2);
    return { pieces: [units.slice(0, half), units.slice(half)], join: ([a, b]) => [...a, ...b] };
  }
  const cut = cutDocument(units[0]!, 'text', lang);
  if (cut === null) return null;
  return { pieces: [[cut.pieces[0]], [cut.pieces[1]]], join: ([a, b]) => [cut.join([a[0]!, b[0]!])] };
}
