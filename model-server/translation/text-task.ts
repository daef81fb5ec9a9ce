/**
 * @module model-server/translation/text-task — the text pool's thread entry (text-pool.ts): a translation request
 * outlined into sentence jobs, and its answer rendered from their values, in a worker thread, so that markup and
 * subtitle parsing, language detection, segmentation and glossary matching never hold the model server's event loop.
 *
 * One default export takes every message (`TextTask`), so that the bootstrap that runs this module from source
 * (common/tsx-thread.mjs) can re-export it whole. What comes in and goes out is structured-cloned; a `ServeError` (a
 * 400, a 413) comes back as its wire form, since a thrown error would lose its code on the way.
 */
import { ServeError, type WireError } from '../../common/errors.js';
import type { TranslationRequest } from '../../common/translation-contract.js';
import { glossaryEntries, type GlossaryEntries } from '../text/glossary.js';
import {
  answerTranslation,
  planSentences,
  type DocumentOutline,
  type SentenceAnswers,
  type TranslationLimits,
} from './translation-plan.js';

/** A stored glossary as it crosses to a thread: its entries once encoded, shared rather than copied per request. */
export interface SharedGlossary {
  /** Stands for these entries for the life of the process: a thread decodes them once per key. */
  key: number;
  /** `JSON.stringify([...entries])` as UTF-8. */
  bytes: SharedArrayBuffer;
  sourceLang: string;
}

export interface OutlineTask {
  request: TranslationRequest;
  tgtLang: string;
  readable: readonly string[] | undefined;
  limits: TranslationLimits;
  glossary?: SharedGlossary;
}

export interface AnswerTask {
  request: TranslationRequest;
  docs: DocumentOutline;
  answers: SentenceAnswers;
  tgtLang: string;
}

export type TaskOutcome<T> = { ok: true; value: T } | { ok: false; error: WireError };

/** One message to a text thread. */
export type TextTask =
  { name: 'outline'; task: OutlineTask } | { name: 'answer'; task: AnswerTask } | { name: 'ready' };

/**
 * `outline`: a request's sentences and how their answers rejoin (translation-plan.ts `planSentences`); `answer`:
 * the response from every sentence's answer, by id (`answerTranslation`); `ready`: nothing, once this module is loaded.
 */
export default function run(message: TextTask): TaskOutcome<unknown> {
  switch (message.name) {
    case 'outline': {
      const { request, tgtLang, readable, limits, glossary } = message.task;
      return outcome(() =>
        planSentences(request, {
          tgtLang,
          readable,
          limits,
          ...(glossary ? { glossary: { entries: entriesOf(glossary), sourceLang: glossary.sourceLang } } : {}),
        }),
      );
    }
    case 'answer': {
      const { request, docs, answers, tgtLang } = message.task;
      return outcome(() => answerTranslation(request, docs, answers, tgtLang));
    }
    case 'ready':
      return { ok: true, value: true };
  }
}

function outcome<T>(work: () => T): TaskOutcome<T> {
  try {
    return { ok: true, value: work() };
  } catch (err) {
    if (err instanceof ServeError) return { ok: false, error: err.toWire() };
    throw err;
  }
}

/**
 * Stored glossaries decoded in this thread, by key, least recently used first; bounded by their encoded size, so a
 * thread keeps a few large glossaries or many small ones (their matching index lives as long as they do).
 */
const decoded = new Map<number, { entries: GlossaryEntries; bytes: number }>();
const DECODED_MAX_BYTES = 64 * 1024 * 1024;
let decodedBytes = 0;

function entriesOf(glossary: SharedGlossary): GlossaryEntries {
  const hit = decoded.get(glossary.key);
  if (hit !== undefined) {
    decoded.delete(glossary.key);
    decoded.set(glossary.key, hit);
    return hit.entries;
  }
  // A copy first: TextDecoder does not read shared memory.
  const json = new TextDecoder().decode(new Uint8Array(glossary.bytes).slice());
  const entries = glossaryEntries(JSON.parse(json) as [string, string][]);
  const bytes = glossary.bytes.byteLength;
  decoded.set(glossary.key, { entries, bytes });
  decodedBytes += bytes;
  for (const [key, old] of decoded) {
    if (decodedBytes <= DECODED_MAX_BYTES || key === glossary.key) break;
    decoded.delete(key);
    decodedBytes -= old.bytes;
  }
  return entries;
}
