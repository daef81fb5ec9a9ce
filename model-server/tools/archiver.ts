/**
 * @module model-server/tools/archiver — writes store entries in TorchServe's no-archive layout (the seed's `new`
 * flag ran torch-model-archiver once per language; this writes one small manifest per language that refers to
 * the one shared model folder).
 */
import { existsSync, mkdirSync, renameSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { SetupConfig } from '../../common/config.js';
import { HANDLER_NAMES, isHandlerName } from '../worker/handlers/index.js';
import {
  formatCreatedOn,
  manifestPath,
  MODEL_NAME_PATTERN,
  MODEL_VERSION_PATTERN,
  type Manifest,
} from '../store/manifest.js';

/** Written into every manifest's `archiverVersion`. */
export const ARCHIVER_VERSION = 'mt-serve-archiver 1.0';

export interface ArchiveOptions {
  /** Shared model folder the entries refer to (must exist). */
  modelDir: string;
  /** Store folder; created when absent. */
  store: string;
  /** One entry per name (a language code, or e.g. `echo`). */
  names: readonly string[];
  /** Handler name every entry is served by (`translation`, `echo`). */
  handler: string;
  /** Model version (default 1.0). */
  version?: string;
  /** Time written as createdOn (default now). */
  now?: Date;
}

/**
 * The entries setup_config.json names: one per language of `cuda_id` referring to `options.modelDir`, and one per
 * pair of `pairs` referring to that pair's `model_dir`. Returns the manifest paths.
 */
export function archiveSetupConfig(setup: SetupConfig, options: Omit<ArchiveOptions, 'names'>): string[] {
  const files = archiveModels({ ...options, names: Object.keys(setup.cuda_id) });
  for (const [pair, { model_dir: modelDir }] of Object.entries(setup.pairs ?? {})) {
    files.push(...archiveModels({ ...options, modelDir, names: [pair] }));
  }
  return files;
}

/** Write (or overwrite) one entry per name; returns the manifest paths. @throws Error naming the bad option. */
export function archiveModels(options: ArchiveOptions): string[] {
  const version = options.version ?? '1.0';
  const modelDir = path.resolve(options.modelDir);
  if (!existsSync(modelDir) || !statSync(modelDir).isDirectory()) {
    throw new Error(`--model-dir ${modelDir} is not a folder`);
  }
  if (!MODEL_VERSION_PATTERN.test(version))
    throw new Error(`--version ${JSON.stringify(version)} is not a valid version`);
  if (options.names.length === 0) throw new Error('no model names to archive');
  for (const name of options.names) {
    if (!MODEL_NAME_PATTERN.test(name)) throw new Error(`model name ${JSON.stringify(name)} is not a valid name`);
  }
  if (!isHandlerName(options.handler)) {
    throw new Error(`--handler ${JSON.stringify(options.handler)} is not one of: ${HANDLER_NAMES.join(', ')}`);
  }
  const store = path.resolve(options.store);
  mkdirSync(store, { recursive: true });
  const createdOn = formatCreatedOn(options.now ?? new Date());
  return options.names.map((name) => {
    const manifest: Manifest = {
      createdOn,
      runtime: 'node',
      model: { modelName: name, modelVersion: version, handler: options.handler, modelDir },
      archiverVersion: ARCHIVER_VERSION,
    };
    const file = manifestPath(path.join(store, name));
    mkdirSync(path.dirname(file), { recursive: true });
    // Write-then-rename: a server reading the store never sees half a manifest.
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(manifest, null, 2)}\n`);
    renameSync(tmp, file);
    return file;
  });
}
