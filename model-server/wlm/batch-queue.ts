/**
 * @module model-server/wlm/batch-queue — one model's bounded queue of waiting jobs (TorchServe's job queue,
 * `job_queue_size`), fair between requests.
 *
 * A request's jobs (the strings of an array, the sentences of a document) form one *group*. Jobs leave in rounds:
 * one from each waiting group in turn, each group in its own order. So a single sentence that arrives behind a
 * 500-sentence document leaves with the document's next job, not after all of them, while a queue of one-job
 * requests stays plain FIFO. (Deficit round robin with a quantum of one job, per request.)
 *
 *     groups   D: d1 d2 d3 d4 …    s: s1    t: t1          take(4) → d1 s1 t1 d2
 *
 * Invariants (all mutation happens on the event loop, through the methods below):
 * - `enqueue` never blocks: it accepts every job of a request or none of them (QUEUE_FULL, 503 + Retry-After).
 * - `size` counts unsettled jobs only: a job abandoned while queued (deadline, client gone) stops counting at once
 *   through its `jobAbandoned` callback, and is skipped (and dropped) when its turn comes.
 * - `putBack` (a worker died before it received these jobs) returns jobs to the FRONT of their groups, and those
 *   groups to the front of the rotation, and may exceed the capacity: those jobs were already accepted, and an
 *   accepted job is never refused later.
 */
import { ServeError } from '../../common/errors.js';
import type { Job, JobHolder } from './job.js';

/** A group's waiting jobs: an array read from `head`, so taking from the front costs nothing. */
interface Group {
  jobs: Job[];
  head: number;
}

export class BatchQueue implements JobHolder {
  readonly capacity: number;
  /** Groups in rotation order: the next `take` starts with the first. Insertion-ordered Map, so rotation is O(1). */
  #groups = new Map<unknown, Group>();
  #size = 0;
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

  /** Unsettled jobs waiting. */
  get size(): number {
    return this.#size;
  }

  /** Requests with jobs waiting: how many jobs leave before a newly arrived request's first one. */
  get groups(): number {
    return this.#groups.size;
  }

  get remainingCapacity(): number {
    return Math.max(0, this.capacity - this.#size);
  }

  /** The waiting job that arrived first, if any. */
  oldest(): Job | undefined {
    let oldest: Job | undefined;
    for (const group of this.#groups.values()) {
      const head = this.#head(group);
      if (head !== undefined && (oldest === undefined || head.arrivedAt < oldest.arrivedAt)) oldest = head;
    }
    return oldest;
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
      let group = this.#groups.get(job.group);
      if (group === undefined) this.#groups.set(job.group, (group = { jobs: [], head: 0 }));
      group.jobs.push(job);
      job.holdBy(this);
    }
    this.#size += jobs.length;
  }

  /** Whether an interactive (not bulk) job waits. */
  get interactiveWaiting(): boolean {
    for (const group of this.#groups.values()) {
      const head = this.#head(group);
      if (head !== undefined && !head.bulk) return true;
    }
    return false;
  }

  /**
   * Remove and return up to `max` jobs: one from each group in turn (module doc); with `interactiveOnly`, bulk
   * groups are passed over and keep their place.
   */
  take(max: number, interactiveOnly = false): Job[] {
    const out: Job[] = [];
    while (out.length < max && this.#groups.size > 0) {
      let took = false;
      for (const [key, group] of this.#groups) {
        if (out.length >= max) break;
        const job = this.#head(group);
        if (interactiveOnly && job?.bulk) continue;
        took = true;
        // Rotate: this group goes to the back whether it gave a job or is now empty (then it leaves).
        this.#groups.delete(key);
        if (job === undefined) continue;
        group.head += 1;
        this.#size -= 1;
        job.holdBy(undefined);
        out.push(job);
        if (this.#head(group) !== undefined) this.#groups.set(key, group);
      }
      if (!took) break;
    }
    return out;
  }

  /** Return jobs that were taken but never reached a worker, ahead of everything waiting, in their order. */
  putBack(jobs: readonly Job[]): void {
    const live = jobs.filter((job) => !job.settled);
    if (live.length === 0) return;
    const returned = new Map<unknown, Job[]>();
    for (const job of live) {
      const list = returned.get(job.group) ?? [];
      list.push(job);
      returned.set(job.group, list);
      job.dispatchedAt = undefined;
      job.holdBy(this);
    }
    const rest = this.#groups;
    this.#groups = new Map();
    for (const [key, list] of returned) {
      const group = rest.get(key);
      const waiting = group ? group.jobs.slice(group.head) : [];
      this.#groups.set(key, { jobs: [...list, ...waiting], head: 0 });
      rest.delete(key);
    }
    for (const [key, group] of rest) this.#groups.set(key, group);
    this.#size += live.length;
  }

  /** Fail every waiting job with `err` (unregister without workers, shutdown past its grace). */
  failAll(err: ServeError): number {
    const jobs = this.take(this.#size);
    for (const job of jobs) job.reject(err);
    return jobs.length;
  }

  jobAbandoned(job: Job): void {
    const group = this.#groups.get(job.group);
    if (group === undefined || !group.jobs.includes(job, group.head)) return;
    this.#size -= 1;
    if (this.#head(group) === undefined) this.#groups.delete(job.group);
    this.#onLeft?.();
  }

  /** The group's first unsettled job, dropping settled ones (abandoned while waiting) from its front. */
  #head(group: Group): Job | undefined {
    while (group.head < group.jobs.length && group.jobs[group.head]!.settled) group.head += 1;
    if (group.head > 64 && group.head * 2 > group.jobs.length) {
      group.jobs = group.jobs.slice(group.head);
      group.head = 0;
    }
    return group.jobs[group.head];
  }
}
