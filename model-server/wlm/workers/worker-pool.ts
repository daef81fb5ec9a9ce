/**
 * @module model-server/wlm/workers/worker-pool — one engine: N worker processes that each load the same
 * (handler, model dir, device), shared by every model (language) attached to it. Feeds the attached models'
 * batchers into free worker slots, restarts dead workers with backoff, and reports health.
 *
 * Dispatch: `pump()` hands the attached models' due batches to ready workers with room (dispatch-pass.ts), and
 * sends each worker what it got in a pass as ONE message, so the engine starts it all at one step boundary.
 *
 * Restarts follow TorchServe: a worker that dies (or fails to load) is restarted after a Fibonacci backoff of
 * 1, 1, 2, 3, 5, 8 … units (unit 1 s, capped at 60 units), reset once a worker loads. A slot that has been
 * failing for `unhealthyAfterMs` (300 s) counts as unhealthy (`/ping` → 500) but keeps retrying.
 *
 * Concurrency: all state is mutated on the event loop by the pool's own methods and the handles' callbacks;
 * `pump()` is re-entrancy safe (a nested call, e.g. from `putBack`, just asks for one more pass).
 */
import type { Logger } from '../../../common/logger.js';
import type { InitMessage } from '../../protocol.js';
import type { Batcher } from '../batcher.js';
import { dispatchPass } from './dispatch-pass.js';
import type { BatchReport } from './worker-batches.js';
import { WorkerHandle, type WorkerSpawner } from './worker-handle.js';

/** What one engine loads (its workers' `init`): the same for every worker of the pool. */
export interface EngineSpec extends Omit<InitMessage, 'type' | 'workerId'> {
  /** Identity of the engine (handler, model dir, device and, with ENGINE_SHARING=language, the model). */
  key: string;
  /** Why `device` is the CPU although a GPU was asked for (shown in describe, logged at start). */
  deviceFallback: string | undefined;
}

/** Timings with production defaults (engine-set.ts `DEFAULT_TIMINGS`) that tests shorten. */
export interface ManagerTimings {
  /** One restart backoff unit, ms (1000). */
  backoffUnitMs: number;
  /** A slot failing this long is unhealthy: `/ping` answers 500, ms (TorchServe: 300 000). */
  unhealthyAfterMs: number;
  /** Grace for a worker to finish its batches between asking it to stop and killing it, ms (30 000). */
  stopTimeoutMs: number;
}

export interface WorkerPoolOptions extends ManagerTimings {
  spec: EngineSpec;
  spawn: WorkerSpawner;
  log: Logger;
  /** Longest a worker may take to load, ms. */
  startupTimeoutMs: number;
  /** Worker ids are unique across the server; the pool asks for one per spawn. */
  nextWorkerId: () => string;
  onBatchDone?: (report: BatchReport) => void;
  /** A worker died or failed to load without being asked to stop. */
  onWorkerDied?: (reason: string) => void;
}

/** One wanted worker: the process currently filling it (if any) and its failure history. */
interface Slot {
  worker: WorkerHandle | undefined;
  /** Consecutive failures since the last good load. */
  failures: number;
  /** `performance.now()` of the first failure of the current streak. */
  failingSince: number | undefined;
  restartTimer: NodeJS.Timeout | undefined;
}

interface ReadyWaiter {
  count: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** TorchServe's backoff sequence in units, capped. */
export function backoffUnits(failures: number): number {
  let a = 1;
  let b = 1;
  for (let i = 1; i < failures; i += 1) [a, b] = [b, a + b];
  return Math.min(a, 60);
}

export class WorkerPool {
  readonly spec: EngineSpec;
  #options: WorkerPoolOptions;
  #log: Logger;
  #slots: Slot[] = [];
  /** Workers scaled away, finishing their in-flight batches. */
  #retiring = new Set<WorkerHandle>();
  #batchers = new Map<string, Batcher>();
  #rr = 0;
  #pumping = false;
  #pumpAgain = false;
  /** Workers that refused a send during the current pump (leaving: their exit pumps again). */
  #refused = new Set<WorkerHandle>();
  #waiters = new Set<ReadyWaiter>();
  #closed = false;

  constructor(options: WorkerPoolOptions) {
    this.spec = options.spec;
    this.#options = options;
    this.#log = options.log.child({ engine: options.spec.key });
  }

  /** Worker processes wanted. */
  get target(): number {
    return this.#slots.length;
  }

  get attachedCount(): number {
    return this.#batchers.size;
  }

  get readyCount(): number {
    return this.#slots.filter((s) => s.worker?.state === 'ready').length;
  }

  /** Live workers (in slots) and retiring ones, for describe. */
  workers(): WorkerHandle[] {
    const inSlots = this.#slots.flatMap((s) => (s.worker ? [s.worker] : []));
    return [...inSlots, ...this.#retiring];
  }

  /** Slots whose worker is ready, still loading, or failing for less than `unhealthyAfterMs`. */
  healthyCount(now = performance.now()): number {
    return this.#slots.filter(
      (s) =>
        s.worker?.state === 'ready' ||
        s.failingSince === undefined ||
        now - s.failingSince < this.#options.unhealthyAfterMs,
    ).length;
  }

  /** True while some slot may still serve soon (not every slot failing past the unhealthy threshold). */
  get serviceable(): boolean {
    return this.healthyCount() > 0;
  }

  attach(key: string, batcher: Batcher): void {
    this.#batchers.set(key, batcher);
    batcher.onDue(() => this.pump());
    this.pump();
  }

