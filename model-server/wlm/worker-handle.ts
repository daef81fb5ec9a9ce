/**
 * @module model-server/wlm/worker-handle — one worker process seen from the frontend: spawn it, load it,
 * send it batches, match its per-item replies to jobs, and end it (gracefully or not).
 *
 * State (one union, changed only in `#setState`, which logs every transition):
 *
 *     starting ──ready──▶ ready ──stop()──▶ stopping ──exit──▶ dead
 *         │                 │                                   ▲
 *         └──init-failed / exit / startup timeout / kill()──────┘
 *
 * Invariants:
 * - Every job sent to this worker is settled exactly once: by its `item` reply, by `batch-done` when the worker
 *   skipped it (a lying worker: INTERNAL), or by the process exit (WORKER_DIED). Replies for jobs already settled
 *   (timed out) are ignored.
 * - A job abandoned while on this worker (its response timeout passed, or its client went away) is answered by
 *   the job itself; the worker is sent a `cancel` for it (coalesced per event-loop turn), drops its rows at the
 *   next step and still answers the id once, which is when the job stops counting against the worker's room. If
 *   its rows finished before the cancel arrived, that answer is ok: it is counted (BatchReport.finishedAfterAbandon),
 *   not delivered.
 * - A worker is recycled (SIGKILL) only when it is *stuck*: it holds jobs and has shown no progress (a `progress`
 *   heartbeat, an answered item, a finished batch) for `stallTimeoutMs`, the longest response timeout of its
 *   models. Its jobs then fail 504 REQUEST_TIMEOUT, not "Worker died." (it did not crash; they were stuck behind
 *   it). We do not retry them (see docs/model-server.md: a poison input would hang worker after worker). A slow
 *   job never recycles a worker that keeps stepping. A worker that exits by itself fails its jobs with WORKER_DIED.
 */
