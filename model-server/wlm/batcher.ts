/**
 * @module model-server/wlm/batcher — the batching policy of one model: when do its waiting jobs leave as a
 * batch, and how many. The worker pool asks (`nextBatch`) whenever a worker has room; the batcher answers
 * with a batch or arms one timer for the moment its oldest job falls due, then nudges the pool.
 *
 * Policies (config `BATCH_POLICY`):
 * - `torchserve`: a batch leaves when `batchSize` jobs wait, or when the OLDEST waiting job has waited
 *   `maxBatchDelayMs` since it ARRIVED (TorchServe measures from dequeue, pytorch/serve#2478; we bound the
 *   oldest job's wait instead). A backlog leaves at once as full batches; `batchSize` 1 never waits.
 * - `immediate` (default): a worker with room takes whatever waits, up to `batchSize`, at once. Under light load
 *   every request starts at once (no added latency) and the engine batches it with whatever runs at its next step
 *   boundary; under load the workers are full, jobs pile up while they work, and batches grow by themselves.
 *   The per-worker in-flight cap (worker-pool.ts) is what makes a worker "full".
 *
 * Batch window, torchserve policy, batchSize 4, maxBatchDelayMs 100 (t in ms, `a`…`f` arrivals):
 *
 *     t=0   a arrives          queue [a]        due at 0+100 → timer armed for t=100
 *     t=30  b arrives          queue [a b]      still due at 100 (the window belongs to the OLDEST job)
 *     t=100 timer fires        batch [a b]      leaves partial: a waited exactly maxBatchDelayMs
 *     t=120 c d e f arrive     queue [c d e f]  4 ≥ batchSize → batch [c d e f] leaves at once, no timer
 *
 * Admission: a request is admitted only while its expected wait fits the queue budget (`queueBudgetMs`) and the
 * queue has moved within it; else 503 OVERLOADED with a Retry-After (why, and what is measured: service-rate.ts).
 *
 * Invariants (checked by batcher.test.ts, including a fast-check property over random schedules):
 * - `nextBatch({ max })` returns null or 1…min(batchSize, max) unsettled jobs in arrival order; it never returns
 *   a job twice unless that job was handed back with `putBack`.
 * - torchserve: non-null iff size ≥ batchSize, or the oldest job has waited ≥ maxBatchDelayMs, or the batcher is
 *   closing (a draining model flushes without waiting). immediate: non-null iff a job waits.
 * - While jobs wait and none is due, exactly one timer is armed, for the oldest job's due time.
 * - `close()` resolves once the queue is empty and every dispatched job is settled.
 */
import type { BatchPolicy } from '../../common/config.js';
import { ServeError } from '../../common/errors.js';
import { BatchQueue } from './batch-queue.js';
import type { Job } from './job.js';
import { clampRetryS, Refusals, ServiceRate } from './service-rate.js';

/** Per-model batch settings (TorchServe's registration parameters), data on the registry entry. */
export interface BatchSettings {
  /** Most jobs in one batch (`batch_size`). */
  batchSize: number;
  /** Longest the oldest job waits for company, from its arrival, ms (`max_batch_delay`). */
  maxBatchDelayMs: number;
}

export interface BatcherOptions extends BatchSettings {
  policy: BatchPolicy;
  /** Bound of the model's queue (`job_queue_size`). */
  queueSize: number;
  /** Longest wait in the queue a request may expect and still be admitted, ms (QUEUE_BUDGET_MS). Default ∞. */
  queueBudgetMs?: number;
  /** Clock in ms; `performance.now` unless a test drives time. */
  now?: () => number;
}

export class Batcher {
  readonly policy: BatchPolicy;
  readonly batchSize: number;
  readonly maxBatchDelayMs: number;
  readonly queueBudgetMs: number;
  readonly queue: BatchQueue;

