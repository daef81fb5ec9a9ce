/**
 * @module router/apis/documents — whole files translated for the native `/documents` (../native-documents.ts), DeepL's
 * document API (./deepl-documents.ts) and LibreTranslate's `/translate_file` (./libretranslate.ts): plain text, HTML,
 * SRT, WebVTT, and Office and EPUB files (./document-office.ts), kept in one folder that every router instance of the
 * machine shares (RUN_DIR/documents), so whichever instance a client's next call reaches can answer it.
 *
 * The instance that takes a document translates it in the background, through the same path as a text (translateTexts):
 * as one request or, when the model server finds it too large (MAX_REQUEST_CHARS, MAX_REQUEST_SENTENCES) or too slow,
 * as pieces cut where the format allows (./document-pieces.ts). A refusal under load or a model server away (502, 503)
 * is waited out, never passed on: an accepted document ends translated or failed with its reason, by its deadline at
 * the latest.
 *
 * ```
 * upload ─ <id>.source, <id>.json queued ─▶ job: translating ─ piece … piece ─▶ <id>.result, done | error
 * ```
 * The files are ./document-folder.ts'. `<id>.json` is replaced whole at each step and names the process running the
 * job; an instance asked about a job whose process has died takes it over. A document is removed when its result is
 * fetched (DeepL) or `keepMs` after its upload: one past that is never served; every instance sweeps on a timer.
 *
 * Every call about a document gives its key (DeepL's `document_key`, LibreTranslate's download URL holds it), never its
 * id alone: the id is in logs and request ids. With API keys on, a document belongs to the API key that uploaded it,
 * which keeps at most its `maxDocuments` of the folder's `maxDocuments`, and is billed only once its document has its
 * slot (`submit`'s `bill`): an upload refused for room costs nothing.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { ServeError, toServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { checkFilename, type DocumentContent, documentType, isOffice } from './document-files.js';
import { readContent, translateOffice } from './document-office.js';
import {
  type DocumentApi,
  DocumentFolder,
  type DocumentRecord,
  type DocumentState,
  hashKey,
  keyMatches,
} from './document-folder.js';

export type { DocumentApi, DocumentState } from './document-folder.js';
import { cutDocument, type DocumentFormat, MAX_RETRY_WAIT_MS, translateInPieces } from './document-pieces.js';
import { OfficeThreads } from './office-threads.js';

/** What callers see of a document. */
export interface DocumentView {
  id: string;
  filename: string;
  state: DocumentState;
  characters: number;
  error: { status: number; message: string } | null;
}

export type DocumentUpload = DocumentContent & {
  filename: string;
  /** A served language, or `auto`. */
  srcLang: string;
  tgtLang: string;
  glossary?: Record<string, string> | undefined;
  /** The API key uploading it (keys on): it alone may ask about the document, and keeps at most `maxDocuments`. */
  owner?: { id: string; maxDocuments: number } | undefined;
  api: DocumentApi;
};

/** What a job asks of the router's translation path: a `TextsRequest` of translate-texts.ts `translateTexts`. */
export interface DocumentTranslation {
  texts: string[];
  format: DocumentFormat;
  srcLang: string;
  tgtLang: string;
  glossary?: Record<string, string>;
  /** DeepL fails a document already in its target language (translate-texts.ts `TextsRequest`). */
  sameLanguage?: 'refuse';
  /** Each text's links wanted, around these edges (an Office file's units: where their runs start, to place them). */
  alignmentEdges?: readonly (readonly number[])[];
  requestId: string;
  signal: AbortSignal;
}

export interface DocumentJobsOptions {
  /** The folder every router instance of the machine shares. */
  dir: string;
  /** Translates texts through the router's path (translate-texts.ts `translateTexts`). */
  translate(request: DocumentTranslation): Promise<{ translated: string[]; alignments?: (number[] | undefined)[] }>;
  logger?: Logger | undefined;
  /** How long a document is kept after its upload, ms. Default 1 hour. */
  keepMs?: number;
  /** The longest a document may take, waits for a busy model server included, ms. Default 15 minutes. */
  jobTimeoutMs?: number;
  /** Documents this process translates at once. Default 2. */
  concurrency?: number;
  /** Documents kept at once in the folder; an upload past it is refused with 503. Default 1000. */
  maxDocuments?: number;
}

