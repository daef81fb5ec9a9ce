/**
 * @module model-server/wlm/model-manager — registering, scaling and unregistering models, and
 * admitting inference jobs: the policy that ties the registry, the batchers and the engines (worker pools)
 * together.
 *
 * Engines: a model is served by the engine keyed by (handler, model dir, device) — with ENGINE_SHARING=device
 * every language pinned to one device shares one engine and its weights; with `language` each model gets its own
 * (TorchServe's layout). An engine runs as many worker processes as the most demanding model attached to it asks
 * for; a model is served by all of them. An engine with no model left is stopped.
 */
import type { ModelServerConfig, SetupConfig } from '../../common/config.js';
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ItemBody } from '../protocol.js';
import { DEFAULT_MODEL_VERSION, MODEL_NAME_PATTERN, RUNTIMES, resolveStoreEntry } from '../store/manifest.js';
import { HANDLER_NAMES, isHandlerName } from '../worker/handlers/index.js';
import { Batcher } from './batcher.js';
import { placeModel, type CudaAvailability, type WebGpuAvailability } from './devices.js';
import type { GpuMonitor } from './gpu-monitor.js';
import { BULK_REQUEST_JOBS, Job, newJobId } from './job.js';
import type { MetricsSnapshot, ServerMetrics } from './metrics.js';
import type { ModelFingerprints } from './model-fingerprint.js';
import { ModelRegistry, type ModelEntry } from './registry.js';
import { SnapshotStore, type SavedModel } from './snapshot.js';
import type { WorkerSpawner } from './worker-handle.js';
import { deviceLabel } from './worker-handle.js';
import { WorkerPool, type EngineSpec } from './worker-pool.js';

/** Timings with production defaults that tests shorten. */
export interface ManagerTimings {
  /** One restart backoff unit, ms (1000). */
  backoffUnitMs: number;
  /** A worker failing this long makes `/ping` unhealthy, ms (300 000). */
  unhealthyAfterMs: number;
  /** Grace for a worker to finish its batches when stopped, ms (30 000). */
  stopTimeoutMs: number;
}

export const DEFAULT_TIMINGS: ManagerTimings = {
  backoffUnitMs: 1000,
  unhealthyAfterMs: 300_000,
  stopTimeoutMs: 30_000,
};

export interface ModelManagerOptions {
  config: ModelServerConfig;
  /** setup_config.json (languages → GPU id); models it does not name run on the CPU. */
  setupConfig: SetupConfig | undefined;
  cuda: CudaAvailability;
  /** Whether GPU-pinned models may run on WebGPU when CUDA is unusable (default: not probed, so the CPU). */
  webgpu?: WebGpuAvailability;
  spawn: WorkerSpawner;
  log: Logger;
  metrics: ServerMetrics;
  gpu: GpuMonitor;
  timings?: Partial<ManagerTimings>;
  /** Fingerprints of the model folders, computed at registration (the translation cache keys on them). */
  fingerprints?: ModelFingerprints;
  /**
   * Where the registrations are saved after every management change and restored from at start
   * (wlm/snapshot.ts); none: nothing is saved.
   */
  snapshotDir?: string;
}

/** A registration, with TorchServe's parameters already validated and typed. */
export interface RegisterRequest {
  url: string;
  modelName?: string;
  handler?: string;
  runtime?: string;
  batchSize?: number;
  maxBatchDelayMs?: number;
  initialWorkers?: number;
  synchronous: boolean;
  responseTimeoutS?: number;
  startupTimeoutS?: number;
}

/** The outcome of a management change: its message, and whether the workers have reached their new state. */
export interface ManagementResult {
  /** False: the change is accepted and the workers are still being started or stopped (TorchServe answers 202). */
  settled: boolean;
  message: string;
}

/** TorchServe's startup_timeout default, seconds. */
const DEFAULT_STARTUP_TIMEOUT_S = 120;

export class ModelManager {
  readonly registry = new ModelRegistry();
  #options: ModelManagerOptions;
  #config: ModelServerConfig;
  #timings: ManagerTimings;
  #log: Logger;
  #engines = new Map<string, WorkerPool>();
  #nextWorkerId = 9000;
  #closing = false;
  readonly #snapshot: SnapshotStore | undefined;
  /** While the snapshot is being restored nothing is saved: a crash then must find the full snapshot again. */
  #restoring = false;