  #now: () => number;
  /** Called when a batch may have become due (a job arrived, the timer fired, jobs were put back). */
  #onDue: (() => void) | undefined;
  #timer: NodeJS.Timeout | undefined;
  #timerDueAt = Infinity;
  /** Jobs handed out by `nextBatch` and not settled yet (and not put back). */
  #dispatched = new Set<Job>();
  #closing = false;
  #drained: { promise: Promise<void>; resolve: () => void } | undefined;
  #rate = new ServiceRate();
  /** Last time the queue moved: a job left it, or it went from empty to waiting. */
  #movedAt = 0;
  #refusals = new Refusals();

  constructor(options: BatcherOptions) {
    if (!Number.isInteger(options.batchSize) || options.batchSize < 1) throw new RangeError('batchSize must be ≥ 1');
    if (!(options.maxBatchDelayMs >= 0)) throw new RangeError('maxBatchDelayMs must be ≥ 0');
    this.policy = options.policy;
    this.batchSize = options.batchSize;
    this.maxBatchDelayMs = options.maxBatchDelayMs;
    this.queueBudgetMs = options.queueBudgetMs ?? Infinity;
    // A draining model may be waiting for its last queued job to time out.
    this.queue = new BatchQueue(options.queueSize, () => this.#checkDrained());
    this.#now = options.now ?? (() => performance.now());
  }

  /** Jobs waiting plus jobs on a worker. */
  get pending(): number {
    return this.queue.size + this.#dispatched.size;
  }

  get closing(): boolean {
    return this.#closing;
  }

  /** Register the one listener (the worker pool) told when a batch may be due. */
  onDue(listener: (() => void) | undefined): void {
    this.#onDue = listener;
  }

  /**
   * Accept the jobs of one request (all or none) and nudge the pool.
   * @throws ServeError OVERLOADED (its wait would not fit the queue budget) or QUEUE_FULL, with a Retry-After.
   */
  submit(jobs: readonly Job[]): void {
    this.#admit(jobs);
    if (this.queue.size === 0) this.#movedAt = this.#now();
    this.queue.enqueue(jobs, this.retryAfterS());
    this.#onDue?.();
  }

  /**
   * Expected wait in the queue of a request arriving now, ms: the jobs that leave before its first one (one per
   * waiting request) ÷ the service rate. 0 while nothing waits; undefined while the rate is not known yet.
   */
  expectedWaitMs(): number | undefined {
    if (this.queue.size === 0) return 0;
    const perMs = this.#rate.perMs();
    return perMs === undefined ? undefined : this.queue.groups / perMs;
  }

  /** Refuse a request whose first job could not start within the queue budget (module doc: Admission). */
  #admit(jobs: readonly Job[]): void {
    if (this.queue.size === 0 || this.queueBudgetMs === Infinity) return;
    const budget = this.queueBudgetMs;
    const stillMs = this.#now() - this.#movedAt;
    const expectedMs = this.expectedWaitMs();
    let overMs: number;
    if (expectedMs === undefined) {
      if (stillMs <= budget) return;
      overMs = stillMs - budget;
    } else {
      if (expectedMs <= budget && stillMs <= budget) return;
      overMs = Math.max(expectedMs - budget, stillMs - budget);
    }
    const retryAfterS = this.#refusals.retryAfterS(this.#now(), overMs, budget, this.#rate.perMs());
    const expected = expectedMs === undefined ? 'unknown' : `${Math.round(expectedMs)} ms`;
    throw new ServeError(
      'OVERLOADED',
      `Model ${jobs[0]?.model ?? '?'} is overloaded: ${this.queue.groups} requests wait (expected wait ${expected}, the queue last moved ${Math.round(stillMs)} ms ago; budget ${budget} ms), retry in ${retryAfterS} s.`,
      { retryAfterS },
    );
  }