/** What a document's key proves: that the caller is the one its upload answered (and, keys on, its API key). */
export interface DocumentKey {
  key: string;
  owner: string | undefined;
}

/** How often each instance removes expired documents: every minute, or `keepMs` when shorter (at least 100 ms). */
const SWEEP_EVERY_MS = 60_000;

export class DocumentJobs {
  readonly #folder: DocumentFolder;
  readonly #translate: DocumentJobsOptions['translate'];
  readonly #logger: Logger | undefined;
  readonly #jobTimeoutMs: number;
  readonly #concurrency: number;
  readonly #maxDocuments: number;
  /** Jobs of this process not started yet, in upload order, and those running (id → its end). */
  readonly #waiting: string[] = [];
  readonly #running = new Map<string, Promise<void>>();
  /** Callers waiting for a job of this process to end (`settled`). */
  readonly #settled = new Map<string, (() => void)[]>();
  /** False once closing: no upload is taken, no job taken over. */
  #accepting = true;
  /** Aborts the running jobs' requests when `close` has waited long enough. */
  readonly #closing = new AbortController();
  readonly #sweeper: NodeJS.Timeout;
  /** Where Office files are planned and rebuilt, off the event loop. */
  readonly #office = new OfficeThreads();

  constructor(options: DocumentJobsOptions) {
    this.#translate = options.translate;
    this.#logger = options.logger;
    const keepMs = options.keepMs ?? 3_600_000;
    this.#folder = new DocumentFolder(options.dir, keepMs);
    this.#jobTimeoutMs = options.jobTimeoutMs ?? 900_000;
    this.#concurrency = options.concurrency ?? 2;
    this.#maxDocuments = options.maxDocuments ?? 1000;
    const sweepEveryMs = Math.max(100, Math.min(SWEEP_EVERY_MS, keepMs));
    this.#sweeper = setInterval(() => this.#sweep(), sweepEveryMs).unref();
  }

