/**
 * @module model-server/wlm/workers/worker-handle — one worker process seen from the frontend: spawn it, load it,
 * send it batches, match its per-item replies to jobs, and end it (gracefully or not).
 *
 * State (one union, changed only in `#setState`, which logs every transition):
 *
 *     starting ──ready──▶ ready ──stop()──▶ stopping ──exit──▶ dead
 *         │                 │                                   ▲
 *         └──init-failed / exit / startup timeout / kill()──────┘
 *
 * Invariants:
 * - Every job sent to this worker is settled exactly once, by its answer or, when the process exits, with
 *   WORKER_DIED; a job abandoned while here is cancelled on the worker (worker-batches.ts keeps the jobs).
 * - A worker is recycled (SIGKILL) only when it is *stuck*: it holds jobs and has shown no progress (a `progress`
 *   heartbeat, an answered item, a finished batch) for the longest response timeout of those jobs: none of their
 *   clients would still be waiting for it. The jobs' own, not their models': a model unregistered while its jobs
 *   hang the worker leaves them held and no longer attached. Its jobs then fail 504 REQUEST_TIMEOUT, not "Worker
 *   died." (it did not crash; they were stuck behind it). We do not retry them (see docs/model-server.md: a
 *   poison input would hang worker after worker). A slow job never recycles a worker that keeps stepping. A
 *   worker that exits by itself fails its jobs with WORKER_DIED.
 */
import { readFileSync } from 'node:fs';
import { ServeError } from '../../../common/errors.js';
import type { Logger } from '../../../common/logger.js';
import type { DeviceInfo, FromWorker, InitMessage, LoadedModel, ToWorker } from '../../protocol.js';
import { deviceLabel } from '../devices.js';
import type { AbandonReason, Job, JobHolder } from '../job.js';
import { WorkerBatches, type BatchReport, type OutgoingBatch } from './worker-batches.js';
import type { WorkerConnection } from './worker-connection.js';

export type WorkerState = 'starting' | 'ready' | 'stopping' | 'dead';

/** The engine a worker is spawned for: its key (EngineSpec) and the models attached to it then (`name@version`). */
export interface SpawnedEngine {
  key: string;
  models: readonly string[];
}

/**
 * Starts one worker (production: a process, http/server.ts `forkWorker`); tests inject factories whose workers crash,
 * hang or lie, choosing by `engine` which workers misbehave, or run the worker loop in their own process.
 */
export type WorkerSpawner = (workerId: string, engine: SpawnedEngine) => WorkerConnection;

export interface WorkerEvents {
  /** A batch finished (its slot is free). */
  batchDone(worker: WorkerHandle, report: BatchReport): void;
  /** The process is gone. `expected` when we asked it to stop. */
  exited(worker: WorkerHandle, info: { expected: boolean; reason: string }): void;
}

export interface WorkerHandleOptions {
  id: string;
  /** The `init` message minus its type and id. */
  init: Omit<InitMessage, 'type' | 'workerId'>;
  /** Starts the worker (the pool's spawner, bound to its engine). */
  spawn: (workerId: string) => WorkerConnection;
  log: Logger;
  /** Longest a load may take before the worker is killed, ms. */
  startupTimeoutMs: number;
  /** Grace between `shutdown` and SIGKILL, ms. */
  stopTimeoutMs: number;
  events: WorkerEvents;
}

export class WorkerHandle implements JobHolder {
  readonly id: string;
  /** ISO time the process was spawned (TorchServe's `startTime`). */
  readonly startTime: string;
  /** Where the worker says it runs; undefined until `ready`. */
  device: DeviceInfo | undefined;
  languages: string[] | undefined;
  /** The weights' type the worker loaded (its `ready` message); undefined for handlers without weights. */
  dtype: string | undefined;
  /** The model the worker loaded (its `ready` message); undefined for handlers without one. */
  model: LoadedModel | undefined;
  /** Most jobs the worker runs at once (its `ready` message; Infinity when its handler sets no bound). */
  capacity = Number.POSITIVE_INFINITY;

