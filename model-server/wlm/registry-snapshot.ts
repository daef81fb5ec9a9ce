/**
 * @module model-server/wlm/registry-snapshot — the registrations kept across restarts: saved after every management
 * change, and registered again at start with their settings and default versions (snapshot.ts keeps the files).
 *
 * The snapshot never goes backwards: a saved model that cannot be registered again at start (its store entry
 * unreadable for now, say) stays *pending* — kept in every save as it was, retried after a backoff, logged each
 * time — until it registers or the operator unregisters it. So a start while the store is away does not turn the
 * snapshot into what that start managed to register.
 */
import type { Logger } from '../../common/logger.js';
import type { RegisterRequest } from './registration.js';
import { entryKey, type ModelEntry, type ModelRegistry } from './registry.js';
import { SnapshotStore, type SavedModel } from './snapshot.js';
import { backoffUnits } from './workers/worker-pool.js';

export interface RegistrySnapshotOptions {
  /** The snapshot folder; none: nothing is saved and nothing restored. */
  dir: string | undefined;
  registry: ModelRegistry;
  log: Logger;
  /** One unit of the pending models' retry backoff (TorchServe's Fibonacci sequence, as worker restarts), ms. */
  retryUnitMs: number;
}

/** Registers one saved model again (must not wait for workers). */
type Register = (request: RegisterRequest) => Promise<unknown>;

export class RegistrySnapshot {
  readonly #store: SnapshotStore | undefined;
  readonly #registry: ModelRegistry;
  readonly #log: Logger;
  readonly #retryUnitMs: number;
  /** While the snapshot is being restored nothing is saved: a crash then must find the full snapshot again. */
  #restoring = false;
  /**
   * Saved models not registered again yet, as the snapshot holds them. Changed by `restore` (filled), the retry
   * (an entry leaves once registered) and `forget` (the operator unregistered it); a save writes them after the
   * registry's entries. An entry's `isDefault` is cleared in place when the operator sets its name's default.
   */
  #pending: SavedModel[] = [];
  #retries = 0;
  #retryTimer: NodeJS.Timeout | undefined;
  #register: Register | undefined;
  #closed = false;

  constructor(options: RegistrySnapshotOptions) {
    this.#store = options.dir === undefined ? undefined : new SnapshotStore(options.dir);
    this.#registry = options.registry;
    this.#log = options.log;
    this.#retryUnitMs = options.retryUnitMs;
  }

  /** The saved models still waiting to be registered again, as `name/version`. */
  pending(): string[] {
    return this.#pending.map(entryKey);
  }

