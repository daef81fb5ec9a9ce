/**
 * @module model-server/wlm/job — one unit of inference work: one input of one request, answered exactly once.
 *
 * A job knows nothing about HTTP. It is created by the inference API, waits in its model's `BatchQueue`, travels
 * to a worker inside a batch, and is settled exactly once: with the handler's value, with the handler's per-item
 * error, or by the frontend (refusals happen before a job exists; timeout, cancellation, worker death and shutdown
 * settle it here).
 *
 * Deadlines follow TorchServe's `response_timeout`, which bounds inference time: the clock starts when the job
 * reaches a worker, and a job still running when it runs out is answered 504 and *cancelled* — its rows leave the
 * engine batch at the next step while the worker goes on with everyone else's. Time in the queue is governed by
 * admission (batcher.ts refuses what would wait past its budget); a job that somehow still waits a whole response
 * timeout in the queue is answered 504 too, so no job is ever left waiting without bound.
 *
 * Whoever holds the job when it is abandoned (deadline, or its client went away) is told through its `JobHolder`,
 * after the job is settled: a queue drops it, a worker is asked to stop its rows.
 */
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo, ItemBody } from '../protocol.js';

/** Where a job's answer came from; the inference API turns it into `x-worker-id` / `x-device` headers. */
export interface JobResult {
  value: unknown;
  workerId: string;
  device: DeviceInfo;
}

/** Why a job was given up before its answer: its deadline passed, or its client went away. */
export type AbandonReason = 'deadline' | 'client-gone';

/** The current owner of a job (its queue, then its worker); told when the job is abandoned. */
export interface JobHolder {
  jobAbandoned(job: Job, reason: AbandonReason): void;
}

export interface JobOptions {
  id: string;
  /** Registered model (language) name and version. */
  model: string;
  version: string;
  /** What the handler receives (protocol.ts). */
  body: ItemBody;
  /**
   * The request the job belongs to: a model's queue takes one job per group in turn (batch-queue.ts), so a
   * request's many jobs do not hold back the requests behind it. Default: a group of its own.
   */
  group?: unknown;
  /** Part of a large request (more than BULK_REQUEST_JOBS jobs): scheduled as bulk work. Default false. */
  bulk?: boolean;
  /** `response_timeout`: longest the job may run on a worker (and, as a backstop, wait in the queue), ms. */
  responseTimeoutMs: number;
}

/**
 * Requests with more jobs than this (a document of more than a few paragraphs, a big array) are bulk work: the
 * engine gives them a bounded share of its time while interactive rows generate (engine/loop/generate.ts), and a worker
 * keeps room for interactive jobs beyond its cap (worker-pool.ts). A paragraph or a short list stays interactive.
 */
export const BULK_REQUEST_JOBS = 16;

let nextSerial = 0;

/** A process-unique job id; replies from workers are matched by it. */
export function newJobId(): string {
  nextSerial = (nextSerial + 1) % Number.MAX_SAFE_INTEGER;
  return `j${nextSerial.toString(36)}`;
}

export class Job {
  readonly id: string;
  readonly model: string;
  readonly version: string;
  readonly body: ItemBody;
  /** The request it belongs to (JobOptions.group). */
  readonly group: unknown;
  /** JobOptions.bulk. */
  readonly bulk: boolean;
  readonly responseTimeoutMs: number;
  /** `performance.now()` at arrival, ms. The batch window is measured from here (not from dequeue). */
  readonly arrivedAt: number;
  /** `performance.now()` when it left the queue inside a batch, ms; undefined while queued. */
  dispatchedAt: number | undefined;
  /** `performance.now()` when it was settled, ms. */
  settledAt: number | undefined;
  /** The outcome's error code when it failed (for metrics), undefined on success or while pending. */
  failure: ServeError | undefined;
  /** Why it was abandoned, and where it was then (for metrics); undefined unless abandoned. */
  abandoned: { reason: AbandonReason; running: boolean } | undefined;
  /** Resolves with the result or rejects with a ServeError; exactly once. */
  readonly promise: Promise<JobResult>;

  #resolve!: (result: JobResult) => void;
  #reject!: (err: ServeError) => void;
  #timer: NodeJS.Timeout;
  #holder: JobHolder | undefined;

  constructor(options: JobOptions) {
    this.id = options.id;
    this.model = options.model;
    this.version = options.version;
    this.body = options.body;
    this.responseTimeoutMs = options.responseTimeoutMs;
    this.group = options.group ?? this;
    this.bulk = options.bulk === true;
    this.arrivedAt = performance.now();
    this.promise = new Promise<JobResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // The HTTP side always awaits the promise; this only keeps a job nobody awaits (a test, a shutdown
    // race) from becoming an unhandled rejection.
    this.promise.catch(() => undefined);
    this.#timer = setTimeout(() => this.abandon('deadline'), options.responseTimeoutMs);
  }

  /**
   * Whether it was handed to a worker: set when it leaves its queue in a batch, cleared only when that batch is
   * handed back unsent (batch-queue.ts `putBack`), so a settled job keeps it.
   */
  get reachedWorker(): boolean {
    return this.dispatchedAt !== undefined;
  }

  get settled(): boolean {
    return this.settledAt !== undefined;
  }

  /** Ms spent queued (so far, if still queued). */
  queueMs(now = performance.now()): number {
    return (this.dispatchedAt ?? now) - this.arrivedAt;
  }

  /** Hand the job to a new holder (queue → worker → back to a queue). */
  holdBy(holder: JobHolder | undefined): void {
    this.#holder = holder;
  }

  /** The job left its queue for a worker at `now`: its response timeout counts from here. */
  dispatched(now: number): void {
    this.dispatchedAt = now;
    if (this.settled) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(
      () => this.abandon('deadline'),
      Math.max(0, now + this.responseTimeoutMs - performance.now()),
    );
  }

  /**
   * Give the job up: answer it 504 (deadline) or 499 (client gone) and tell its holder, which drops it from its
   * queue or cancels its rows on the worker. Returns false (and does nothing) when the job was already settled.
   */
  abandon(reason: AbandonReason): boolean {
    const holder = this.#holder;
    const running = this.dispatchedAt !== undefined;
    const error =
      reason === 'client-gone'
        ? new ServeError('CLIENT_CLOSED')
        : new ServeError(
            'REQUEST_TIMEOUT',
            running
              ? `Request timed out: inference took longer than the response timeout (${this.responseTimeoutMs} ms); its work was cancelled.`
              : `Request timed out: it waited the whole response timeout (${this.responseTimeoutMs} ms) in the queue.`,
          );
    if (!this.reject(error)) return false;
    this.abandoned = { reason, running };
    // Told after settling, so the holder sees a settled job and only cleans up.
    holder?.jobAbandoned(this, reason);
    return true;
  }

  /** Answer with a value. Returns false (and does nothing) when the job was already settled. */
  resolve(result: JobResult): boolean {
    if (!this.#settle()) return false;
    this.#resolve(result);
    return true;
  }

  /** Fail with a catalogued error. Returns false (and does nothing) when the job was already settled. */
  reject(err: ServeError): boolean {
    if (!this.#settle()) return false;
    this.failure = err;
    this.#reject(err);
    return true;
  }

  #settle(): boolean {
    if (this.settledAt !== undefined) return false;
    this.settledAt = performance.now();
    clearTimeout(this.#timer);
    this.#holder = undefined;
    return true;
  }
}