  #state: WorkerState = 'starting';
  #child: WorkerConnection;
  #options: WorkerHandleOptions;
  #log: Logger;
  #batches: WorkerBatches;
  #started: { resolve: () => void; reject: (err: ServeError) => void } | undefined;
  #startTimer: NodeJS.Timeout | undefined;
  #expectedExit = false;
  #exitReason = '';
  /** What in-flight jobs fail with when we killed the worker on purpose (e.g. REQUEST_TIMEOUT). */
  #killError: ServeError | undefined;
  /** Last sign of progress (`performance.now()`): a heartbeat, an item, a finished batch, or work arriving idle. */
  #progressAt = 0;
  #watchdog: NodeJS.Timeout | undefined;
  /** The engine's rows generating at its last heartbeat (0 for handlers without steps). */
  liveRows = 0;
  #exited: Promise<void>;

  constructor(options: WorkerHandleOptions) {
    this.id = options.id;
    this.#options = options;
    this.#log = options.log.child({ workerId: options.id });
    this.#batches = new WorkerBatches(this.#log, (message) => this.#post(message));
    this.startTime = new Date().toISOString();
    this.#child = options.spawn(options.id);
    this.#exited = new Promise<void>((resolve) =>
      this.#child.onExit(
        (code, signal, err) => {
          this.#onExit(code, signal, err);
          resolve();
        },
        (err) => this.#log.error({ err }, 'worker process error'),
      ),
    );
    this.#child.onMessage((message) => this.#onMessage(message));
  }

  get state(): WorkerState {
    return this.#state;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Jobs sent and not answered. */
  get inFlightJobs(): number {
    return this.#batches.jobCount;
  }

  /** Of those, the bulk ones (job.ts BULK_REQUEST_JOBS). */
  get bulkInFlightJobs(): number {
    return this.#batches.bulkJobCount;
  }

  /** Resident memory of the process in bytes (Linux /proc), 0 when unknown. */
  memoryUsage(): number {
    const pid = this.#child.pid;
    if (pid === undefined || this.#state === 'dead') return 0;
    try {
      const pages = Number(readFileSync(`/proc/${pid}/statm`, 'utf8').split(' ')[1]);
      return Number.isFinite(pages) ? pages * 4096 : 0;
    } catch {
      return 0;
    }
  }

  /** Send `init` and resolve once the worker is ready. @throws ServeError WORKER_START_FAILED */
  start(): Promise<void> {
    const promise = new Promise<void>((resolve, reject) => (this.#started = { resolve, reject }));
    this.#startTimer = setTimeout(() => {
      this.#fail(`did not load within ${this.#options.startupTimeoutMs} ms`);
      this.kill('startup timeout');
    }, this.#options.startupTimeoutMs);
    const init: InitMessage = { type: 'init', workerId: this.id, ...this.#options.init };
    if (!this.#post(init)) this.#fail('could not be reached over IPC');
    return promise;
  }

  /**
   * Send several batches (one per model and pass, worker-pool.ts) as one `round` message, so the worker hands them
   * all to its handler in the same tick. All or nothing: false when the worker cannot take them; the caller puts
   * every job back.
   */
  sendRound(batches: readonly OutgoingBatch[]): boolean {
    if (this.#state !== 'ready' || batches.length === 0 || batches.some((b) => b.jobs.length === 0)) return false;
    const idle = this.#batches.jobCount === 0;
    if (!this.#batches.send(batches, this)) return false;
    if (idle) this.#progressAt = performance.now();
    this.#armWatchdog();
    return true;
  }

  jobAbandoned(job: Job, reason: AbandonReason): void {
    if (this.#state !== 'dead') this.#batches.cancel(job, reason);
  }

  /** Check for a stall when one could next be due; nothing is armed while the worker holds no job. */
  #armWatchdog(): void {
    if (this.#watchdog !== undefined || this.#batches.jobCount === 0 || this.#state === 'dead') return;
    const dueMs = this.#progressAt + this.#batches.longestResponseTimeoutMs - performance.now();
    this.#watchdog = setTimeout(() => this.#checkStall(), Math.max(0, dueMs) + 1);
    this.#watchdog.unref();
  }

  #checkStall(): void {
    this.#watchdog = undefined;
    if (this.#batches.jobCount === 0 || this.#state === 'dead') return;
    const stallMs = this.#batches.longestResponseTimeoutMs;
    const quietMs = performance.now() - this.#progressAt;
    if (quietMs < stallMs) return this.#armWatchdog();
    this.#log.warn(
      { stuckJobs: this.#batches.jobCount, quietMs: Math.round(quietMs), stallMs },
      'worker holds jobs and made no progress for the response timeout; recycling it',
    );
    this.kill(
      'no progress',
      new ServeError(
        'REQUEST_TIMEOUT',
        `Request timed out: its worker made no progress for ${stallMs} ms and was recycled.`,
      ),
    );
  }

  /**
   * End the process now (SIGKILL). Its in-flight jobs fail with `failJobsWith` (default WORKER_DIED). Idempotent:
   * the first call's reason and error stand.
   */
  kill(reason: string, failJobsWith?: ServeError): void {
    if (this.#state === 'dead') return;
    this.#exitReason ||= reason;
    this.#killError ??= failJobsWith;
    this.#child.kill();
  }

  /** Let in-flight batches finish, then end the process; SIGKILL after the grace period. Idempotent. */
  stop(): Promise<void> {
    if (this.#state === 'dead') return this.#exited;
    this.#expectedExit = true;
    if (this.#state === 'starting') {
      this.kill('stopped while loading');
      return this.#exited;
    }
    if (this.#state === 'ready') {
      this.#setState('stopping', 'stop requested');
      this.#post({ type: 'shutdown' });
      const timer = setTimeout(() => this.kill('did not stop in time'), this.#options.stopTimeoutMs);
      void this.#exited.finally(() => clearTimeout(timer));
    }
    return this.#exited;
  }

  #post(message: ToWorker): boolean {
    if (!this.#child.connected) return false;
    try {
      this.#child.send(message);
      return true;
    } catch (err) {
      this.#log.warn({ err }, 'IPC send failed');
      return false;
    }
  }

  #onMessage(message: FromWorker): void {
    switch (message.type) {
      case 'ready': {
        if (this.#state !== 'starting') return;
        clearTimeout(this.#startTimer);
        this.device = message.device;
        this.languages = message.languages;
        this.dtype = message.dtype;
        this.model = message.model;
        this.capacity = message.capacity ?? Number.POSITIVE_INFINITY;
        this.#setState('ready', `loaded in ${Math.round(message.loadMs)} ms on ${deviceLabel(message.device)}`);
        this.#started?.resolve();
        return;
      }
      case 'init-failed':
        this.#fail(message.error.message);
        return;
      case 'progress':
        this.#progressAt = performance.now();
        this.liveRows = message.liveRows;
        return;
      case 'item':
        this.#progressAt = performance.now();
        this.#batches.answer(message, (value) => ({ value, workerId: this.id, device: this.device! }));
        return;
      case 'batch-done': {
        this.#progressAt = performance.now();
        const report = this.#batches.finish(message);
        if (report !== undefined) this.#options.events.batchDone(this, report);
        return;
      }
    }
  }

  /** The load failed: reject `start()` (the process is ended by the caller or exits by itself). */
  #fail(reason: string): void {
    if (this.#state !== 'starting') return;
    clearTimeout(this.#startTimer);
    this.#exitReason ||= `load failed: ${reason}`;
    this.#started?.reject(new ServeError('WORKER_START_FAILED', `Worker ${this.id} failed to load: ${reason}`));
  }

  #onExit(code: number | null, signal: NodeJS.Signals | null, err?: Error): void {
    const how = err ? `spawn failed (${err.message})` : signal ? `killed by ${signal}` : `exited with code ${code}`;
    const reason = this.#exitReason ? `${this.#exitReason}; ${how}` : how;
    this.#fail(`process ${how} before it was ready`);
    this.#batches.failAll(this.#killError ?? new ServeError('WORKER_DIED'));
    clearTimeout(this.#watchdog);
    this.liveRows = 0;
    this.#setState('dead', reason);
    this.#options.events.exited(this, { expected: this.#expectedExit, reason });
  }

  #setState(next: WorkerState, reason: string): void {
    const previous = this.#state;
    this.#state = next;
    const level = next === 'dead' && !this.#expectedExit ? 'warn' : 'info';
    this.#log[level]({ from: previous, to: next, pid: this.#child.pid, reason }, `worker ${previous} → ${next}`);
  }
}