  constructor(options: ModelManagerOptions) {
    this.#options = options;
    this.#config = options.config;
    this.#timings = { ...DEFAULT_TIMINGS, ...options.timings };
    this.#log = options.log;
    this.#snapshot = options.snapshotDir === undefined ? undefined : new SnapshotStore(options.snapshotDir);
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
    const store = resolveStoreEntry(this.#config.modelStore, request.url);
    const manifest = store.manifest;
    // Before the checks below, which must run without an await between them and `registry.add`.
    await this.#options.fingerprints?.compute(manifest.model.modelDir).catch((err: Error) => {
      this.#log.warn(
        { modelDir: manifest.model.modelDir, err: err.message },
        'model folder not fingerprinted: no cache',
      );
    });
    const runtime = request.runtime ?? manifest.runtime;
    if (!(RUNTIMES as readonly string[]).includes(runtime)) {
      throw new ServeError('BAD_REQUEST', `Invalid RuntimeType value: ${runtime}`);
    }
    const name = request.modelName ?? manifest.model.modelName;
    if (!MODEL_NAME_PATTERN.test(name)) throw new ServeError('BAD_REQUEST', `Invalid model name: ${name}`);
    const version = manifest.model.modelVersion || DEFAULT_MODEL_VERSION;
    const handler = request.handler ?? manifest.model.handler;
    if (!isHandlerName(handler)) {
      throw new ServeError(
        'BAD_REQUEST',
        `Parameter handler must be one of ${HANDLER_NAMES.join(', ')}, got: ${handler}`,
      );
    }
    if (this.registry.has(name, version)) {
      throw new ServeError('CONFLICT', `Model version ${version} is already registered for model ${name}`);
    }
    const workers = request.initialWorkers ?? this.#config.defaultWorkersPerModel;
    const placement = placeModel(this.#options.setupConfig?.cuda_id[name], this.#options.cuda, this.#options.webgpu);
    if (placement.fallbackReason) {
      const where = placement.device.kind === 'webgpu' ? 'on WebGPU' : 'on the CPU';
      this.#log.warn({ model: name, reason: placement.fallbackReason }, `model placed ${where} instead of CUDA`);
    }
    const spec: EngineSpec = {
      key: this.#engineKey(handler, manifest.model.modelDir, placement.device, name, version),
      handler,
      modelDir: manifest.model.modelDir,
      device: placement.device,
      deviceFallback: placement.fallbackReason,
      options: {
        intraOpThreads: this.#config.intraOpThreads,
        numBeams: this.#config.numBeams,
        maxNewTokens: this.#config.maxNewTokens,
        minNewTokens: this.#config.minNewTokens,
        modelDtype: this.#config.modelDtype,
      },
    };
    const startupTimeoutMs = (request.startupTimeoutS ?? DEFAULT_STARTUP_TIMEOUT_S) * 1000;
    const pool = this.#engines.get(spec.key) ?? this.#createEngine(spec, startupTimeoutMs);
    const responseTimeoutS = request.responseTimeoutS ?? this.#config.defaultResponseTimeoutS;
    const entry: ModelEntry = {
      name,
      version,
      url: request.url,
      handler,
      modelDir: manifest.model.modelDir,
      runtime,
      batcher: new Batcher({
        policy: this.#config.batchPolicy,
        batchSize: request.batchSize ?? this.#config.defaultBatchSize,
        maxBatchDelayMs: request.maxBatchDelayMs ?? this.#config.defaultMaxBatchDelayMs,
        queueSize: this.#config.jobQueueSize,
        // Half the response timeout at most, so a job that waited its whole budget still has time to run.
        queueBudgetMs: Math.min(this.#config.queueBudgetMs, (responseTimeoutS * 1000) / 2),
        responseTimeoutMs: responseTimeoutS * 1000,
      }),
      pool,
      placement,
      responseTimeoutS,
      startupTimeoutS: startupTimeoutMs / 1000,
      loadedAtStartup,
      minWorkers: workers,
      maxWorkers: workers,
    };
    this.registry.add(entry);
    pool.attach(entryKey(entry), entry.batcher);
    this.#rescale(pool);
    this.#save();
    this.#log.info({ model: name, version, engine: spec.key, workers, device: placement.device }, 'model registered');
    if (!request.synchronous) return { settled: false, message: 'Processing worker updates...' };
    if (workers > 0) {
      try {
        await withTimeout(pool.waitReady(workers), startupTimeoutMs);
      } catch (err) {
        this.#log.error(
          { model: name, version, err: (err as Error).message },
          'workers failed to start; unregistering',
        );
        if (this.registry.has(name, version)) {
          const removed = this.registry.remove(name, version);
          this.#save();
          await this.#remove(removed);
        }
        throw new ServeError('WORKER_START_FAILED', `Failed to start workers for model ${name} version: ${version}`, {
          cause: err,
        });
      }
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
    this.#rescale(entry.pool);
    this.#save();
    if (!synchronous) return { settled: false, message: 'Processing worker updates...' };
    if (minWorkers > 0) {
      try {
        await withTimeout(entry.pool.waitReady(minWorkers), DEFAULT_STARTUP_TIMEOUT_S * 1000);
      } catch (err) {
        throw new ServeError(
          'WORKER_START_FAILED',
          `Failed to start workers for model ${name} version: ${entry.version}`,
          {
            cause: err,
          },
        );
      }
    }
    return { settled: true, message: `Workers scaled to ${minWorkers} for model: ${name}` };
  }

  /** Unregister one version (the default when none is named), finishing its queued jobs first. */
  async unregister(name: string, version: string | undefined): Promise<ManagementResult> {
    const entry = this.registry.remove(name, version);
    this.#save();
    await this.#remove(entry);
    return { settled: true, message: `Model "${name}" unregistered` };
  }

  setDefault(name: string, version: string): ManagementResult {
    this.registry.setDefault(name, version);
    this.#save();
    return { settled: true, message: `Default version successfully updated for model "${name}" to "${version}"` };
  }

  /**
   * Register again what the last good snapshot holds, with its settings and default versions, without waiting for
   * workers (`ready` resolves when every restored model has its workers, or failed to). A model that cannot be
   * registered again (its store entry gone) is logged and left out. Call once, before the ports listen, so no
   * request finds a restored model missing.
   */
  async restore(): Promise<{ models: string[]; ready: Promise<void> }> {
    const loaded = this.#snapshot?.load();
    for (const bad of loaded?.rejected ?? []) {
      this.#log.error({ file: bad.file, reason: bad.reason }, 'model snapshot not loaded: corrupt; set aside');
    }
    if (loaded === undefined || loaded.models.length === 0) {
      if (loaded !== undefined) this.#snapshot!.save([]);
      return { models: [], ready: Promise.resolve() };
    }
    this.#restoring = true;
    const restored: ModelEntry[] = [];
    try {
      for (const saved of loaded.models) {
        try {
          await this.#register(
            {
              url: saved.url,
              modelName: saved.name,
              handler: saved.handler,
              runtime: saved.runtime,
              batchSize: saved.batchSize,
              maxBatchDelayMs: saved.maxBatchDelayMs,
              initialWorkers: saved.minWorkers,
              responseTimeoutS: saved.responseTimeoutS,
              startupTimeoutS: saved.startupTimeoutS,
              synchronous: false,
            },
            true,
          );
          const entry = this.registry.get(saved.name);
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
        if (saved.isDefault && this.registry.has(saved.name, saved.version)) {
          this.registry.setDefault(saved.name, saved.version);
        }
      }
    } finally {
      this.#restoring = false;
    }
    this.#save();
    const models = restored.map(entryKey);
    this.#log.info({ file: loaded.file, models }, 'models restored from the snapshot');
    const ready = Promise.all(
      restored.map((entry) =>
        entry.minWorkers === 0
          ? undefined
          : withTimeout(entry.pool.waitReady(entry.minWorkers), entry.startupTimeoutS * 1000).catch((err: Error) =>
              this.#log.error({ model: entryKey(entry), err: err.message }, 'restored model: workers did not start'),
            ),
      ),
    ).then(() => undefined);
    return { models, ready };
  }

  /** The registrations as saved (wlm/snapshot.ts). */
  savedModels(): SavedModel[] {
    return this.registry.entries().map((e) => ({
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
      isDefault: this.registry.defaultVersion(e.name) === e.version,
    }));
  }

  /** Save the registrations after a management change; a failed save is logged (the change itself stands). */
  #save(): void {
    if (this.#snapshot === undefined || this.#restoring) return;
    try {
      this.#snapshot.save(this.savedModels());
    } catch (err) {
      this.#log.error(
        { dir: this.#snapshot.dir, err: (err as Error).message },
        'model snapshot not saved: a restart would not restore this change',
      );
    }
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
    if (this.#closing) throw new ServeError('SHUTTING_DOWN');
    const entry = this.registry.get(name, version);
    if (entry.pool.target === 0 || !entry.pool.serviceable) {
      throw new ServeError('NO_WORKER', `No worker is available for model ${name} version ${entry.version}.`);
    }
    const timeoutMs = entry.responseTimeoutS * 1000;
    // One group per request: its queue takes the request's jobs in turn with other requests' (batch-queue.ts).
    const group = {};
    const bulk = bodies.length > BULK_REQUEST_JOBS;
    const jobs = bodies.map(
      (body) =>
        new Job({
          id: newJobId(),
          model: entry.name,
          version: entry.version,
          body,
          responseTimeoutMs: timeoutMs,
          group,
          bulk,
        }),
    );
    try {
      entry.batcher.submit(jobs);
    } catch (err) {
      const refusal = err instanceof ServeError ? err : new ServeError('INTERNAL', undefined, { cause: err });
      for (const job of jobs) job.reject(refusal); // clears their timers; nobody else ever saw them
      throw refusal;
    }
    for (const job of jobs)
      void job.promise.then(
        () => this.#options.metrics.jobDone(job),
        () => this.#options.metrics.jobDone(job),
      );
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
    const workers: Record<string, number> = { starting: 0, ready: 0, stopping: 0, backoff: 0 };
    for (const pool of this.#engines.values()) {
      const live = pool.workers();
      for (const w of live) if (w.state !== 'dead') workers[w.state] = (workers[w.state] ?? 0) + 1;
      workers.backoff! += Math.max(0, pool.target - live.filter((w) => w.state !== 'stopping').length);
    }
    const queues = this.registry
      .entries()
      .map((e) => ({ model: e.name, version: e.version, depth: e.batcher.queue.size }));
    const liveRows = [...this.#engines.values()].map((pool) => ({
      engine: pool.spec.key,
      rows: pool.workers().reduce((n, w) => n + (w.state === 'dead' ? 0 : w.liveRows), 0),
    }));
    return { queues, workers, liveRows };
  }

  /**
   * Drain and stop: refuse new jobs, flush every queue to the workers without waiting for company, wait for the
   * answers (at most `graceMs`), fail what is left with SHUTTING_DOWN, stop every worker. Idempotent.
   */
  async close(graceMs: number): Promise<void> {
    if (this.#closing) return;
    this.#closing = true;
    const entries = this.registry.entries();
    const refusal = new ServeError('SHUTTING_DOWN');
    // Jobs of a model nobody can serve would only wait out the grace: fail them now.
    for (const e of entries) if (e.pool.target === 0 || !e.pool.serviceable) e.batcher.queue.failAll(refusal);
    const drained = Promise.all(entries.map((e) => e.batcher.close()));
    const timedOut = await withTimeout(drained, graceMs).then(
      () => false,
      () => true,
    );
    if (timedOut) this.#log.warn({ graceMs }, 'drain grace passed; failing what is left');
    for (const e of entries) {
      e.batcher.queue.failAll(refusal);
      e.batcher.dispose();
    }
    await Promise.all([...this.#engines.values()].map((pool) => pool.close()));
    this.#engines.clear();
  }

  #assertOpen(): void {
    if (this.#closing) throw new ServeError('SHUTTING_DOWN');
  }

  #engineKey(handler: string, modelDir: string, device: EngineSpec['device'], name: string, version: string): string {
    const parts = [handler, deviceLabel(device), modelDir];
    if (this.#config.engineSharing === 'language') parts.push(`${name}@${version}`);
    return parts.join('|');
  }

  #createEngine(spec: EngineSpec, startupTimeoutMs: number): WorkerPool {
    const metrics = this.#options.metrics;
    const pool = new WorkerPool({
      spec,
      spawn: this.#options.spawn,
      log: this.#log,
      startupTimeoutMs,
      stopTimeoutMs: this.#timings.stopTimeoutMs,
      backoffUnitMs: this.#timings.backoffUnitMs,
      unhealthyAfterMs: this.#timings.unhealthyAfterMs,
      nextWorkerId: () => String(this.#nextWorkerId++),
      onBatchDone: (r) => {
        metrics.batchDone(r.model, r.version, r.size, r.handlerMs, r.finishedAfterAbandon);
        metrics.stepsDone(spec.key, r.stepRuns, r.stepRows);
        metrics.rowsDropped(spec.key, { cancelled: r.cancelledRows, capped: r.cappedRows, failed: r.failedRows });
      },
      onWorkerDied: () => metrics.workerDied(spec.key),
    });
    this.#engines.set(spec.key, pool);
    return pool;
  }

  /** An engine runs as many workers as its most demanding model wants. */
  #rescale(pool: WorkerPool): void {
    const wanted = this.registry
      .entries()
      .filter((e) => e.pool === pool)
      .reduce((max, e) => Math.max(max, e.minWorkers), 0);
    pool.scale(wanted);
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
    if (pool.attachedCount === 0) {
      this.#engines.delete(pool.spec.key);
      await pool.close();
    } else {
      this.#rescale(pool);
    }
    this.#log.info({ model: entry.name, version: entry.version }, 'model unregistered');
  }
}

/** The weights' type the model's engine reports (its first worker that said), undefined until one has. */
export function dtypeOf(entry: ModelEntry): string | undefined {
  return entry.pool.workers().find((w) => w.dtype !== undefined)?.dtype;
}

/** `name@version`, as registrations are named in logs and descriptions. */
export function entryKey(entry: ModelEntry): string {
  return `${entry.name}@${entry.version}`;
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`timed out after ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