  /** Save the registrations after a management change; a failed save is logged (the change itself stands). */
  save(): void {
    if (this.#store === undefined || this.#restoring) return;
    const registry = this.#registry;
    const pending = this.#pending.filter((p) => !registry.has(p.name, p.version));
    // A pending model that was its name's default still is, until the operator chooses another (`defaultSet`).
    const claimed = new Set(pending.filter((p) => p.isDefault).map((p) => p.name));
    try {
      this.#store.save([
        ...registry.entries().map((e) => ({
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
          isDefault: !claimed.has(e.name) && registry.defaultVersion(e.name) === e.version,
        })),
        ...pending,
      ]);
    } catch (err) {
      this.#log.error(
        { dir: this.#store.dir, err: (err as Error).message },
        'model snapshot not saved: a restart would not restore this change',
      );
    }
  }

  /**
   * Register again, through `register` (which must not wait for workers), what the last good snapshot holds, and
   * set its default versions. A model that cannot be registered again is logged and stays pending: kept in the
   * snapshot and retried after a backoff until it registers or is unregistered. Returns the entries restored.
   */
  async restore(register: Register): Promise<ModelEntry[]> {
    const loaded = this.#store?.load();
    for (const bad of loaded?.rejected ?? []) {
      this.#log.error({ file: bad.file, reason: bad.reason }, 'model snapshot not loaded: corrupt; set aside');
    }
    if (loaded === undefined || loaded.models.length === 0) {
      if (loaded !== undefined) this.#store!.save([]);
      return [];
    }
    this.#register = register;
    this.#restoring = true;
    const restored: ModelEntry[] = [];
    try {
      for (const saved of loaded.models) {
        try {
          restored.push(await this.#registerSaved(saved));
        } catch (err) {
          this.#pending.push(saved);
          this.#log.error(
            { model: saved.name, version: saved.version, url: saved.url, err: (err as Error).message },
            'model in the snapshot not restored: kept in the snapshot, retried',
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
    this.#log.info(
      { file: loaded.file, models: restored.map(entryKey), pending: this.pending() },
      'models restored from the snapshot',
    );
    this.#scheduleRetry();
    return restored;
  }

  /**
   * The operator unregistered `name` (one `version`, or all) while it was pending: it leaves the snapshot and is
   * no longer retried. False when nothing of that name was pending.
   */
  forget(name: string, version: string | undefined): boolean {
    const before = this.#pending.length;
    this.#pending = this.#pending.filter((p) => p.name !== name || (version !== undefined && p.version !== version));
    if (this.#pending.length === before) return false;
    this.save();
    return true;
  }

  /** Save after the operator set `name`'s default: a pending version of it no longer claims to be the default. */
  defaultSet(name: string): void {
    for (const p of this.#pending) if (p.name === name) p.isDefault = false;
    this.save();
  }

  /** Stop retrying (the server is closing); what is pending stays in the snapshot. Idempotent. */
  close(): void {
    this.#closed = true;
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
  }

  async #registerSaved(saved: SavedModel): Promise<ModelEntry> {
    // The saved settings (url, handler, runtime, batch size and delay, timeouts) are registration parameters.
    const { name: modelName, version, minWorkers: initialWorkers, maxWorkers, isDefault, ...settings } = saved;
    await this.#register!({ ...settings, modelName, initialWorkers, synchronous: false });
    // The store entry may hold another version by now (warned below): then the name's default is the one to read.
    const entry = this.#registry.has(saved.name, version)
      ? this.#registry.get(saved.name, version)
      : this.#registry.get(saved.name);
    entry.maxWorkers = saved.maxWorkers;
    if (entry.version !== saved.version) {
      this.#log.warn(
        { model: saved.name, saved: saved.version, now: entry.version },
        'store entry changed version since the snapshot',
      );
    }
    return entry;
  }

  #scheduleRetry(): void {
    if (this.#pending.length === 0 || this.#closed || this.#retryTimer !== undefined) return;
    this.#retries += 1;
    const delayMs = backoffUnits(this.#retries) * this.#retryUnitMs;
    this.#retryTimer = setTimeout(() => {
      this.#retryTimer = undefined;
      void this.#retry();
    }, delayMs);
    // Pending models must not keep a closing process alive.
    this.#retryTimer.unref();
  }

  /** One pass over the pending models, in snapshot order; the next pass after a longer wait if any is left. */
  async #retry(): Promise<void> {
    for (const saved of [...this.#pending]) {
      if (this.#closed) return;
      // Unregistered meanwhile (forget), or registered by the operator: no longer this snapshot's to restore.
      if (!this.#pending.includes(saved)) continue;
      if (this.#registry.has(saved.name, saved.version)) {
        this.#pending = this.#pending.filter((p) => p !== saved);
        continue;
      }
      try {
        const entry = await this.#registerSaved(saved);
        // `defaultSet` may have run while it registered (it clears `isDefault` in place). An unregister that came
        // meanwhile found nothing registered and forgot it; the model now is, and `GET /models` shows it.
        this.#pending = this.#pending.filter((p) => p !== saved);
        if (saved.isDefault) this.#registry.setDefault(entry.name, entry.version);
        this.save();
        this.#log.info({ model: entryKey(entry), retries: this.#retries }, 'model in the snapshot restored on retry');
      } catch (err) {
        this.#log.warn(
          { model: entryKey(saved), url: saved.url, retries: this.#retries, err: (err as Error).message },
          'model in the snapshot still not restored: kept in the snapshot, retried',
        );
      }
    }
    this.#scheduleRetry();
  }
}
