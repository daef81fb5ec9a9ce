/**
 * @module model-server/wlm/registry-snapshot — the registrations kept across restarts: saved after every management
 * change, and registered again at start with their settings and default versions (snapshot.ts keeps the files).
 */
import type { Logger } from '../../common/logger.js';
import type { RegisterRequest } from './registration.js';
import { entryKey, type ModelEntry, type ModelRegistry } from './registry.js';
import { SnapshotStore } from './snapshot.js';

export class RegistrySnapshot {
  readonly #store: SnapshotStore | undefined;
  readonly #registry: ModelRegistry;
  readonly #log: Logger;
  /** While the snapshot is being restored nothing is saved: a crash then must find the full snapshot again. */
  #restoring = false;

  /** `dir`: the snapshot folder; none: nothing is saved and nothing restored. */
  constructor(dir: string | undefined, registry: ModelRegistry, log: Logger) {
    this.#store = dir === undefined ? undefined : new SnapshotStore(dir);
    this.#registry = registry;
    this.#log = log;
  }

  /** Save the registrations after a management change; a failed save is logged (the change itself stands). */
  save(): void {
    if (this.#store === undefined || this.#restoring) return;
    const registry = this.#registry;
    try {
      this.#store.save(
        registry.entries().map((e) => ({
          name: e.name,
          version: e.version,
          url: e.url,
          handler: e.handler,
          runtime: e.runtime,
          batchSize: e.batcher.batchSize,
          maxBatchDelayMs: e.batcher.maxBatchDelayMs,
          responseTimeoutS: e.responseTimeoutS,
          startupTimeoutS: e.startupTimeoutS,
          minWorkers: e.minWorkers,
          maxWorkers: e.maxWorkers,
          isDefault: registry.defaultVersion(e.name) === e.version,
        })),
      );
    } catch (err) {
      this.#log.error(
        { dir: this.#store.dir, err: (err as Error).message },
        'model snapshot not saved: a restart would not restore this change',
      );
    }
  }

  /**
   * Register again, through `register` (which must not wait for workers), what the last good snapshot holds, and
   * set its default versions; a model that cannot be registered again is logged and left out. Returns the entries
   * restored.
   */
  async restore(register: (request: RegisterRequest) => Promise<unknown>): Promise<ModelEntry[]> {
    const loaded = this.#store?.load();
    for (const bad of loaded?.rejected ?? []) {
      this.#log.error({ file: bad.file, reason: bad.reason }, 'model snapshot not loaded: corrupt; set aside');
    }
    if (loaded === undefined || loaded.models.length === 0) {
      if (loaded !== undefined) this.#store!.save([]);
      return [];
    }
    this.#restoring = true;
    const restored: ModelEntry[] = [];
    try {
      for (const saved of loaded.models) {
        try {
          // The saved settings (url, handler, runtime, batch size and delay, timeouts) are registration parameters.
          const { name: modelName, version, minWorkers: initialWorkers, maxWorkers, isDefault, ...settings } = saved;
          await register({ ...settings, modelName, initialWorkers, synchronous: false });
          const entry = this.#registry.get(saved.name);
          entry.maxWorkers = saved.maxWorkers;
          if (entry.version !== saved.version) {
            this.#log.warn(
              { model: saved.name, saved: saved.version, now: entry.version },
              'store entry changed version since the snapshot',
            );
          }
          restored.push(entry);
        } catch (err) {
          this.#log.error(
            { model: saved.name, version: saved.version, url: saved.url, err: (err as Error).message },
            'model in the snapshot not restored',
          );
        }
      }
      for (const saved of loaded.models) {
        if (saved.isDefault && this.#registry.has(saved.name, saved.version)) {
          this.#registry.setDefault(saved.name, saved.version);
        }
      }
    } finally {
      this.#restoring = false;
    }
    this.save();
    this.#log.info({ file: loaded.file, models: restored.map(entryKey) }, 'models restored from the snapshot');
    return restored;
  }
}