import type { ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type {
  BatchMessage,
  DeviceInfo,
  DeviceRequest,
  FromWorker,
  InitMessage,
  StepCounters,
  ToWorker,
} from '../protocol.js';
import type { AbandonReason, Job, JobHolder } from './job.js';

export type WorkerState = 'starting' | 'ready' | 'stopping' | 'dead';

/** The engine a worker is spawned for: its key (EngineSpec) and the models attached to it then (`name@version`). */
export interface SpawnedEngine {
  key: string;
  models: readonly string[];
}

/**
 * Starts one worker process; tests inject factories whose workers crash, hang or lie, choosing by `engine` which
 * workers misbehave.
 */
export type WorkerSpawner = (workerId: string, engine: SpawnedEngine) => ChildProcess;

/** What the pool learns about a finished batch (for metrics and to free the slot). */
export interface BatchReport {
  model: string;
  version: string;
  size: number;
  /** Handler time reported by the worker, ms. */
  handlerMs: number;
  /** Decoder runs and their rows on this worker since its previous report (0 for handlers without steps). */
  stepRuns: number;
  stepRows: number;
  /** Rows cancelled, stopped at their token cap, and failed alone, since the previous report. */
  cancelledRows: number;
  cappedRows: number;
  failedRows: number;
  /**
   * Jobs of this batch answered ok by the worker after they were abandoned: their rows finished before the cancel
   * reached the engine, so they are neither answered ok nor among the cancelled rows.
   */
  finishedAfterAbandon: number;
}

/** One model's batch for `sendRound`. */
export interface OutgoingBatch {
  jobs: readonly Job[];
  model: string;
  version: string;
}

export interface WorkerEvents {
  /** A batch finished (its slot is free). */
  batchDone(worker: WorkerHandle, report: BatchReport): void;
  /** The process is gone. `expected` when we asked it to stop. */
  exited(worker: WorkerHandle, info: { expected: boolean; wasReady: boolean; reason: string }): void;
}

export interface WorkerHandleOptions {
  id: string;
  /** The `init` message minus its type and id. */
  init: Omit<InitMessage, 'type' | 'workerId'>;
  /** Starts the process (the pool's spawner, bound to its engine). */
  spawn: (workerId: string) => ChildProcess;
  log: Logger;
  /** Longest a load may take before the worker is killed, ms. */
  startupTimeoutMs: number;
  /** Grace between `shutdown` and SIGKILL, ms. */
  stopTimeoutMs: number;
  /** A worker holding jobs with no progress for this long is stuck and recycled, ms (read at each check). */
  stallTimeoutMs: () => number;
  events: WorkerEvents;
}

interface InFlightBatch {
  model: string;
  version: string;
  size: number;
  /** Jobs of this batch not answered yet, by id. */
  jobs: Map<string, Job>;
  /** BatchReport.finishedAfterAbandon so far. */
  finishedAfterAbandon: number;
}

let nextBatchId = 0;

export class WorkerHandle implements JobHolder {
  readonly id: string;
  /** ISO time the process was spawned (TorchServe's `startTime`). */
  readonly startTime: string;
  /** Where the worker says it runs; undefined until `ready`. */
  device: DeviceInfo | undefined;
  languages: string[] | undefined;
  /** The weights' type the worker loaded (its `ready` message); undefined for handlers without weights. */
  dtype: string | undefined;
  /** Most jobs the worker runs at once (its `ready` message; Infinity when its handler sets no bound). */
  capacity = Number.POSITIVE_INFINITY;

  #state: WorkerState = 'starting';
  #child: ChildProcess;
  #options: WorkerHandleOptions;
  #log: Logger;
  #batches = new Map<number, InFlightBatch>();
  /** The worker's step counters at its last report (cumulative since it loaded). */
  #steps: Required<StepCounters> = { runs: 0, rows: 0, cancelledRows: 0, cappedRows: 0, failedRows: 0 };
  /** Job id → batch id, for every unanswered job on this worker. */
  #jobBatch = new Map<string, number>();
  #started: { resolve: () => void; reject: (err: ServeError) => void } | undefined;
  #startTimer: NodeJS.Timeout | undefined;
  #expectedExit = false;
  #wasReady = false;
  #exitReason = '';
  /** What in-flight jobs fail with when we killed the worker on purpose (e.g. REQUEST_TIMEOUT). */
  #killError: ServeError | undefined;
  /** Last sign of progress (`performance.now()`): a heartbeat, an item, a finished batch, or work arriving idle. */
  #progressAt = 0;
  #watchdog: NodeJS.Timeout | undefined;
  /** Cancels gathered in this event-loop turn, sent as one message per reason. */
  #cancels = { deadline: [] as string[], 'client-gone': [] as string[] };
  #cancelFlush: NodeJS.Immediate | undefined;
  /** Bulk jobs among those in `#jobBatch`. */
  #bulkHeld = 0;
  /** The engine's rows generating at its last heartbeat (0 for handlers without steps). */
  liveRows = 0;
  #exited: Promise<void>;

  constructor(options: WorkerHandleOptions) {
    this.id = options.id;
    this.#options = options;
    this.#log = options.log.child({ workerId: options.id });
    this.startTime = new Date().toISOString();
    this.#child = options.spawn(options.id);
    this.#exited = new Promise<void>((resolve) => {
      let done = false;
      const onGone = (code: number | null, signal: NodeJS.Signals | null, err?: Error) => {
        if (done) return;
        done = true;
        this.#onExit(code, signal, err);
        resolve();
      };
      this.#child.once('exit', (code, signal) => onGone(code, signal));
      // A spawn failure may emit 'error' without 'exit'.
      this.#child.once('error', (err) => {
        if (this.#child.pid === undefined || this.#child.exitCode !== null) onGone(null, null, err);
        else this.#log.error({ err }, 'worker process error');
      });
    });
    this.#child.on('message', (message: FromWorker) => this.#onMessage(message));
  }

  get state(): WorkerState {
    return this.#state;
  }

  get pid(): number | undefined {
    return this.#child.pid;
  }

  /** Jobs sent and not answered. */
  get inFlightJobs(): number {
    return this.#jobBatch.size;
  }

  /** Of those, the bulk ones (job.ts BULK_REQUEST_JOBS). */
  get bulkInFlightJobs(): number {
    return this.#bulkHeld;
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
    const messages = batches.map((b) => this.#batchMessage(b.jobs, b.model));
    if (!this.#post(messages.length === 1 ? messages[0]! : { type: 'round', batches: messages })) return false;
    batches.forEach((b, i) => this.#record(messages[i]!.batchId, b.jobs, b.model, b.version));
    return true;
  }

  #batchMessage(jobs: readonly Job[], model: string): BatchMessage {
    const items = jobs.map((job) => ({ id: job.id, model, body: job.body, ...(job.bulk ? { bulk: true } : {}) }));
    return { type: 'batch', batchId: ++nextBatchId, items };
  }

  /** The batch is on its way: its jobs are held by this worker until answered. */
  #record(batchId: number, jobs: readonly Job[], model: string, version: string): void {
    if (this.#jobBatch.size === 0) this.#progressAt = performance.now();
    const record: InFlightBatch = { model, version, size: jobs.length, jobs: new Map(), finishedAfterAbandon: 0 };
    for (const job of jobs) {
      record.jobs.set(job.id, job);
      this.#jobBatch.set(job.id, batchId);
      if (job.bulk) this.#bulkHeld += 1;
      job.holdBy(this);
    }
    this.#batches.set(batchId, record);
    this.#armWatchdog();
  }

  jobAbandoned(job: Job, reason: AbandonReason): void {
    if (!this.#jobBatch.has(job.id) || this.#state === 'dead') return;
    this.#cancels[reason].push(job.id);
    this.#cancelFlush ??= setImmediate(() => {
      this.#cancelFlush = undefined;
      for (const why of ['deadline', 'client-gone'] as const) {
        const ids = this.#cancels[why];
        if (ids.length === 0) continue;
        this.#cancels[why] = [];
        this.#post({ type: 'cancel', ids, reason: why });
      }
    });
  }

  /** Check for a stall when one could next be due; nothing is armed while the worker holds no job. */
  #armWatchdog(): void {
    if (this.#watchdog !== undefined || this.#jobBatch.size === 0 || this.#state === 'dead') return;
    const dueMs = this.#progressAt + this.#options.stallTimeoutMs() - performance.now();
    this.#watchdog = setTimeout(() => this.#checkStall(), Math.max(0, dueMs) + 1);
    this.#watchdog.unref();
  }

  #checkStall(): void {
    this.#watchdog = undefined;
    if (this.#jobBatch.size === 0 || this.#state === 'dead') return;
    const stallMs = this.#options.stallTimeoutMs();
    const quietMs = performance.now() - this.#progressAt;
    if (quietMs < stallMs) return this.#armWatchdog();
    this.#log.warn(
      { stuckJobs: this.#jobBatch.size, quietMs: Math.round(quietMs), stallMs },
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
    this.#child.kill('SIGKILL');
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
        this.capacity = message.capacity ?? Number.POSITIVE_INFINITY;
        this.#wasReady = true;
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
      case 'item': {
        this.#progressAt = performance.now();
        const batchId = this.#jobBatch.get(message.id);
        if (batchId === undefined) return; // settled already (timed out) or not ours
        this.#jobBatch.delete(message.id);
        const record = this.#batches.get(batchId);
        const job = record?.jobs.get(message.id);
        record?.jobs.delete(message.id);
        if (record === undefined || job === undefined) return;
        if (job.bulk) this.#bulkHeld -= 1;
        if (message.outcome.ok) {
          const answered = job.resolve({ value: message.outcome.value, workerId: this.id, device: this.device! });
          // Abandoned while its rows ran, and they finished before the cancel reached the engine.
          if (!answered && job.abandoned !== undefined) record.finishedAfterAbandon += 1;
        } else {
          job.reject(ServeError.fromWire(message.outcome.error));
        }
        return;
      }
      case 'batch-done': {
        this.#progressAt = performance.now();
        const record = this.#batches.get(message.batchId);
        if (record === undefined) return;
        this.#batches.delete(message.batchId);
        if (record.jobs.size > 0) {
          this.#log.error({ batchId: message.batchId, missing: record.jobs.size }, 'worker skipped items of a batch');
          for (const job of record.jobs.values()) {
            this.#jobBatch.delete(job.id);
            if (job.bulk) this.#bulkHeld -= 1;
            job.reject(new ServeError('INTERNAL', 'Worker did not answer every item of its batch.'));
          }
        }
        const steps: Required<StepCounters> = { ...this.#steps, ...message.steps };
        const delta = (key: keyof StepCounters) => steps[key] - this.#steps[key];
        const [stepRuns, stepRows] = [delta('runs'), delta('rows')];
        const [cancelledRows, cappedRows, failedRows] = [
          delta('cancelledRows'),
          delta('cappedRows'),
          delta('failedRows'),
        ];
        this.#steps = steps;
        this.#options.events.batchDone(this, {
          model: record.model,
          version: record.version,
          size: record.size,
          handlerMs: message.handlerMs,
          stepRuns,
          stepRows,
          cancelledRows,
          cappedRows,
          failedRows,
          finishedAfterAbandon: record.finishedAfterAbandon,
        });
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
    const died = this.#killError ?? new ServeError('WORKER_DIED');
    for (const record of this.#batches.values()) for (const job of record.jobs.values()) job.reject(died);
    this.#batches.clear();
    this.#jobBatch.clear();
    this.#bulkHeld = 0;
    clearTimeout(this.#watchdog);
    if (this.#cancelFlush !== undefined) clearImmediate(this.#cancelFlush);
    this.liveRows = 0;
    this.#setState('dead', reason);
    this.#options.events.exited(this, { expected: this.#expectedExit, wasReady: this.#wasReady, reason });
  }

  #setState(next: WorkerState, reason: string): void {
    const previous = this.#state;
    this.#state = next;
    const level = next === 'dead' && !this.#expectedExit ? 'warn' : 'info';
    this.#log[level]({ from: previous, to: next, pid: this.#child.pid, reason }, `worker ${previous} → ${next}`);
  }
}

/** `cuda:0` or `cpu`, as in the `x-device` header. */
/** `cpu`, `cuda:0`, `webgpu:0`, `webgpu:0 (software)` (a software adapter, allowed explicitly). */
export function deviceLabel(device: DeviceInfo | DeviceRequest): string {
  if (device.kind === 'cpu') return 'cpu';
  return `${device.kind}:${device.id}${'software' in device && device.software === true ? ' (software)' : ''}`;
}