  /** When the waiting jobs form a batch: now (≤ now), a later time, or Infinity when nothing waits. */
  dueAt(): number {
    if (this.queue.size === 0) return Infinity;
    // Before the oldest job is looked for: that scans every waiting request, and under overload hundreds wait.
    if (this.#closing || this.policy === 'immediate' || this.queue.size >= this.batchSize) return -Infinity;
    const oldest = this.queue.oldest();
    return oldest === undefined ? Infinity : oldest.arrivedAt + this.maxBatchDelayMs;
  }

  /**
   * The batch to send now to a worker with room for `max` jobs (default: a whole batch), or null (then a timer is
   * armed if jobs wait). The caller must send every returned job or hand it back with `putBack`.
   */
  nextBatch(options: { max?: number; interactiveOnly?: boolean } = {}): Job[] | null {
    const dueAt = this.dueAt();
    if (dueAt === Infinity) return null;
    if (options.interactiveOnly && !this.queue.interactiveWaiting) return null;
    const now = this.#now();
    if (dueAt > now) {
      this.#armTimer(dueAt, now);
      return null;
    }
    const jobs = this.queue.take(Math.min(this.batchSize, options.max ?? Infinity), options.interactiveOnly);
    if (jobs.length === 0) return null;
    this.#movedAt = now;
    if (this.#dispatched.size === 0) this.#rate.busy(now);
    for (const job of jobs) {
      job.dispatched(now);
      this.#dispatched.add(job);
      const settled = () => this.#settled(job);
      void job.promise.then(settled, settled);
    }
    // What is left may not be due yet (a full batch taken from a longer queue): keep its timer.
    const nextDueAt = this.dueAt();
    if (nextDueAt === Infinity) this.#clearTimer();
    else if (nextDueAt > now) this.#armTimer(nextDueAt, now);
    return jobs;
  }

  /** Jobs taken by `nextBatch` that never reached a worker go back to the front of the queue. */
  putBack(jobs: readonly Job[]): void {
    for (const job of jobs) this.#dispatched.delete(job);
    this.#maybeIdle();
    this.queue.putBack(jobs);
    this.#onDue?.();
  }

  /**
   * Seconds a client turned away with QUEUE_FULL should wait: the time the current queue takes to drain at the
   * measured service rate, clamped to 1…60 s (1 s while no rate is known).
   */
  retryAfterS(): number {
    return clampRetryS((this.expectedWaitMs() ?? 0) / 1000);
  }

  /**
   * Stop waiting for company: every waiting job is due at once. Resolves when the queue is empty and every
   * dispatched job is settled. Idempotent.
   */
  close(): Promise<void> {
    if (!this.#closing) {
      this.#closing = true;
      this.#clearTimer();
      let resolve!: () => void;
      const promise = new Promise<void>((r) => (resolve = r));
      this.#drained = { promise, resolve };
      this.#checkDrained();
      this.#onDue?.();
    }
    return this.#drained!.promise;
  }

  /** Stop the timer and forget the listener (the model is gone; its jobs were answered or failed). */
  dispose(): void {
    this.#clearTimer();
    this.#onDue = undefined;
  }

  #settled(job: Job): void {
    if (!this.#dispatched.delete(job)) return;
    // An abandoned job's early end says nothing about how fast the engine serves.
    if (job.abandoned === undefined) this.#rate.completed(this.#now());
    this.#maybeIdle();
    this.#checkDrained();
  }

  /** Close the busy period when the last dispatched job is gone. */
  #maybeIdle(): void {
    if (this.#dispatched.size === 0) this.#rate.idle(this.#now());
  }

  #checkDrained(): void {
    if (this.#closing && this.queue.size === 0 && this.#dispatched.size === 0) this.#drained?.resolve();
  }

  #armTimer(dueAt: number, now: number): void {
    if (this.#timer !== undefined && this.#timerDueAt <= dueAt) return;
    this.#clearTimer();
    this.#timerDueAt = dueAt;
    // +1 ms: timers may fire a fraction early relative to performance.now(); firing early would only re-arm.
    this.#timer = setTimeout(
      () => {
        this.#timer = undefined;
        this.#timerDueAt = Infinity;
        this.#onDue?.();
      },
      Math.max(0, Math.ceil(dueAt - now)) + 1,
    );
  }

  #clearTimer(): void {
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerDueAt = Infinity;
  }
}
