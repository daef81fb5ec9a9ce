/**
 * @module model-server/wlm/model-manager — registering, scaling and unregistering models, and admitting inference
 * jobs: the policy that ties the registry, the batchers and the engines (worker pools) together. A request is made
 * concrete in registration.ts, served by an engine of engine-set.ts, and the registrations are saved after every
 * change and restored at start (registry-snapshot.ts).
 */
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ItemBody } from '../protocol.js';
import { Batcher } from './batcher.js';
import { DEFAULT_TIMINGS, EngineSet } from './workers/engine-set.js';
import type { GpuMonitor } from './gpu-monitor.js';
import { BULK_REQUEST_JOBS, Job, newJobId } from './job.js';
import type { MetricsSnapshot, ServerMetrics } from './metrics.js';
import {
  DEFAULT_STARTUP_TIMEOUT_S,
  resolveRegistration,
  type RegisterRequest,
  type RegistrationContext,
} from './registration.js';
import { entryKey, ModelRegistry, type ModelEntry } from './registry.js';
import { RegistrySnapshot } from './registry-snapshot.js';
import type { WorkerSpawner } from './workers/worker-handle.js';
import type { ManagerTimings } from './workers/worker-pool.js';

/** Where the timings are defined (worker-pool.ts); exported here too, as the manager's options name them. */
export type { ManagerTimings } from './workers/worker-pool.js';

export interface ModelManagerOptions extends RegistrationContext {
  spawn: WorkerSpawner;
  metrics: ServerMetrics;
  gpu: GpuMonitor;
  timings?: Partial<ManagerTimings>;
  /**
   * Where the registrations are saved after every management change and restored from at start
   * (wlm/snapshot.ts); none: nothing is saved.
   */
  snapshotDir?: string;
}

/** The outcome of a management change: its message, and whether the workers have reached their new state. */
export interface ManagementResult {
  /** False: the change is accepted and the workers are still being started or stopped (TorchServe answers 202). */
  settled: boolean;
  message: string;
}

export class ModelManager {
  readonly registry = new ModelRegistry();
  #options: ModelManagerOptions;
  #log: Logger;
  #engines: EngineSet;
  #closing = false;
  readonly #snapshot: RegistrySnapshot;

