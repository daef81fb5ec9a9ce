/**
 * @module router/apis/document-office — an Office or EPUB document job (./documents.ts): the file planned in the
 * office thread (./office-threads.ts), its units translated as plain text in batches — a few at once, each a request
 * through the router's path, halved when the model server finds it too large or too slow and a lone unit cut like a
 * text, refusals waited out (./document-pieces.ts) — and the file rebuilt from their translations in the thread, each
 * unit's links placing its paragraph's runs on the words they align with. Links are asked for the units with more
 * than one run, aligned word by word only in the sentences a run's start cuts (model-server/text/markup/inline-tags.ts
 * `Edges`): a one-run paragraph, or a sentence inside one run, pays no alignment pass.
 * And an upload read: checked and counted, an Office file planned in the thread.
 */
import { randomUUID } from 'node:crypto';
import type { OfficeKind } from '../../model-server/text/office/office-document.js';
import { type DocumentContent, documentType, isOffice, readDocument } from './document-files.js';
import { type Cut, cutDocument, type PieceTranslation, translateInPieces } from './document-pieces.js';
import { packLists, UNIT_SEPARATOR, unpackLists } from './office-task.js';
import type { OfficeThreads } from './office-threads.js';

/** Batches of one document in flight at once: enough to keep the model servers' batches full. */
const BATCHES_AT_ONCE = 4;

/**
 * A unit of an Office file: its text and where its runs after the first start in it, and once translated, the
 * translation's links to the unit's text.
 */
interface OfficeUnit {
  text: string;
  edges: readonly number[];
  links?: number[] | undefined;
}

export interface OfficeJob extends Omit<PieceTranslation<OfficeUnit[]>, 'cut' | 'translate'> {
  threads: OfficeThreads;
  /** The units' language, for where a lone unit may be cut (`cutDocument`). */
  srcLang: string;
  /**
   * One request for some units: their translations, and when `edges` are given (per unit, where its runs start),
   * their links as the model server gave them.
   */
  translate(
    units: string[],
    edges?: readonly (readonly number[])[],
  ): Promise<{ translated: string[]; alignments?: (number[] | undefined)[] }>;
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
  const { batches, edges } = await job.threads.plan(bytes, kind, { keep, signal: job.signal });
  const translated: string[] = new Array<string>(batches.length);
  const links: Int32Array[] = new Array<Int32Array>(batches.length);
  const translate = async (units: OfficeUnit[]): Promise<OfficeUnit[]> => {
    const placing = units.some((unit) => unit.edges.length > 0);
    const texts = units.map((unit) => unit.text);
    const { translated, alignments } = await job.translate(
      texts,
      placing ? units.map((unit) => unit.edges) : undefined,
    );
    return translated.map((text, i) => ({ text, edges: units[i]!.edges, links: alignments?.[i] }));
  };
  let next = 0;
  const worker = async () => {
    while (next < batches.length) {
      const at = next++;
      const unitEdges = unpackLists(edges[at]!);
      const units = batches[at]!.split(UNIT_SEPARATOR).map((text, i): OfficeUnit => ({
        text,
        edges: unitEdges[i] ?? [],
      }));
      const out = await translateInPieces(units, { ...job, translate, cut: (piece) => cutUnits(piece, job.srcLang) });
      // A separator inside a translation would shift every unit after it (and its links, then dropped).
      const clean = out.map((unit): OfficeUnit =>
        unit.text.includes(UNIT_SEPARATOR) ? { text: unit.text.replaceAll(UNIT_SEPARATOR, ''), edges: [] } : unit,
      );
      translated[at] = clean.map((unit) => unit.text).join(UNIT_SEPARATOR);
      links[at] = packLists(clean.map((unit) => unit.links));
    }
  };
  await Promise.all(Array.from({ length: Math.min(BATCHES_AT_ONCE, batches.length) }, worker));
  return job.threads.render(bytes, kind, translated, { keep, signal: job.signal, links });
}

/**
 * A batch halved; a lone unit cut as plain text is (its two halves' translations joined as one unit's, the second
 * half's links shifted to where its source and its translation stand in the unit's).
 */
function cutUnits(units: OfficeUnit[], lang: string): Cut<OfficeUnit[]> | null {
  if (units.length > 1) {
    const half = Math.ceil(units.length / 2);
    return { pieces: [units.slice(0, half), units.slice(half)], join: ([a, b]) => [...a, ...b] };
  }
  const { text, edges } = units[0]!;
  const cut = cutDocument(text, 'text', lang);
  if (cut === null) return null;
  const [first, second] = cut.pieces;
  const halves: [OfficeUnit[], OfficeUnit[]] = [
    [{ text: first, edges: edges.filter((edge) => edge < first.length) }],
    [{ text: second, edges: edges.filter((edge) => edge > first.length).map((edge) => edge - first.length) }],
  ];
  return {
    pieces: halves,
    join: ([[a], [b]]) => {
      // A plain text's halves join as they are (cutDocument), so the second's translation follows the first's.
      const shifted = b!.links?.map((value, k) => value + (k % 4 < 2 ? a!.text.length : first.length));
      const links =
        a!.links === undefined && shifted === undefined ? undefined : [...(a!.links ?? []), ...(shifted ?? [])];
      return [{ text: cut.join([a!.text, b!.text]), edges, links }];
    },
  };
}
