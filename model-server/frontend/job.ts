/**
 * @module model-server/frontend/job — one unit of inference work: one input of one request, answered exactly once.
 *
 * A job knows nothing about HTTP. It is created by the inference API, waits in its model's `BatchQueue`, travels
 * to a worker inside a batch, and is settled exactly once: with the handler's value, with the handler's per-item
 * error, or by the frontend (queue full is refused before a job exists; timeout, worker death, shutdown settle
 * it here). Whoever holds the job when its deadline passes is told through its `JobHolder`, so a queued job
 * leaves its queue and a worker that overran the deadline is recycled (TorchServe's behaviour).
 */
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo } from '../protocol.js';

/** Where a job's answer came from; the inference API turns it into `x-worker-id` / `x-device` headers. */
export interface JobResult {
  value: unknown;
  workerId: string;
  device: DeviceInfo;
}

/** The current owner of a job (its queue, then its worker); told when the job's deadline passes. */
export interface JobHolder {
  jobExpired(job: Job): void;
}

export interface JobOptions {
  id: string;
  /** Registered model (language) name and version. */
  model: string;
  version: string;
  /** The decoded request body the handler receives. */
  body: unknown;
  /** Time from arrival after which the job is answered 504 REQUEST_TIMEOUT. */
  responseTimeoutMs: number;
}

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
  readonly body: unknown;
  /** `performance.now()` at arrival, ms. The batch window is measured from here (not from dequeue). */
  readonly arrivedAt: number;
  /** `performance.now()` when it left the queue inside a batch, ms; undefined while queued. */
  dispatchedAt: number | undefined;
  /** `performance.now()` when it was settled, ms. */
  settledAt: number | undefined;
  /** The outcome's error code when it failed (for metrics), undefined on success or while pending. */
  failure: ServeError | undefined;
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
    this.arrivedAt = performance.now();
    this.promise = new Promise<JobResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // The HTTP side always awaits the promise; this only keeps a job nobody awaits (a test, a shutdown
    // race) from becoming an unhandled rejection.
    this.promise.catch(() => undefined);
    this.#timer = setTimeout(() => this.#expire(), options.responseTimeoutMs);
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

  #expire(): void {
    const holder = this.#holder;
    if (!this.reject(new ServeError('REQUEST_TIMEOUT'))) return;
    // Told after settling, so the holder sees a settled job and only cleans up (removes it, recycles a worker).
    holder?.jobExpired(this);
  }
}
