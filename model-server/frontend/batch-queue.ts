/**
 * @module model-server/frontend/batch-queue — one model's bounded FIFO of waiting jobs (TorchServe's job queue,
 * `job_queue_size`).
 *
 * Invariants (all mutation happens on the event loop, through the methods below):
 * - `enqueue` never blocks: it accepts every job of a request or none of them (QUEUE_FULL, 503 + Retry-After).
 * - Only unsettled jobs are counted: a job abandoned while queued (deadline, client gone) is removed by its
 *   `jobAbandoned` callback.
 * - `putBack` (a worker died before it received these jobs) returns jobs to the FRONT in their old order and may
 *   exceed the capacity: those jobs were already accepted, and an accepted job is never refused later.
 */
import { ServeError } from '../../common/errors.js';
import type { Job, JobHolder } from './job.js';

export class BatchQueue implements JobHolder {
  readonly capacity: number;
  /** Insertion-ordered: iteration is FIFO, deletion of an expired job from the middle is O(1). */
  #jobs = new Set<Job>();
  #onLeft: (() => void) | undefined;

  /**
   * @param capacity most jobs waiting at once (`job_queue_size`, the seed's 4096).
   * @param onLeft told after a waiting job was abandoned and left the queue.
   */
  constructor(capacity: number, onLeft?: () => void) {
    if (!Number.isInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be ≥ 1, got ${capacity}`);
    this.capacity = capacity;
    this.#onLeft = onLeft;
  }

  get size(): number {
    return this.#jobs.size;
  }

  get remainingCapacity(): number {
    return Math.max(0, this.capacity - this.#jobs.size);
  }

  /** The job that has waited longest, if any. */
  oldest(): Job | undefined {
    for (const job of this.#jobs) return job;
    return undefined;
  }

  /**
   * Accept all `jobs` or none.
   * @param retryAfterS the `Retry-After` hint given with QUEUE_FULL.
   * @throws ServeError PAYLOAD_TOO_LARGE when they could never fit (more jobs than the capacity: a retry cannot
   *   help, so this is no 503); QUEUE_FULL when they do not fit now.
   */
  enqueue(jobs: readonly Job[], retryAfterS = 1): void {
    if (jobs.length > this.capacity) {
      throw new ServeError(
        'PAYLOAD_TOO_LARGE',
        `Request has ${jobs.length} texts; the job queue of model ${jobs[0]!.model} holds at most ${this.capacity}: split it into smaller requests.`,
      );
    }
    if (jobs.length > this.remainingCapacity) {
      throw new ServeError(
        'QUEUE_FULL',
        `Job queue of model ${jobs[0]?.model ?? '?'} is full (${this.capacity} jobs), retry later.`,
        { retryAfterS },
      );
    }
    for (const job of jobs) {
      this.#jobs.add(job);
      job.holdBy(this);
    }
  }

  /** Remove and return up to `max` jobs, oldest first. */
  take(max: number): Job[] {
    const out: Job[] = [];
    for (const job of this.#jobs) {
      if (out.length >= max) break;
      this.#jobs.delete(job);
      job.holdBy(undefined);
      if (!job.settled) out.push(job);
    }
    return out;
  }

  /** Return jobs that were taken but never reached a worker, ahead of everything waiting, in their order. */
  putBack(jobs: readonly Job[]): void {
    const live = jobs.filter((job) => !job.settled);
    if (live.length === 0) return;
    const rest = this.#jobs;
    this.#jobs = new Set(live);
    for (const job of rest) this.#jobs.add(job);
    for (const job of live) {
      job.dispatchedAt = undefined;
      job.holdBy(this);
    }
  }

  /** Fail every waiting job with `err` (unregister without workers, shutdown past its grace). */
  failAll(err: ServeError): number {
    const jobs = this.take(this.#jobs.size);
    for (const job of jobs) job.reject(err);
    return jobs.length;
  }

  jobAbandoned(job: Job): void {
    if (this.#jobs.delete(job)) this.#onLeft?.();
  }
}
