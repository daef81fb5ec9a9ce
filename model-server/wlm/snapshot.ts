/**
 * @module model-server/wlm/snapshot — the registrations on disk, so a restarted model server (pm2 after a
 * crash, a container restart) serves the same models with the same settings (TorchServe's config snapshots).
 *
 * Two files in the snapshot folder (`LOG_DIR/config`, TorchServe's place; `npm start`'s `new` removes it):
 * `models.json`, the last saved state, and `models.prev.json`, the one before it that held models: a current file
 * that holds none (every model unregistered) is replaced, not rotated, so saving nothing twice cannot leave two
 * empty files where the last real registrations were. A save writes a temp file,
 * fsyncs it, moves the current file to `.prev`, then renames the temp file over the current one (each rename is
 * atomic): a crash at any point leaves a complete current file, or none and a complete previous one. Each file
 * carries a SHA-256 of its models; a file that does not parse, does not check out, or has a bad shape is never
 * loaded: it is moved aside (`models.json.corrupt-<time>`, kept for a look) and the previous file is loaded.
 */
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { readJsonFile, syncPath } from '../../common/atomic-file.js';

const FORMAT = 'mt-serve-models/1';
const CURRENT = 'models.json';
const PREVIOUS = 'models.prev.json';

/** One registered model version as saved: enough to register it again with the same settings. */
const savedModel = z.object({
  name: z.string().min(1),
  version: z.string().min(1),
  url: z.string().min(1),
  handler: z.string().min(1),
  runtime: z.string().min(1),
  batchSize: z.number().int().positive(),
  maxBatchDelayMs: z.number().int().nonnegative(),
  responseTimeoutS: z.number().int().positive(),
  startupTimeoutS: z.number().int().positive(),
  minWorkers: z.number().int().nonnegative(),
  maxWorkers: z.number().int().nonnegative(),
  isDefault: z.boolean(),
});
export type SavedModel = z.infer<typeof savedModel>;

const snapshotFile = z.object({
  format: z.literal(FORMAT),
  savedAt: z.string(),
  checksum: z.string(),
  models: z.array(savedModel),
});

export interface LoadedSnapshot {
  models: SavedModel[];
  /** The file it came from. */
  file: string;
  /** Files not loaded, and why (a corrupt current file, when the previous one was loaded instead). */
  rejected: { file: string; reason: string }[];
}

export class SnapshotStore {
  constructor(readonly dir: string) {}

  /** The last good snapshot, or undefined when there is none (a clean start). Never throws on a bad file. */
  load(): LoadedSnapshot | undefined {
    const rejected: LoadedSnapshot['rejected'] = [];
    for (const name of [CURRENT, PREVIOUS]) {
      const file = path.join(this.dir, name);
      if (!existsSync(file)) continue;
      const result = readSnapshot(file);
      if (result.ok) return { models: result.models, file, rejected };
      rejected.push({ file, reason: result.reason });
      // Out of the way: the next save must not move a corrupt file over the good previous one.
      renameSync(file, `${file}.corrupt-${new Date().toISOString().replace(/[:.]/g, '-')}`);
    }
    return rejected.length > 0 ? { models: [], file: '', rejected } : undefined;
  }

  /**
   * Save `models` atomically; the file it replaces becomes the previous snapshot when it held models. Saving what
   * the current file holds already leaves it as it is, and makes the previous file a copy of it if it is not.
   */
  save(models: readonly SavedModel[]): void {
    mkdirSync(this.dir, { recursive: true });
    const current = path.join(this.dir, CURRENT);
    const before = existsSync(current) ? readSnapshot(current) : undefined;
    if (before?.ok && checksum(before.models) === checksum(models)) {
      // Nothing changed, but the previous file must be a good copy of it: a current file corrupted later falls back
      // to these models, not to an older list (the restart drill: a restored server, then a torn models.json).
      this.#keepPrevious(current, models);
      return;
    }
    const body = {
      format: FORMAT,
      savedAt: new Date().toISOString(),
      checksum: checksum(models),
      models,
    };
    const temp = `${current}.tmp-${process.pid}`;
    writeFileSync(temp, `${JSON.stringify(body, null, 2)}\n`);
    syncPath(temp);
    if (before?.ok && before.models.length > 0) renameSync(current, path.join(this.dir, PREVIOUS));
    renameSync(temp, current);
    syncPath(this.dir);
  }

  #keepPrevious(current: string, models: readonly SavedModel[]): void {
    if (models.length === 0) return;
    const previous = path.join(this.dir, PREVIOUS);
    const held = existsSync(previous) ? readSnapshot(previous) : undefined;
    if (held?.ok && checksum(held.models) === checksum(models)) return;
    const temp = `${previous}.tmp-${process.pid}`;
    copyFileSync(current, temp);
    syncPath(temp);
    renameSync(temp, previous);
    syncPath(this.dir);
  }
}

function readSnapshot(file: string): { ok: true; models: SavedModel[] } | { ok: false; reason: string } {
  const json = readJsonFile(file);
  if (!json.ok) return { ok: false, reason: `not JSON (${json.error})` };
  const parsed = snapshotFile.safeParse(json.value);
  if (!parsed.success) return { ok: false, reason: `bad shape (${parsed.error.issues[0]?.message ?? 'invalid'})` };
  if (parsed.data.checksum !== checksum(parsed.data.models)) return { ok: false, reason: 'checksum mismatch' };
  return { ok: true, models: parsed.data.models };
}

function checksum(models: readonly SavedModel[]): string {
  return createHash('sha256').update(JSON.stringify(models)).digest('hex');
}
