/**
 * @module common/atomic-file — a file replaced whole or not at all: written beside its place, fsynced, renamed
 * over it (rename is atomic within a folder), the folder fsynced so the rename survives a crash. A reader sees
 * the old content or the new, never a part.
 */
import { closeSync, fsyncSync, mkdirSync, openSync, renameSync, rmSync, writeFileSync } from 'node:fs';
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
