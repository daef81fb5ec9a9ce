/**
 * @module router/apis/office-task — the office thread's entry (./office-threads.ts): an Office or EPUB file planned
 * (its units) or rebuilt from their translations (model-server/text/office/), off the router's event loop. What comes
 * in and goes out is structured-cloned; a `ServeError` (a 400, a 413) comes back as its wire form, since a thrown
 * error would lose its code on the way. The units cross in batches, each one string of its units joined by NUL (which
 * XML text never holds): the router splits one batch at a time as it sends it, where cloning a million short strings
 * would hold its event loop. Their edges (where a unit's runs start) and their translations' word alignments cross
 * the same way: one Int32Array per batch (`packLists`).
 */
import { ServeError, type WireError } from '../../common/errors.js';
import { type OfficeKind, type OfficePlan, planOffice } from '../../model-server/text/office/office-document.js';

/** The separator of units in a joined list: no XML part can hold it. */
export const UNIT_SEPARATOR = '\u0000';

/** Most units, and characters, of a batch: one request to the model servers (well under MAX_REQUEST_CHARS). */
export const BATCH_UNITS = 64;
export const BATCH_CHARS = 16_000;

/**
 * A file's units in batches (each joined by UNIT_SEPARATOR), each batch's units' edges (`packLists`; model-server/
 * text/markup/inline-tags.ts `Edges`), and their characters (code points), billed.
 */
export interface OfficeUnits {
  batches: string[];
  edges: Int32Array[];
  characters: number;
}

/** `keep`: a job's key, under which `plan` keeps its plan for the job's `render` (which plans again without it). */
export type OfficeTask =
  | { name: 'plan'; bytes: Uint8Array; kind: OfficeKind; keep?: string }
  | { name: 'render'; bytes: Uint8Array; kind: OfficeKind; translations: string[]; links?: Int32Array[]; keep?: string }
  | { name: 'ready' };

/**
 * Plans kept from a job's `plan` to its `render`, oldest first: a few, since each holds its file inflated. One gone
 * (dropped, or its thread stopped while idle) is planned again.
 */
const KEPT_PLANS = 4;
const kept = new Map<string, OfficePlan>();

export type OfficeOutcome = { ok: true; value: OfficeUnits | Uint8Array | number } | { ok: false; error: WireError };

/**
 * `plan`: the file's units in batches; `render`: the file from its units' translations, in the plan's batches (each
 * joined); `ready`: nothing, once this module is loaded.
 */
export default function run(task: OfficeTask): OfficeOutcome {
  try {
    switch (task.name) {
      case 'plan': {
        const plan = planOffice(task.bytes, task.kind);
        if (task.keep !== undefined) {
          kept.set(task.keep, plan);
          for (const key of kept.keys()) if (kept.size > KEPT_PLANS) kept.delete(key);
        }
        return { ok: true, value: batchesOf(plan.texts, plan.edges) };
      }
      case 'render': {
        const plan = (task.keep === undefined ? undefined : kept.get(task.keep)) ?? planOffice(task.bytes, task.kind);
        if (task.keep !== undefined) kept.delete(task.keep);
        const translations = task.translations.flatMap((batch) => batch.split(UNIT_SEPARATOR));
        const links = task.links?.flatMap(unpackLists);
        if (links !== undefined && links.length !== translations.length)
          throw new Error(`${links.length} alignments for ${translations.length} translations`);
        return { ok: true, value: plan.render(translations, links) };
      }
      case 'ready':
        return { ok: true, value: 1 };
    }
  } catch (err) {
    if (err instanceof ServeError) return { ok: false, error: err.toWire() };
    throw err;
  }
}

/** A batch's units' lists of numbers as one array: per unit its count of numbers (-1: no list), then the numbers. */
export function packLists(units: readonly (readonly number[] | undefined)[]): Int32Array {
  const out = new Int32Array(units.reduce((sum, links) => sum + 1 + (links?.length ?? 0), 0));
  let at = 0;
  for (const links of units) {
    out[at++] = links === undefined ? -1 : links.length;
    if (links !== undefined) out.set(links, at);
    at += links?.length ?? 0;
  }
  return out;
}

/** `packLists` undone. */
export function unpackLists(packed: Int32Array): (number[] | undefined)[] {
  const out: (number[] | undefined)[] = [];
  for (let at = 0; at < packed.length;) {
    const count = packed[at++]!;
    out.push(count < 0 ? undefined : Array.from(packed.subarray(at, at + count)));
    at += Math.max(0, count);
  }
  return out;
}

function batchesOf(texts: readonly string[], edges: readonly (readonly number[])[]): OfficeUnits {
  const batches: string[] = [];
  const batchEdges: Int32Array[] = [];
  let from = 0;
  let chars = 0;
  let characters = 0;
  const close = (to: number) => {
    batches.push(texts.slice(from, to).join(UNIT_SEPARATOR));
    batchEdges.push(packLists(edges.slice(from, to)));
    from = to;
    chars = 0;
  };
  texts.forEach((text, i) => {
    if (i - from === BATCH_UNITS || (i > from && chars + text.length > BATCH_CHARS)) close(i);
    chars += text.length;
    for (const _ of text) characters++;
  });
  if (from < texts.length) close(texts.length);
  return { batches, edges: batchEdges, characters };
}
