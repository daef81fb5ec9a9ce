/**
 * @module model-server/wlm/workers/worker-batches — the batches one worker holds (worker-handle.ts owns the process): sent
 * as one message per round, answered item by item, reported with the worker's step counters when done.
 *
 * Invariants:
 * - Every job sent is settled exactly once: by its `item` answer, by `batch-done` when the worker skipped it (a
 *   lying worker: INTERNAL), or by `failAll` when the process is gone. Answers for jobs already settled are not
 *   delivered.
 * - A job abandoned while held (its response timeout passed, or its client went away) is answered by the job
 *   itself; the worker is sent a `cancel` for it (coalesced per event-loop turn), drops its rows at the next step
 *   and still answers the id once, which is when the job stops counting against the worker's room. If its rows
 *   finished before the cancel arrived, that answer is ok: it is counted (BatchReport.finishedAfterAbandon).
 */
import { ServeError } from '../../../common/errors.js';
import type { Logger } from '../../../common/logger.js';
import type { BatchDoneMessage, BatchMessage, ItemMessage, StepCounters, ToWorker } from '../../protocol.js';
import type { AbandonReason, Job, JobHolder, JobResult } from '../job.js';

/** One model's batch for a round. */
export interface OutgoingBatch {
  jobs: readonly Job[];
  model: string;
  version: string;
}

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
   * took effect at the engine's next step boundary, so they are neither answered ok nor among the cancelled rows.
   */
  finishedAfterAbandon: number;
}

interface HeldBatch extends Omit<OutgoingBatch, 'jobs'> {
  size: number;
  /** Jobs of this batch not answered yet, by id. */
  jobs: Map<string, Job>;
  finishedAfterAbandon: number;
}

let nextBatchId = 0;

export class WorkerBatches {
  #batches = new Map<number, HeldBatch>();
  /** Job id → batch id, for every unanswered job. */
  #jobBatch = new Map<string, number>();
  /** Bulk jobs among those in `#jobBatch`. */
  #bulk = 0;
  /** The worker's step counters at its last report (cumulative since it loaded). */
  #steps: Required<StepCounters> = { runs: 0, rows: 0, cancelledRows: 0, cappedRows: 0, failedRows: 0 };
  /** Cancels gathered in this event-loop turn, sent as one message per reason. */
  #cancels = { deadline: [] as string[], 'client-gone': [] as string[] };
  #cancelFlush: NodeJS.Immediate | undefined;
  readonly #log: Logger;
  readonly #post: (message: ToWorker) => boolean;

  /** `post` sends a message to the worker; false when it cannot. */
  constructor(log: Logger, post: (message: ToWorker) => boolean) {
    this.#log = log;
    this.#post = post;
  }

  /** Jobs sent and not answered. */
  get jobCount(): number {
    return this.#jobBatch.size;
  }

  /** The longest response timeout among them, ms (0 when none is held). */
  get longestResponseTimeoutMs(): number {
    let longest = 0;
    for (const batch of this.#batches.values())
      for (const job of batch.jobs.values()) longest = Math.max(longest, job.responseTimeoutMs);
    return longest;
  }

  /** Of those, the bulk ones (job.ts BULK_REQUEST_JOBS). */
  get bulkJobCount(): number {
    return this.#bulk;
  }

  /**
   * Send `batches` as one message and hold their jobs (for `holder`) until answered. All or nothing: false when the
   * message could not be sent.
   */
  send(batches: readonly OutgoingBatch[], holder: JobHolder): boolean {
    const messages = batches.map(({ jobs, model }): BatchMessage => {
      const items = jobs.map((job) => ({ id: job.id, model, body: job.body, ...(job.bulk ? { bulk: true } : {}) }));
      return { type: 'batch', batchId: ++nextBatchId, items };
    });
    if (!this.#post(messages.length === 1 ? messages[0]! : { type: 'round', batches: messages })) return false;
    batches.forEach(({ jobs, model, version }, i) => {
      const batch: HeldBatch = { model, version, size: jobs.length, jobs: new Map(), finishedAfterAbandon: 0 };
      for (const job of jobs) {
        batch.jobs.set(job.id, job);
        this.#jobBatch.set(job.id, messages[i]!.batchId);
        if (job.bulk) this.#bulk += 1;
        job.holdBy(holder);
      }
      this.#batches.set(messages[i]!.batchId, batch);
    });
    return true;
  }

  /** A held job was abandoned: cancel it on the worker, with the others abandoned in this event-loop turn. */
  cancel(job: Job, reason: AbandonReason): void {
    if (!this.#jobBatch.has(job.id)) return;
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

  /** Settle the job an `item` answers: with `result(value)` when ok, else with its error. */
  answer(message: ItemMessage, result: (value: unknown) => JobResult): void {
    const batchId = this.#jobBatch.get(message.id);
    if (batchId === undefined) return; // settled already (timed out) or not ours
    this.#jobBatch.delete(message.id);
    const batch = this.#batches.get(batchId);
    const job = batch?.jobs.get(message.id);
    batch?.jobs.delete(message.id);
    if (batch === undefined || job === undefined) return;
    if (job.bulk) this.#bulk -= 1;
    if (message.outcome.ok) {
      const answered = job.resolve(result(message.outcome.value));
      // Abandoned while its rows ran, and they finished before the cancel reached the engine.
      if (!answered && job.abandoned !== undefined) batch.finishedAfterAbandon += 1;
    } else {
      job.reject(ServeError.fromWire(message.outcome.error));
    }
  }

  /** A batch is done: the jobs the worker did not answer fail. Its report; undefined for a batch not held here. */
  finish(message: BatchDoneMessage): BatchReport | undefined {
    const batch = this.#batches.get(message.batchId);
    if (batch === undefined) return undefined;
    this.#batches.delete(message.batchId);
    if (batch.jobs.size > 0) {
      this.#log.error({ batchId: message.batchId, missing: batch.jobs.size }, 'worker skipped items of a batch');
      for (const job of batch.jobs.values()) {
        this.#jobBatch.delete(job.id);
        if (job.bulk) this.#bulk -= 1;
        job.reject(new ServeError('INTERNAL', 'Worker did not answer every item of its batch.'));
      }
    }
    const previous = this.#steps;
    this.#steps = { ...previous, ...message.steps };
    const delta = (key: keyof StepCounters) => this.#steps[key] - previous[key];
    return {
      model: batch.model,
      version: batch.version,
      size: batch.size,
      handlerMs: message.handlerMs,
      stepRuns: delta('runs'),
      stepRows: delta('rows'),
      cancelledRows: delta('cancelledRows'),
      cappedRows: delta('cappedRows'),
      failedRows: delta('failedRows'),
      finishedAfterAbandon: batch.finishedAfterAbandon,
    };
  }

  /** The process is gone: every held job fails with `error`, and nothing more is cancelled. */
  failAll(error: ServeError): void {
    for (const batch of this.#batches.values()) for (const job of batch.jobs.values()) job.reject(error);
    this.#batches.clear();
    this.#jobBatch.clear();
    this.#bulk = 0;
    if (this.#cancelFlush !== undefined) clearImmediate(this.#cancelFlush);
  }
}
