/**
 * @module model-server/wlm/workers/engine-set — the engines (worker pools) of one model server. A model is served by the
 * engine keyed by (handler, model dir, device) — with ENGINE_SHARING=device every language pinned to one device
 * shares one engine and its weights; with `language` each model gets its own (TorchServe's layout). An engine runs
 * as many worker processes as the most demanding model attached to it asks for; an engine with no model left is
 * stopped. Each engine's batches, rows and deaths are reported to the metrics.
 */
import type { EngineSharing } from '../../../common/config.js';
import type { Logger } from '../../../common/logger.js';
import type { MetricsSnapshot, ServerMetrics } from '../metrics.js';
import type { ModelEntry } from '../registry.js';
import { deviceLabel } from '../devices.js';
import type { WorkerSpawner } from './worker-handle.js';
import { WorkerPool, type EngineSpec, type ManagerTimings } from './worker-pool.js';

export const DEFAULT_TIMINGS: ManagerTimings = {
  backoffUnitMs: 1000,
  unhealthyAfterMs: 300_000,
  stopTimeoutMs: 30_000,
};

export interface EngineSetOptions {
  sharing: EngineSharing;
  spawn: WorkerSpawner;
  log: Logger;
  metrics: ServerMetrics;
  timings: ManagerTimings;
}

export class EngineSet {
  #options: EngineSetOptions;
  #pools = new Map<string, WorkerPool>();
  #nextWorkerId = 9000;

  constructor(options: EngineSetOptions) {
    this.#options = options;
  }

  /** The engine that loads `spec` for `model` (`name@version`): the running one, or a new one with no worker yet. */
  engineFor(spec: Omit<EngineSpec, 'key'>, model: string, startupTimeoutMs: number): WorkerPool {
    const parts = [spec.handler, deviceLabel(spec.device), spec.modelDir];
    if (this.#options.sharing === 'language') parts.push(model);
    const key = parts.join('|');
    return this.#pools.get(key) ?? this.#create({ key, ...spec }, startupTimeoutMs);
  }

  /** Run as many workers on `pool` as the most demanding of the models attached to it wants. */
  rescale(pool: WorkerPool, models: readonly ModelEntry[]): void {
    pool.scale(models.filter((e) => e.pool === pool).reduce((max, e) => Math.max(max, e.minWorkers), 0));
  }

  /** `pool` lost a model: stop it if none is left, else rescale it to the `models` still registered. */
  async release(pool: WorkerPool, models: readonly ModelEntry[]): Promise<void> {
    if (pool.attachedCount > 0) return this.rescale(pool, models);
    this.#pools.delete(pool.spec.key);
    await pool.close();
  }

  /** Worker processes by state and the rows each engine generates, for the metrics scrape. */
  snapshot(): Pick<MetricsSnapshot, 'workers' | 'liveRows'> {
    const workers: Record<string, number> = { starting: 0, ready: 0, stopping: 0, backoff: 0 };
    for (const pool of this.#pools.values()) {
      const live = pool.workers();
      for (const w of live) if (w.state !== 'dead') workers[w.state] = (workers[w.state] ?? 0) + 1;
      workers.backoff! += Math.max(0, pool.target - live.filter((w) => w.state !== 'stopping').length);
    }
    const liveRows = [...this.#pools.values()].map((pool) => ({
      engine: pool.spec.key,
      rows: pool.workers().reduce((n, w) => n + (w.state === 'dead' ? 0 : w.liveRows), 0),
    }));
    return { workers, liveRows };
  }

  /** Stop every engine (each worker finishes its batches first). */
  async close(): Promise<void> {
    await Promise.all([...this.#pools.values()].map((pool) => pool.close()));
    this.#pools.clear();
  }

  #create(spec: EngineSpec, startupTimeoutMs: number): WorkerPool {
    const { metrics, timings } = this.#options;
    const pool = new WorkerPool({
      spec,
      spawn: this.#options.spawn,
      log: this.#options.log,
      startupTimeoutMs,
      ...timings,
      nextWorkerId: () => String(this.#nextWorkerId++),
      onBatchDone: (r) => {
        metrics.batchDone(r.model, r.version, r.size, r.handlerMs, r.finishedAfterAbandon);
        metrics.stepsDone(spec.key, r.stepRuns, r.stepRows);
        metrics.rowsDropped(spec.key, { cancelled: r.cancelledRows, capped: r.cappedRows, failed: r.failedRows });
      },
      onWorkerDied: () => metrics.workerDied(spec.key),
    });
    this.#pools.set(spec.key, pool);
    return pool;
  }
}
