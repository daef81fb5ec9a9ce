/**
 * @module common/atomic-file — a file replaced whole or not at all: written beside its place, fsynced, renamed
 * over it (rename is atomic within a folder), the folder fsynced so the rename survives a crash. A reader sees
 * the old content or the new, never a part. And a JSON file read back whole (`readJsonFile`).
 */
import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

/** Write `data` to `file` atomically (its folder is made if missing). */
export function writeFileAtomic(file: string, data: string | Uint8Array): void {
  mkdirSync(path.dirname(file), { recursive: true });
  const temp = path.join(path.dirname(file), `.${path.basename(file)}.tmp-${process.pid}`);
  try {
    writeFileSync(temp, data);
    syncPath(temp);
    renameSync(temp, file);
  } catch (err) {
    rmSync(temp, { force: true });
    throw err;
  }
  syncPath(path.dirname(file));
}

/** fsync a file or a folder (a folder's entry, for a rename). */
export function syncPath(target: string): void {
  const fd = openSync(target, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/** `file` read and parsed as JSON: its value, or why it could not be read or parsed (the error's message). */
export function readJsonFile(file: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(readFileSync(file, 'utf8')) };
  } catch (err) {
    return { ok: false, error: (err as Error).message };
  }
}
