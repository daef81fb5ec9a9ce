/**
 * @module model-server/store/manifest — TorchServe's no-archive store entry, `{store}/{name}/MAR-INF/MANIFEST.json`,
 * and the one safe way to resolve a registration's `url` to an entry of the store.
 *
 * An entry refers to the shared model folder (`model.modelDir`) instead of holding weights: 14 languages are
 * 14 small manifests and one copy of the model.
 */
import { existsSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { readJsonFile } from '../../common/atomic-file.js';
import { ServeError } from '../../common/errors.js';

/** Model names and versions: what TorchServe accepts, and safe as a single path segment. */
export const MODEL_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;
export const MODEL_VERSION_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.-]*$/;

/** The version of a manifest that names none (TorchServe's rule). */
export const DEFAULT_MODEL_VERSION = '1.0';

/** Runtimes a manifest or registration may name: ours runs handlers in Node worker processes. */
export const RUNTIMES = ['node'] as const;

export interface Manifest {
  /** `dd/mm/YYYY HH:MM:SS`, as torch-model-archiver writes it. */
  createdOn: string;
  runtime: (typeof RUNTIMES)[number];
  model: {
    modelName: string;
    modelVersion: string;
    handler: string;
    /** Absolute path of the shared model folder this entry serves. */
    modelDir: string;
  };
  archiverVersion: string;
}

const manifestSchema = z.object({
  createdOn: z.string(),
  runtime: z.enum(RUNTIMES),
  model: z.object({
    modelName: z.string().regex(MODEL_NAME_PATTERN),
    modelVersion: z.string().regex(MODEL_VERSION_PATTERN).optional(),
    handler: z.string().min(1),
    modelDir: z.string().min(1),
  }),
  archiverVersion: z.string(),
});

/** A resolved store entry. */
export interface StoreEntry {
  /** The `url` as registered (what describe shows as modelUrl). */
  url: string;
  /** Absolute folder of the entry. */
  dir: string;
  manifest: Manifest;
}

export function manifestPath(entryDir: string): string {
  return path.join(entryDir, 'MAR-INF', 'MANIFEST.json');
}

/** `dd/mm/YYYY HH:MM:SS` in local time. */
export function formatCreatedOn(date: Date): string {
  const p = (n: number) => String(n).padStart(2, '0');
  return `${p(date.getDate())}/${p(date.getMonth() + 1)}/${date.getFullYear()} ${p(date.getHours())}:${p(date.getMinutes())}:${p(date.getSeconds())}`;
}

/**
 * Resolve a registration `url` to an entry directly inside `store`. `ko` and the seed's `ko.mar` both name the
 * entry `ko`. Anything that could leave the store (absolute paths, `..`, separators, URL schemes, symlinks
 * pointing out) is refused.
 * @throws ServeError BAD_REQUEST for a url that is not a store entry name; MODEL_NOT_FOUND when no such entry.
 */
export function resolveStoreEntry(store: string, url: string): StoreEntry {
  const refuse = () =>
    new ServeError('BAD_REQUEST', `Parameter url must name an entry of the model store, got: ${url}`);
  if (url === '') throw new ServeError('MODEL_NOT_FOUND', 'Model not found at: ');
  if (/^[a-z][a-z0-9+.-]*:/i.test(url) || url.includes('/') || url.includes('\\') || url.includes('\0')) {
    throw refuse();
  }
  if (url === '.' || url === '..' || !MODEL_NAME_PATTERN.test(url)) throw refuse();
  const candidates = url.endsWith('.mar') ? [url, url.slice(0, -'.mar'.length)] : [url];
  for (const name of candidates) {
    if (name === '' || !MODEL_NAME_PATTERN.test(name)) continue;
    const dir = path.join(store, name);
    const file = manifestPath(dir);
    if (!existsSync(file)) continue;
    const realStore = realpathSync(store);
    const realDir = realpathSync(dir);
    if (path.dirname(realDir) !== realStore) throw refuse();
    return { url, dir: realDir, manifest: readManifest(file) };
  }
  throw new ServeError('MODEL_NOT_FOUND', `Model not found at: ${url}`);
}

/** Read and validate one MANIFEST.json (a missing version means 1.0). @throws ServeError BAD_REQUEST */
export function readManifest(file: string): Manifest {
  const json = readJsonFile(file);
  if (!json.ok) throw new ServeError('BAD_REQUEST', `Invalid manifest ${file}: ${json.error}`);
  const parsed = manifestSchema.safeParse(json.value);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ServeError('BAD_REQUEST', `Invalid manifest ${file}: ${issue.path.join('.')}: ${issue.message}`);
  }
  const m = parsed.data;
  return { ...m, model: { ...m.model, modelVersion: m.model.modelVersion ?? DEFAULT_MODEL_VERSION } };
}
