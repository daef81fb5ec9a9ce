/**
 * @module model-server/wlm/model-fingerprint — a short hash that names the files of a model folder, so that
 * answers computed from one set of files are never served for another (the translation cache keys on it).
 *
 * What is hashed: every file under the folder by relative name and size; the content of files up to
 * `CONTENT_HASH_MAX_BYTES` (config.json, tokenizer.json, generation_config.json, the graph files of an export with
 * external weights); size and modification time only for larger files (the weights). Why not hash everything:
 * M2M100-418M's weights are 1.9 GB and the 1.2B model's 5 GB, seconds of reading at every registration; a
 * replaced weight file (a download, a copy, an export) gets a new mtime, while the small files that change how a
 * sentence is tokenized or decoded are checked by content, so even a copy that keeps mtimes cannot go unnoticed.
 *
 * Computed once per folder: a registration that finds the same names, sizes and mtimes reuses the hash, so the 14
 * languages sharing one folder read it once.
 */
import { createHash } from 'node:crypto';
import { readFile, readdir, stat } from 'node:fs/promises';
import path from 'node:path';

/** Files up to this size are hashed by content (bytes). */
export const CONTENT_HASH_MAX_BYTES = 16 * 2 ** 20;

interface FileStat {
  name: string;
  size: number;
  mtimeMs: number;
}

export class ModelFingerprints {
  /** Folder → the stat listing it was last hashed with, and the hash. */
  readonly #byDir = new Map<string, { listing: string; fingerprint: string }>();

  /** The folder's fingerprint as last computed; undefined before `compute` or when it failed. */
  get(modelDir: string): string | undefined {
    return this.#byDir.get(modelDir)?.fingerprint;
  }

  /**
   * Compute (or reuse) the fingerprint of `modelDir`: 16 hex digits of a SHA-256.
   * @throws the file system's error when the folder cannot be read.
   */
  async compute(modelDir: string): Promise<string> {
    const files = await listFiles(modelDir);
    const listing = files.map((f) => `${f.name}\0${f.size}\0${f.mtimeMs}`).join('\n');
    const known = this.#byDir.get(modelDir);
    if (known?.listing === listing) return known.fingerprint;
    const hash = createHash('sha256');
    for (const file of files) {
      hash.update(`${file.name}\0${file.size}\0`);
      if (file.size <= CONTENT_HASH_MAX_BYTES) hash.update(await readFile(path.join(modelDir, file.name)));
      else hash.update(String(file.mtimeMs));
      hash.update('\n');
    }
    const fingerprint = hash.digest('hex').slice(0, 16);
    this.#byDir.set(modelDir, { listing, fingerprint });
    return fingerprint;
  }
}

/** Every regular file under `dir`, by path relative to it, sorted (symlinks are followed by `stat`). */
async function listFiles(dir: string): Promise<FileStat[]> {
  const entries = await readdir(dir, { recursive: true });
  const files: FileStat[] = [];
  for (const name of entries.sort()) {
    const s = await stat(path.join(dir, name));
    if (s.isFile()) files.push({ name, size: s.size, mtimeMs: s.mtimeMs });
  }
  return files;
}
