/**
 * @module model-server/frontend/worker-pool — one engine: N worker processes that each load the same
 * (handler, model dir, device), shared by every model (language) attached to it. Feeds the attached models'
 * batchers into free worker slots, restarts dead workers with backoff, and reports health.
 *
 * Dispatch depends on whether the worker's handler merges work (`ready.mergesWork`):
 * - Merging (the translation engine with a masked decoder, echo): a worker has a free slot while it runs fewer
 *   than `maxBatchesPerWorker` batches (default: one per attached model, at least 2: enough to keep it busy, and
 *   to let the engine join rows of several languages at its step boundaries). Whenever a slot may have freed or a
 *   batch may be due, `pump()` gives each free slot, least-loaded worker first, the next due batch from the
 *   attached batchers in round-robin order, so one busy language cannot starve the others on a shared device.
 * - Non-merging (the Hugging Face export layout: a batch arriving mid-generation becomes its own cohort, which
 *   costs a full decoder call, a whole pass over the weights, every step): a worker is free only with NO batch in
 *   flight, and then takes a *round*: as soon as one attached batcher has a batch due (its policy decides), that
 *   batch AND every other attached batcher's waiting jobs (up to each one's batch size, window or not) leave
 *   together in one `round` message, so all languages sharing the engine start as one cohort and each step is
 *   one weight pass for all of them. Jobs arriving meanwhile wait for the next round (they would otherwise run
 *   as a second cohort at nearly the cost of the first).
 *
 * Restarts follow TorchServe: a worker that dies (or fails to load) is restarted after a Fibonacci backoff of
 * 1, 1, 2, 3, 5, 8 … units (unit 1 s, capped at 60 units), reset once a worker loads. A slot that has been
 * failing for `unhealthyAfterMs` (300 s) counts as unhealthy (`/ping` → 500) but keeps retrying.
 *
 * Concurrency: all state is mutated on the event loop by the pool's own methods and the handles' callbacks;
 * `pump()` is re-entrancy safe (a nested call, e.g. from `putBack`, just asks for one more pass).
 */
import type { Logger } from '../../common/logger.js';
import type { DeviceRequest, WorkerOptions } from '../protocol.js';
import type { Batcher } from './batcher.js';
import type { Job } from './job.js';
import { WorkerHandle, type BatchReport, type WorkerSpawner } from './worker-handle.js';

/** What one engine loads: the same for every worker of the pool. */
export interface EngineSpec {
  /** Identity of the engine (handler, model dir, device and, with ENGINE_SHARING=language, the model). */
  key: string;
  handler: string;
  modelDir: string;
  device: DeviceRequest;
  /** Why `device` is the CPU although a GPU was asked for (shown in describe, logged at start). */
  deviceFallback: string | undefined;
  options: WorkerOptions;
  /** Test-only fault injected into every worker of this engine (see worker/main.ts). */
  fault?: string;
}

export interface WorkerPoolOptions {
  spec: EngineSpec;
  spawn: WorkerSpawner;
  log: Logger;
  /** Longest a worker may take to load, ms. */
  startupTimeoutMs: number;
  /** Grace between asking a worker to stop and killing it, ms. */
  stopTimeoutMs: number;
  /** One backoff unit, ms (1000; tests shorten it). */
  backoffUnitMs: number;
  /** A slot failing this long is unhealthy, ms (TorchServe: 300 s). */
  unhealthyAfterMs: number;
  /** Fixed cap of batches in flight per merging worker; default max(2, attached models). Non-merging: 1 round. */
  maxBatchesPerWorker?: number;
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
    const cap = this.#options.maxBatchesPerWorker ?? Math.max(2, batchers.length);
    for (;;) {
      let worker: WorkerHandle | undefined;
      for (const slot of this.#slots) {
        const w = slot.worker;
        if (w?.state !== 'ready' || w.inFlightBatches >= (w.mergesWork ? cap : 1)) continue;
        if (worker === undefined || w.inFlightBatches < worker.inFlightBatches) worker = w;
      }
      if (worker === undefined) return;
      if (!worker.mergesWork) {
        if (!this.#sendRound(worker, batchers)) return;
        continue;
      }
      let sent = false;
      for (let i = 0; i < batchers.length && !sent; i += 1) {
        const index = (this.#rr + i) % batchers.length;
        const batcher = batchers[index]!;
        const jobs = batcher.nextBatch();
        if (jobs === null) continue;
        this.#rr = (index + 1) % batchers.length;
        const first = jobs[0]!;
        if (worker.send(jobs, first.model, first.version)) {
          sent = true;
        } else {
          batcher.putBack(jobs);
          return; // the worker is leaving; its exit or the next event pumps again
        }
      }
      if (!sent) return;
    }
  }

  /**
   * Give an idle non-merging worker a round: the first due batch in round-robin order, then every other batcher's
   * waiting jobs (flushed, up to its batch size). Returns false when nothing is due or the worker left.
   */
  #sendRound(worker: WorkerHandle, batchers: Batcher[]): boolean {
    let first = -1;
    let due: Job[] | null = null;
    for (let i = 0; i < batchers.length && due === null; i += 1) {
      first = (this.#rr + i) % batchers.length;
      due = batchers[first]!.nextBatch();
    }
    if (due === null) return false;
    this.#rr = (first + 1) % batchers.length;
    const taken: { batcher: Batcher; jobs: Job[] }[] = [{ batcher: batchers[first]!, jobs: due }];
    for (let i = 1; i < batchers.length; i += 1) {
      const batcher = batchers[(first + i) % batchers.length]!;
      const jobs = batcher.nextBatch({ flush: true });
      if (jobs !== null) taken.push({ batcher, jobs });
    }
    const round = taken.map(({ jobs }) => ({ jobs, model: jobs[0]!.model, version: jobs[0]!.version }));
    if (worker.sendRound(round)) return true;
    for (const { batcher, jobs } of taken) batcher.putBack(jobs);
    return false; // the worker is leaving; its exit or the next event pumps again
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
        ...(spec.fault === undefined ? {} : { fault: spec.fault }),
      },
      spawn: this.#options.spawn,
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