  constructor(options: ModelManagerOptions) {
    this.#options = options;
    this.#log = options.log;
    const { config, spawn, log, metrics } = options;
    const timings = { ...DEFAULT_TIMINGS, ...options.timings };
    this.#engines = new EngineSet({ sharing: config.engineSharing, spawn, log, metrics, timings });
    this.#snapshot = new RegistrySnapshot({
      dir: options.snapshotDir,
      registry: this.registry,
      log,
      retryUnitMs: timings.backoffUnitMs,
    });
  }

  get closing(): boolean {
    return this.#closing;
  }

  /**
   * Register a store entry as a model and (when synchronous) wait for its workers. A model whose workers fail to
   * load is unregistered again and answered 500; other models keep serving.
   */
  async register(request: RegisterRequest): Promise<ManagementResult> {
    return this.#register(request, false);
  }

  async #register(request: RegisterRequest, loadedAtStartup: boolean): Promise<ManagementResult> {
    this.#assertOpen();
    const { model, engine, batcher } = await resolveRegistration(request, this.#options);
    const { name, version, placement, minWorkers: workers } = model;
    // From this check to `registry.add`, no await.
    if (this.registry.has(name, version)) {
      throw new ServeError('CONFLICT', `Model version ${version} is already registered for model ${name}`);
    }
    if (placement.fallbackReason) {
      const where = placement.device.kind === 'webgpu' ? 'on WebGPU' : 'on the CPU';
      this.#log.warn({ model: name, reason: placement.fallbackReason }, `model placed ${where} instead of CUDA`);
    }
    const startupTimeoutMs = model.startupTimeoutS * 1000;
    const pool = this.#engines.engineFor(engine, entryKey(model), startupTimeoutMs);
    const entry: ModelEntry = { ...model, batcher: new Batcher(batcher), pool, loadedAtStartup };
    this.registry.add(entry);
    pool.attach(entryKey(entry), entry.batcher);
    this.#engines.rescale(pool, this.registry.entries());
    this.#snapshot.save();
    this.#log.info(
      { model: name, version, engine: pool.spec.key, workers, device: placement.device },
      'model registered',
    );
    if (!request.synchronous) return { settled: false, message: 'Processing worker updates...' };
    try {
      await workersReady(entry, workers, startupTimeoutMs);
    } catch (err) {
      this.#log.error({ model: name, version, err: (err as Error).message }, 'workers failed to start; unregistering');
      if (this.registry.has(name, version)) {
        const removed = this.registry.remove(name, version);
        this.#snapshot.save();
        await this.#remove(removed);
      }
      throw startFailed(entry, err);
    }
    return { settled: true, message: `Model "${name}" Version: ${version} registered with ${workers} initial workers` };
  }

  /** Set a model's worker count (`min_worker`; `max_worker` is recorded). */
  async scale(
    name: string,
    version: string | undefined,
    minWorkers: number,
    maxWorkers: number,
    synchronous: boolean,
  ): Promise<ManagementResult> {
    this.#assertOpen();
    const entry = this.registry.get(name, version);
    entry.minWorkers = minWorkers;
    entry.maxWorkers = maxWorkers;
    this.#engines.rescale(entry.pool, this.registry.entries());
    this.#snapshot.save();
    if (!synchronous) return { settled: false, message: 'Processing worker updates...' };
    await workersReady(entry, minWorkers, DEFAULT_STARTUP_TIMEOUT_S * 1000).catch((err: unknown) => {
      throw startFailed(entry, err);
    });
    return { settled: true, message: `Workers scaled to ${minWorkers} for model: ${name}` };
  }

  /**
   * Unregister one version (the default when none is named), finishing its queued jobs first. A model the snapshot
   * holds but could not register again at start (registry-snapshot.ts) is unregistered by leaving the snapshot.
   */
  async unregister(name: string, version: string | undefined): Promise<ManagementResult> {
    const registered = version === undefined ? this.registry.names().includes(name) : this.registry.has(name, version);
    if (!registered && this.#snapshot.forget(name, version)) {
      return { settled: true, message: `Model "${name}" unregistered` };
    }
    const entry = this.registry.remove(name, version);
    this.#snapshot.save();
    await this.#remove(entry);
    return { settled: true, message: `Model "${name}" unregistered` };
  }

  setDefault(name: string, version: string): ManagementResult {
    this.registry.setDefault(name, version);
    this.#snapshot.defaultSet(name);
    return { settled: true, message: `Default version successfully updated for model "${name}" to "${version}"` };
  }

  /**
   * Register again what the last good snapshot holds, with its settings and default versions, without waiting for
   * workers (`ready` resolves when every restored model has its workers, or failed to). A model that cannot be
   * registered again (its store entry unreadable) is logged, kept in the snapshot and retried (registry-snapshot.ts). Call once, before the ports listen, so no
   * request finds a restored model missing.
   */
  async restore(): Promise<{ models: string[]; ready: Promise<void> }> {
    const restored = await this.#snapshot.restore((request) => this.#register(request, true));
    const ready = Promise.all(
      restored.map((entry) =>
        workersReady(entry, entry.minWorkers, entry.startupTimeoutS * 1000).catch((err: Error) =>
          this.#log.error({ model: entryKey(entry), err: err.message }, 'restored model: workers did not start'),
        ),
      ),
    ).then(() => undefined);
    return { models: restored.map(entryKey), ready };
  }

  /** Languages the model's engine can read (its first ready worker's tokenizer), undefined until one says. */
  readableLanguages(entry: ModelEntry): readonly string[] | undefined {
    return entry.pool.workers().find((w) => w.languages !== undefined)?.languages;
  }

  /**
   * Admit the inputs of one request as jobs (all or none) into the model's queue.
   * @throws ServeError MODEL_NOT_FOUND, MODEL_VERSION_NOT_FOUND, NO_WORKER, QUEUE_FULL, PAYLOAD_TOO_LARGE (more
   *   inputs than the queue can ever hold), SHUTTING_DOWN
   */
  submit(name: string, version: string | undefined, bodies: readonly ItemBody[]): { entry: ModelEntry; jobs: Job[] } {
    this.#assertOpen();
    const entry = this.registry.get(name, version);
    if (entry.pool.target === 0 || !entry.pool.serviceable) {
      throw new ServeError('NO_WORKER', `No worker is available for model ${name} version ${entry.version}.`);
    }
    const responseTimeoutMs = entry.responseTimeoutS * 1000;
    // One group per request: its queue takes the request's jobs in turn with other requests' (batch-queue.ts).
    const group = {};
    const bulk = bodies.length > BULK_REQUEST_JOBS;
    const jobs = bodies.map(
      (body) =>
        new Job({ id: newJobId(), model: entry.name, version: entry.version, body, responseTimeoutMs, group, bulk }),
    );
    try {
      entry.batcher.submit(jobs);
    } catch (err) {
      const refusal = err instanceof ServeError ? err : new ServeError('INTERNAL', undefined, { cause: err });
      for (const job of jobs) job.reject(refusal); // clears their timers; nobody else ever saw them
      throw refusal;
    }
    for (const job of jobs) {
      const done = () => this.#options.metrics.jobDone(job);
      void job.promise.then(done, done);
    }
    return { entry, jobs };
  }

  /**
   * TorchServe's `/ping`: healthy unless some model has fewer healthy workers than it asked for (a worker counts
   * as healthy until it has been failing for `unhealthyAfterMs`).
   */
  health(): { healthy: boolean; unhealthyModels: string[] } {
    const now = performance.now();
    const unhealthyModels = this.registry
      .entries()
      .filter((e) => e.minWorkers > 0 && e.pool.healthyCount(now) < Math.min(e.minWorkers, e.pool.target))
      .map(entryKey);
    return { healthy: unhealthyModels.length === 0, unhealthyModels };
  }

  /** Where GPU figures come from (nvidia-smi), for descriptions and the status document. */
  get gpu(): GpuMonitor {
    return this.#options.gpu;
  }

  /** What the metrics scrape reads. */
  snapshot(): MetricsSnapshot {
    const queues = this.registry
      .entries()
      .map((e) => ({ model: e.name, version: e.version, depth: e.batcher.queue.size }));
    return { queues, ...this.#engines.snapshot() };
  }

  /**
   * Drain and stop: refuse new jobs, flush every queue to the workers without waiting for company, wait for the
   * answers (at most `graceMs`), fail what is left with SHUTTING_DOWN, stop every worker. Idempotent.
   */
  async close(graceMs: number): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    this.#snapshot.close();
    const entries = this.registry.entries();
    const refusal = new ServeError('SHUTTING_DOWN');
    // Jobs of a model nobody can serve would only wait out the grace: fail them now.
    for (const e of entries) if (e.pool.target === 0 || !e.pool.serviceable) e.batcher.queue.failAll(refusal);
    const drained = Promise.all(entries.map((e) => e.batcher.close()));
    const outcome = await withTimeout(drained, graceMs).catch(() => 'timed out' as const);
    if (outcome === 'timed out') this.#log.warn({ graceMs }, 'drain grace passed; failing what is left');
    for (const e of entries) {
      e.batcher.queue.failAll(refusal);
      e.batcher.dispose();
    }
    await this.#engines.close();
  }

  #assertOpen(): void {
    if (this.#closing) throw new ServeError('SHUTTING_DOWN');
  }

  /** Take a model (already out of the registry) off its engine: finish or fail its jobs, stop an unused engine. */
  async #remove(entry: ModelEntry): Promise<void> {
    const pool = entry.pool;
    if (pool.target > 0 && pool.serviceable) {
      // Its queued jobs still run; they are bounded by their own response timeout.
      await withTimeout(entry.batcher.close(), entry.responseTimeoutS * 1000 + 1000).catch(() => undefined);
    }
    entry.batcher.queue.failAll(
      new ServeError('NO_WORKER', `Model ${entry.name} version ${entry.version} was unregistered before this job ran.`),
    );
    pool.detach(entryKey(entry));
    entry.batcher.dispose();
    await this.#engines.release(pool, this.registry.entries());
    this.#log.info({ model: entry.name, version: entry.version }, 'model unregistered');
  }
}

/** Resolve once `count` of the model's workers are ready (at once for none); reject after `timeoutMs`. */
function workersReady(entry: ModelEntry, count: number, timeoutMs: number): Promise<void> {
  return count > 0 ? withTimeout(entry.pool.waitReady(count), timeoutMs) : Promise.resolve();
}

function startFailed(entry: ModelEntry, cause: unknown): ServeError {
  const message = `Failed to start workers for model ${entry.name} version: ${entry.version}`;
  return new ServeError('WORKER_START_FAILED', message, { cause });
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
