/**
 * @module model-server/wlm/registry — registered models: `name@version` → entry with its batch and worker
 * settings, its queue+batcher, and the engine (worker pool) that serves it; plus each name's default version.
 *
 * The registry is data and lookups only; registering, scaling and unregistering (which start and stop workers)
 * are ModelManager's. Lookup errors carry TorchServe's exact messages.
 */
import { ServeError } from '../../common/errors.js';
import type { Batcher } from './batcher.js';
import type { Placement } from './devices.js';
import type { LoadedModel } from '../protocol.js';
import type { WorkerPool } from './workers/worker-pool.js';

/** One registered model version. Batch settings are fixed at registration; worker counts change by scaling. */
export interface ModelEntry {
  readonly name: string;
  readonly version: string;
  /** The registration's `url` (store entry). */
  readonly url: string;
  readonly handler: string;
  readonly modelDir: string;
  readonly runtime: string;
  readonly batcher: Batcher;
  readonly pool: WorkerPool;
  readonly placement: Placement;
  /** `response_timeout`, seconds. */
  readonly responseTimeoutS: number;
  /** `startup_timeout`, seconds (kept so a restart registers it again with the same). */
  readonly startupTimeoutS: number;
  readonly loadedAtStartup: boolean;
  /** Workers this model wants (`initial_workers`, later `min_worker`). */
  minWorkers: number;
  maxWorkers: number;
}

interface NameRecord {
  versions: Map<string, ModelEntry>;
  defaultVersion: string;
}

export class ModelRegistry {
  #models = new Map<string, NameRecord>();

  /** @throws ServeError CONFLICT when this name@version exists. The first version of a name is its default. */
  add(entry: ModelEntry): void {
    const record = this.#models.get(entry.name);
    if (record === undefined) {
      this.#models.set(entry.name, { versions: new Map([[entry.version, entry]]), defaultVersion: entry.version });
      return;
    }
    if (record.versions.has(entry.version)) {
      throw new ServeError('CONFLICT', `Model version ${entry.version} is already registered for model ${entry.name}`);
    }
    record.versions.set(entry.version, entry);
  }

  has(name: string, version: string): boolean {
    return this.#models.get(name)?.versions.has(version) ?? false;
  }

  /**
   * The named version, or the default one.
   * @throws ServeError MODEL_NOT_FOUND / MODEL_VERSION_NOT_FOUND
   */
  get(name: string, version?: string): ModelEntry {
    const record = this.#record(name);
    const entry = record.versions.get(version ?? record.defaultVersion);
    if (entry === undefined) {
      throw new ServeError('MODEL_VERSION_NOT_FOUND', `Model version: ${version} does not exist for model: ${name}`);
    }
    return entry;
  }

  /** Every version of a name, in registration order. @throws ServeError MODEL_NOT_FOUND */
  versions(name: string): ModelEntry[] {
    return [...this.#record(name).versions.values()];
  }

  defaultVersion(name: string): string {
    return this.#record(name).defaultVersion;
  }

  /** @throws ServeError MODEL_NOT_FOUND / MODEL_VERSION_NOT_FOUND */
  setDefault(name: string, version: string): void {
    this.#record(name).defaultVersion = this.get(name, version).version;
  }

  /**
   * Remove one version (the default when none is named). When the default goes and others remain, the most
   * recently registered remaining version becomes the default.
   */
  remove(name: string, version?: string): ModelEntry {
    const entry = this.get(name, version);
    const record = this.#models.get(name)!;
    record.versions.delete(entry.version);
    if (record.versions.size === 0) this.#models.delete(name);
    else if (record.defaultVersion === entry.version) record.defaultVersion = [...record.versions.keys()].at(-1)!;
    return entry;
  }

  /** Registered names, sorted (the order of `GET /models`). */
  names(): string[] {
    return [...this.#models.keys()].sort();
  }

  /** Every entry of every name. */
  entries(): ModelEntry[] {
    return [...this.#models.values()].flatMap((r) => [...r.versions.values()]);
  }

  #record(name: string): NameRecord {
    const record = this.#models.get(name);
    if (record === undefined) throw new ServeError('MODEL_NOT_FOUND', `Model not found: ${name}`);
    return record;
  }
}

/** `name@version`, as registrations are named in logs and descriptions. */
export function entryKey(entry: Pick<ModelEntry, 'name' | 'version'>): string {
  return `${entry.name}@${entry.version}`;
}

/** The weights' type the model's engine reports (its first worker that said), undefined until one has. */
export function dtypeOf(entry: ModelEntry): string | undefined {
  return entry.pool.workers().find((w) => w.dtype !== undefined)?.dtype;
}

/** The model the engine's workers loaded (its first worker that said), undefined until one has. */
export function loadedModelOf(pool: WorkerPool): LoadedModel | undefined {
  return pool.workers().find((w) => w.model !== undefined)?.model;
}

/**
 * Resident memory of the engine's live workers together, bytes (Linux /proc); null where none is measured. Each
 * worker holds its own copy of the weights, so this grows with the workers, not with the entries sharing them.
 */
export function residentBytesOf(pool: WorkerPool): number | null {
  const measured = pool
    .workers()
    .map((w) => w.memoryUsage())
    .filter((bytes) => bytes > 0);
  return measured.length === 0 ? null : measured.reduce((a, b) => a + b, 0);
}