  /**
   * Keep a document and start translating it. Returns its id and the key every later call about it must give.
   * `bill` counts it against its API key once it holds its slot; when `bill` throws, the document is dropped and
   * its error passed on.
   * @throws ServeError SHUTTING_DOWN while closing, BAD_REQUEST for a file name over 255 characters, QUEUE_FULL
   *   (+ Retry-After) when `maxDocuments` are kept, KEY_RATE_LIMITED (+ Retry-After) when its owner keeps its own
   *   `maxDocuments`
   */
  async submit(upload: DocumentUpload, bill?: () => Promise<void>): Promise<{ id: string; key: string }> {
    if (!this.#accepting) throw new ServeError('SHUTTING_DOWN');
    checkFilename(upload.filename);
    if (this.#folder.count() >= this.#maxDocuments) {
      this.#sweep();
      if (this.#folder.count() >= this.#maxDocuments)
        throw new ServeError(
          'QUEUE_FULL',
          `${this.#maxDocuments} documents are being translated or waiting to be fetched.`,
          { retryAfterS: 60 },
        );
    }
    const { owner } = upload;
    if (owner !== undefined && (await this.#folder.ownedBy(owner.id)) >= owner.maxDocuments)
      throw new ServeError(
        'KEY_RATE_LIMITED',
        `API key "${owner.id}" keeps ${owner.maxDocuments} documents, the most it may: fetch them, or wait until they expire.`,
        { retryAfterS: 60 },
      );
    const id = randomUUID();
    const key = randomBytes(32).toString('hex');
    const now = Date.now();
    this.#folder.writeText(id, 'source', 'text' in upload ? upload.text : upload.bytes);
    const record: DocumentRecord = {
      id,
      keyHash: hashKey(key),
      owner: owner?.id ?? null,
      api: upload.api,
      admitted: bill === undefined,
      filename: upload.filename,
      srcLang: upload.srcLang,
      tgtLang: upload.tgtLang,
      glossary: upload.glossary ?? null,
      bom: 'bom' in upload && upload.bom,
      characters: upload.characters,
      state: 'queued',
      error: null,
      pid: process.pid,
      createdMs: now,
      deadlineMs: now + this.#jobTimeoutMs,
    };
    this.#folder.write(record);
    if (bill !== undefined) {
      try {
        await bill();
      } catch (err) {
        this.remove(id);
        throw err;
      }
      this.#folder.write({ ...record, admitted: true });
    }
    this.#enqueue(id);
    return { id, key };
  }

  /**
   * An upload of `filename` (a type `documentType` knows) checked and counted: a text file read as UTF-8, an Office
   * file planned in the office thread.
   * @throws ServeError BAD_REQUEST for a file that is not text, or not the Office file it is named; PAYLOAD_TOO_LARGE
   *   for one that inflates past the caps (model-server/text/office/zip-package.ts)
   */
  read(filename: string, bytes: Uint8Array): Promise<DocumentContent> {
    return readContent(filename, bytes, this.#office);
  }

  /** The document, when `key` is its key and `owner` its uploader's key id; undefined otherwise. */
  view(id: string, given: DocumentKey): DocumentView | undefined {
    const record = this.#owned(id, given);
    return record === undefined ? undefined : this.#viewOf(record);
  }

  /**
   * A LibreTranslate document's translated file, for its download URL (which holds its id and key: the key is its
   * credential, as the URL is LibreTranslate's); undefined for any other document, or one not done.
   */
  download(id: string, key: string): { bytes: Uint8Array<ArrayBuffer>; filename: string } | undefined {
    const record = this.#folder.read(id);
    if (record?.api !== 'libretranslate' || !keyMatches(record, key)) return undefined;
    return this.#result(record);
  }

  /** A translated document's file (its byte order mark back on it) and name; undefined when it has none. */
  result(id: string, given: DocumentKey): { bytes: Uint8Array<ArrayBuffer>; filename: string } | undefined {
    const record = this.#owned(id, given);
    return record === undefined ? undefined : this.#result(record);
  }

  #result(record: DocumentRecord): { bytes: Uint8Array<ArrayBuffer>; filename: string } | undefined {
    const { id } = record;
    if (record.state !== 'done') return undefined;
    const text = this.#folder.readResult(id);
    if (text === undefined) return undefined;
    const bytes = new Uint8Array(record.bom ? Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), text]) : text);
    return { bytes, filename: record.filename };
  }

  /** Forget a document (its result fetched). */
  remove(id: string): void {
    this.#folder.remove(id);
  }

  /** Resolves when this process's job for `id` has ended (at once when it runs none). */
  settled(id: string): Promise<void> {
    if (!this.#running.has(id) && !this.#waiting.includes(id)) return Promise.resolve();
    return new Promise((resolve) => {
      const waiters = this.#settled.get(id) ?? [];
      waiters.push(resolve);
      this.#settled.set(id, waiters);
    });
  }

  /**
   * Stop taking documents and wait up to `timeoutMs` for this process's jobs, waiting ones included; those not done by
   * then are cut off and left to the next instance asked about them.
   */
  async close(timeoutMs: number): Promise<void> {
    this.#accepting = false;
    clearInterval(this.#sweeper);
    const timer = setTimeout(() => this.#closing.abort(), timeoutMs);
    try {
      // A waiting job starts as a running one ends (#pump): wait until none runs. Once aborted, each ends at once.
      while (this.#running.size > 0) await Promise.all([...this.#running.values()]);
    } finally {
      clearTimeout(timer);
      this.#closing.abort();
      await this.#office.close();
    }
  }

  /** A record's view, after taking over its job when the process that ran it has died, or failing it when late. */
  #viewOf(record: DocumentRecord): DocumentView {
    if (record.state === 'queued' || record.state === 'translating') {
      if (Date.now() > record.deadlineMs + MAX_RETRY_WAIT_MS) {
        // Its process stopped making progress without ending it (or was replaced under the same pid).
        record = this.#fail(record, new ServeError('REQUEST_TIMEOUT', 'The document was not translated in time.'));
      } else if (this.#accepting && record.pid !== process.pid && !alive(record.pid)) {
        this.#logger?.info({ document: record.id, diedPid: record.pid }, 'document job taken over');
        record = { ...record, state: 'queued', pid: process.pid };
        this.#folder.write(record);
        this.#enqueue(record.id);
      }
    }
    const { id, filename, state, characters, error } = record;
    return { id, filename, state, characters, error };
  }

  /** The admitted record `given` is the key (and API key) of; undefined otherwise. */
  #owned(id: string, given: DocumentKey): DocumentRecord | undefined {
    const record = this.#folder.read(id);
    if (record === undefined || record.admitted === false || (record.owner ?? undefined) !== given.owner)
      return undefined;
    return keyMatches(record, given.key) ? record : undefined;
  }

  #enqueue(id: string): void {
    if (this.#running.has(id) || this.#waiting.includes(id)) return;
    this.#waiting.push(id);
    this.#pump();
  }

  #pump(): void {
    while (this.#running.size < this.#concurrency && this.#waiting.length > 0) {
      const id = this.#waiting.shift()!;
      // A job that cannot even record its failure (a full disk) is logged; a status call fails it past its deadline.
      const job = this.#run(id)
        .catch((err: unknown) => this.#logger?.error({ document: id, err }, 'document job failed to run'))
        .finally(() => {
          this.#running.delete(id);
          for (const resolve of this.#settled.get(id) ?? []) resolve();
          this.#settled.delete(id);
          this.#pump();
        });
      this.#running.set(id, job);
    }
  }

  async #run(id: string): Promise<void> {
    if (this.#closing.signal.aborted) return;
    const queued = this.#folder.read(id);
    if (queued === undefined || queued.state === 'done' || queued.state === 'error') return;
    const record: DocumentRecord = { ...queued, state: 'translating', pid: process.pid };
    this.#folder.write(record);
    const started = performance.now();
    const requests = { count: 0 };
    try {
      const type = documentType(record.filename);
      if (type === undefined)
        throw new ServeError('BAD_REQUEST', `${record.filename} is not a file type translated here.`);
      const { format } = type;
      const request = (texts: string[], as: DocumentFormat, alignmentEdges?: readonly (readonly number[])[]) =>
        this.#translate({
          texts,
          format: as,
          srcLang: record.srcLang,
          tgtLang: record.tgtLang,
          ...(record.glossary === null ? {} : { glossary: record.glossary }),
          ...(record.api === 'deepl' ? { sameLanguage: 'refuse' as const } : {}),
          ...(alignmentEdges === undefined ? {} : { alignmentEdges }),
          requestId: record.id,
          signal: this.#closing.signal,
        });
      const job = { deadlineMs: record.deadlineMs, signal: this.#closing.signal, requests };
      const translated = isOffice(format)
        ? await translateOffice(this.#folder.readSourceBytes(id), format, {
            ...job,
            srcLang: record.srcLang,
            threads: this.#office,
            // Each unit's links place its runs (model-server/text/office/run-placement.ts).
            translate: (units, edges) => request(units, 'text', edges),
          })
        : await translateInPieces(this.#folder.readSource(id), {
            ...job,
            cut: (text) => cutDocument(text, format, record.srcLang),
            translate: async (text) => (await request([text], format)).translated[0]!,
          });
      if (this.#folder.read(id) === undefined) return; // removed meanwhile
      this.#folder.writeText(id, 'result', translated);
      this.#folder.write({ ...record, state: 'done' });
      const ms = Math.round(performance.now() - started);
      this.#logger?.info(
        { document: id, characters: record.characters, requests: requests.count, ms },
        'document translated',
      );
    } catch (err) {
      if (this.#closing.signal.aborted || this.#folder.read(id) === undefined) return; // left to another instance, or gone
      this.#fail(record, toServeError(err));
    }
  }

  #fail(record: DocumentRecord, error: ServeError): DocumentRecord {
    const failed: DocumentRecord = {
      ...record,
      state: 'error',
      error: { status: error.status, message: error.message },
    };
    this.#folder.write(failed);
    this.#logger?.warn({ document: record.id, error: error.code, message: error.message }, 'document failed');
    return failed;
  }

  #sweep(): void {
    try {
      this.#folder.sweep();
    } catch (err) {
      this.#logger?.warn({ err: (err as Error).message }, 'documents folder not swept');
    }
  }
}

/** Whether a process of this machine with this pid is alive. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}