  detach(key: string): void {
    this.#batchers.get(key)?.onDue(undefined);
    this.#batchers.delete(key);
  }

  /** Want `count` workers: start new slots or retire the last ones (they finish their batches first). */
  scale(count: number): void {
    if (this.#closed) return;
    while (this.#slots.length < count) {
      const slot: Slot = { worker: undefined, failures: 0, failingSince: undefined, restartTimer: undefined };
      this.#slots.push(slot);
      this.#startSlot(slot);
    }
    while (this.#slots.length > count) {
      const slot = this.#slots.pop()!;
      clearTimeout(slot.restartTimer);
      if (slot.worker) this.#retire(slot.worker);
    }
    this.#settleWaiters();
  }

  /**
   * Resolve once at least `count` workers are ready (at once if they are). Reject when a worker fails to load
   * while we wait, or when the pool cannot reach `count` (it wants fewer workers).
   */
  waitReady(count: number): Promise<void> {
    if (this.readyCount >= count) return Promise.resolve();
    return new Promise<void>((resolve, reject) => {
      this.#waiters.add({ count, resolve, reject });
      this.#settleWaiters();
    });
  }

  /** Give free worker slots the next due batches. */
  pump(): void {
    if (this.#pumping) {
      this.#pumpAgain = true;
      return;
    }
    this.#pumping = true;
    try {
      do {
        this.#pumpAgain = false;
        this.#pumpOnce();
      } while (this.#pumpAgain);
    } finally {
      this.#pumping = false;
      this.#refused.clear();
    }
  }

  /** Stop every worker (each finishes its in-flight batches first). Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const workers = this.workers();
    for (const slot of this.#slots) clearTimeout(slot.restartTimer);
    this.#slots = [];
    this.#settleWaiters();
    await Promise.all(workers.map((w) => w.stop()));
  }

  #pumpOnce(): void {
    const batchers = [...this.#batchers.values()];
    if (batchers.length === 0) return;
    const ready = this.#slots.flatMap(({ worker: w }) => (w?.state === 'ready' && !this.#refused.has(w) ? [w] : []));
    const { given, rr } = dispatchPass(ready, batchers, this.#rr);
    this.#rr = rr;
    for (const [worker, { batches }] of given) {
      const round = batches.map(({ jobs }) => ({ jobs, model: jobs[0]!.model, version: jobs[0]!.version }));
      if (worker.sendRound(round)) continue;
      // The worker is leaving: the jobs go back, and only other workers get them in this pump (its exit pumps again).
      this.#refused.add(worker);
      for (const { batcher, jobs } of batches) batcher.putBack(jobs);
    }
  }

  #startSlot(slot: Slot): void {
    slot.restartTimer = undefined;
    if (this.#closed || !this.#slots.includes(slot)) return;
    const { spec } = this;
    const worker = new WorkerHandle({
      id: this.#options.nextWorkerId(),
      init: {
        handler: spec.handler,
        modelDir: spec.modelDir,
        device: spec.device,
        options: spec.options,
      },
      spawn: (workerId) => this.#options.spawn(workerId, { key: spec.key, models: [...this.#batchers.keys()] }),
      log: this.#log,
      startupTimeoutMs: this.#options.startupTimeoutMs,
      stopTimeoutMs: this.#options.stopTimeoutMs,
      events: {
        batchDone: (_worker, report) => {
          this.#options.onBatchDone?.(report);
          this.pump();
        },
        exited: (w, info) => this.#onExit(slot, w, info),
      },
    });
    slot.worker = worker;
    worker.start().then(
      () => {
        slot.failures = 0;
        slot.failingSince = undefined;
        this.#settleWaiters();
        this.pump();
      },
      (err: Error) => {
        this.#log.error({ err: err.message, workerId: worker.id }, 'worker failed to load');
        this.#settleWaiters(err);
      },
    );
  }

  #onExit(slot: Slot, worker: WorkerHandle, info: { expected: boolean; reason: string }): void {
    this.#retiring.delete(worker);
    if (!info.expected) this.#options.onWorkerDied?.(info.reason);
    if (slot.worker !== worker) {
      this.pump();
      return;
    }
    slot.worker = undefined;
    if (this.#closed || !this.#slots.includes(slot)) return;
    slot.failures += 1;
    slot.failingSince ??= performance.now();
    const delayMs = backoffUnits(slot.failures) * this.#options.backoffUnitMs;
    this.#log.warn(
      { workerId: worker.id, reason: info.reason, failures: slot.failures, restartInMs: delayMs },
      'worker died; restarting after backoff',
    );
    slot.restartTimer = setTimeout(() => this.#startSlot(slot), delayMs);
    this.pump();
  }

  #retire(worker: WorkerHandle): void {
    this.#retiring.add(worker);
    void worker.stop().finally(() => this.#retiring.delete(worker));
  }

  /** Resolve waiters that are satisfied; reject them all with `failure`, or those the pool cannot satisfy. */
  #settleWaiters(failure?: Error): void {
    const ready = this.readyCount;
    for (const waiter of this.#waiters) {
      if (ready >= waiter.count) waiter.resolve();
      else if (failure) waiter.reject(failure);
      else if (this.#slots.length < waiter.count || this.#closed) {
        waiter.reject(new Error(`the engine wants ${this.#slots.length} workers, fewer than ${waiter.count}`));
      } else continue;
      this.#waiters.delete(waiter);
    }
  }
}
