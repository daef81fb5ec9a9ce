/**
 * @module router/apis/document-folder — the folder every router instance of the machine shares for documents
 * (RUN_DIR/documents, ./documents.ts): per document its record (`<id>.json`, replaced whole at each step), its text
 * (`<id>.source`) and its translation (`<id>.result`). A record past `keepMs` after its upload is never read back, and
 * `sweep` removes it with any stray file of that age. Ids are checked against the UUID shape before they name a file.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { mkdirSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { readJsonFile, writeFileAtomic } from '../../common/atomic-file.js';

/** `<id>.json`: everything about a document but its text. */
export type DocumentState = 'queued' | 'translating' | 'done' | 'error';

/** The API that took a document. */
export type DocumentApi = 'deepl' | 'libretranslate' | 'native';

export interface DocumentRecord {
  id: string;
  /** sha256 of the key its uploader got, hex: the key itself is never stored. */
  keyHash: string;
  /** The API key id that uploaded it (keys on), which alone may ask about it. */
  owner: string | null;
  /** The API that took it: only LibreTranslate's are downloaded by URL (`download`). Absent (older records): DeepL. */
  api?: DocumentApi;
  /**
   * False while its upload is being billed: the document holds its slot but is no job yet, and nobody may see it
   * or take it over. Absent (older records): admitted.
   */
  admitted?: boolean;
  filename: string;
  srcLang: string;
  tgtLang: string;
  glossary: Record<string, string> | null;
  /** The file began with a UTF-8 byte order mark: kept off the text, put back on the result. */
  bom: boolean;
  characters: number;
  state: DocumentState;
  /** Why it failed, and the status of that error. */
  error: { status: number; message: string } | null;
  /** The process that runs the job (or last did). */
  pid: number;
  createdMs: number;
  /** Past this the job has failed, wherever it runs. */
  deadlineMs: number;
}

const ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

export const hashKey = (key: string) => createHash('sha256').update(key).digest('hex');

/** Whether `key` is the document's key (compared in constant time). */
export function keyMatches(record: DocumentRecord, key: string): boolean {
  return timingSafeEqual(Buffer.from(hashKey(key), 'hex'), Buffer.from(record.keyHash, 'hex'));
}

export class DocumentFolder {
  readonly #dir: string;
  readonly #keepMs: number;

  constructor(dir: string, keepMs: number) {
    this.#dir = dir;
    this.#keepMs = keepMs;
    mkdirSync(dir, { recursive: true });
  }

  /** The record of `id`; undefined when there is none, or it has expired (removed then, whenever the sweep runs). */
  read(id: string): DocumentRecord | undefined {
    if (!ID.test(id)) return undefined;
    const read = readJsonFile(this.#file(id, 'json'));
    if (!read.ok) return undefined;
    const record = read.value as DocumentRecord;
    if (!this.#expired(record)) return record;
    this.remove(id);
    return undefined;
  }

  write(record: DocumentRecord): void {
    writeFileAtomic(this.#file(record.id, 'json'), JSON.stringify(record));
  }

  writeText(id: string, part: 'source' | 'result', data: string | Uint8Array): void {
    writeFileAtomic(this.#file(id, part), data);
  }

  readSource(id: string): string {
    return readFileSync(this.#file(id, 'source'), 'utf8');
  }

  /** An Office file's bytes. */
  readSourceBytes(id: string): Uint8Array {
    return readFileSync(this.#file(id, 'source'));
  }

  /** The translation's bytes; undefined when there is none (yet, or any more). */
  readResult(id: string): Buffer | undefined {
    try {
      return readFileSync(this.#file(id, 'result'));
    } catch {
      return undefined;
    }
  }

  /** Forget a document (its result fetched, or past its time). */
  remove(id: string): void {
    if (!ID.test(id)) return;
    for (const part of ['json', 'source', 'result'] as const) rmSync(this.#file(id, part), { force: true });
  }

  /** Records in the folder, expired ones included until swept. */
  count(): number {
    return this.#recordNames().length;
  }

  /** Documents kept for API key `owner` (every instance's: read from the folder). */
  async ownedBy(owner: string): Promise<number> {
    const owners = await Promise.all(
      this.#recordNames().map(async (name) => {
        try {
          const record = JSON.parse(await readFile(path.join(this.#dir, name), 'utf8')) as DocumentRecord;
          return this.#expired(record) ? null : record.owner;
        } catch {
          return null; // removed meanwhile
        }
      }),
    );
    return owners.filter((id) => id === owner).length;
  }

  /**
   * Remove documents past `keepMs`: records by their upload time (`read`), stray files by theirs.
   * @throws Error when the folder cannot be listed
   */
  sweep(): void {
    const now = Date.now();
    for (const name of readdirSync(this.#dir)) {
      const id = name.slice(0, name.indexOf('.'));
      if (!ID.test(id) || this.read(id) !== undefined) continue;
      try {
        if (now - statSync(path.join(this.#dir, name)).mtimeMs > this.#keepMs) this.remove(id);
      } catch {
        // removed meanwhile
      }
    }
  }

  #expired(record: DocumentRecord): boolean {
    return Date.now() - record.createdMs > this.#keepMs;
  }

  #file(id: string, part: 'json' | 'source' | 'result'): string {
    return path.join(this.#dir, `${id}.${part}`);
  }

  #recordNames(): string[] {
    return readdirSync(this.#dir).filter((name) => name.endsWith('.json') && ID.test(name.slice(0, -5)));
  }
}
