import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { Batcher } from './batcher.js';
import { Job, type JobHolder, newJobId } from './job.js';

const device = { kind: 'cpu', id: null, provider: 'none' } as const;

function job(responseTimeoutMs = 10_000): Job {
  return new Job({ id: newJobId(), model: 'm', version: '1.0', body: null, responseTimeoutMs });
}

/**
 * A stand-in for the worker pool: at most `capacity` jobs may be in flight (worker-pool.ts caps a worker in jobs);
 * whenever the batcher says a batch may be due, it fills the room left. Batches are answered only when the test
 * says so. A job abandoned in flight (its deadline passed) is cancelled alone and frees its room at once, as the
 * engine drops a cancelled row at its next step (worker-handle.ts), so the time-outs of dispatched jobs open room.
 */
class Driver implements JobHolder {
  readonly inFlight: Job[][] = [];
  readonly sent: { jobs: Job[]; at: number; queuedBefore: number; room: number; allLive: boolean }[] = [];
  constructor(
    readonly batcher: Batcher,
    readonly capacity: number,
  ) {
    batcher.onDue(() => this.pump());
  }
  get room(): number {
    return this.capacity - this.inFlight.reduce((n, jobs) => n + jobs.filter((j) => !j.settled).length, 0);
  }
  pump(): void {
    while (this.room > 0) {
      const queuedBefore = this.batcher.queue.size;
      const room = this.room;
      const jobs = this.batcher.nextBatch({ max: room });
      if (jobs === null) return;
      this.inFlight.push(jobs);
      for (const j of jobs) j.holdBy(this);
      this.sent.push({ jobs, at: performance.now(), queuedBefore, room, allLive: jobs.every((j) => !j.settled) });
    }
  }
  answerOldest(): void {
    const jobs = this.inFlight.shift();
    for (const j of jobs ?? []) j.resolve({ value: j.id, workerId: 'w', device });
    this.pump();
  }
  jobAbandoned(): void {
    this.pump();
  }
  dieAll(): void {
    for (const jobs of this.inFlight.splice(0)) for (const j of jobs) j.reject(new ServeError('WORKER_DIED'));
    this.pump();
  }
}

describe('Batcher', () => {
  beforeEach(() => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] });
  });
  afterEach(() => {
    vi.useRealTimers();
  });

  it('torchserve policy: a lone job leaves when max_batch_delay has passed since its arrival, not before', () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 4, maxBatchDelayMs: 100, queueSize: 10 });
    const driver = new Driver(batcher, 4);
    const a = job();
    batcher.submit([a]);
    vi.advanceTimersByTime(30);
    batcher.submit([job()]);
    vi.advanceTimersByTime(69);
    expect(driver.sent).toHaveLength(0);
    vi.advanceTimersByTime(2);
    expect(driver.sent).toHaveLength(1);
    expect(driver.sent[0]!.jobs).toHaveLength(2);
    expect(driver.sent[0]!.jobs[0]).toBe(a);
    expect(driver.sent[0]!.at - a.arrivedAt).toBeGreaterThanOrEqual(100);
    expect(driver.sent[0]!.at - a.arrivedAt).toBeLessThanOrEqual(101);
  });

  it('torchserve policy: batch_size waiting jobs leave at once, and a backlog leaves as full batches', () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 4, maxBatchDelayMs: 1000, queueSize: 100 });
    const driver = new Driver(batcher, 4);
    batcher.submit(Array.from({ length: 4 }, () => job()));
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([4]);
    batcher.submit(Array.from({ length: 10 }, () => job()));
    driver.answerOldest();
    driver.answerOldest();
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([4, 4, 4]);
    // Two left, younger than the delay: they wait for company.
    driver.answerOldest();
    expect(driver.sent).toHaveLength(3);
    vi.advanceTimersByTime(1001);
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([4, 4, 4, 2]);
  });

  it('torchserve policy: batch_size 1 never waits', () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 1, maxBatchDelayMs: 5000, queueSize: 10 });
    const driver = new Driver(batcher, 1);
    batcher.submit([job()]);
    expect(driver.sent).toHaveLength(1);
  });

  it('immediate policy: a worker with room takes what waits at once; jobs arriving while it is full leave together', () => {
    const batcher = new Batcher({ policy: 'immediate', batchSize: 8, maxBatchDelayMs: 100, queueSize: 100 });
    const driver = new Driver(batcher, 8);
    batcher.submit([job()]);
    batcher.submit([job()]);
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([1, 1]);
    batcher.submit(Array.from({ length: 6 }, () => job()));
    for (let i = 0; i < 5; i += 1) batcher.submit([job()]);
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([1, 1, 6]);
    driver.answerOldest();
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([1, 1, 6, 1]);
    driver.answerOldest();
    driver.answerOldest();
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([1, 1, 6, 1, 1, 3]);
  });

  it('a full queue refuses the whole request with QUEUE_FULL and a Retry-After hint', () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 4, maxBatchDelayMs: 100, queueSize: 3 });
    batcher.submit([job(), job()]);
    let refused: unknown;
    try {
      batcher.submit([job(), job()]);
    } catch (err) {
      refused = err;
    }
    expect(refused).toBeInstanceOf(ServeError);
    expect((refused as ServeError).code).toBe('QUEUE_FULL');
    expect((refused as ServeError).retryAfterS).toBeGreaterThanOrEqual(1);
    expect(batcher.queue.size).toBe(2);
  });

  it('a job that times out in the queue is answered 504 and leaves the queue', async () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 4, maxBatchDelayMs: 100, queueSize: 3 });
    const j = job(50);
    batcher.submit([j]);
    vi.advanceTimersByTime(51);
    await expect(j.promise).rejects.toMatchObject({ code: 'REQUEST_TIMEOUT', status: 504 });
    expect(batcher.queue.size).toBe(0);
  });

  /** Teach an immediate batcher a service rate of one job per `perJobMs` of busy time, one job at a time. */
  async function warm(batcher: Batcher, driver: Driver, perJobMs: number, jobs = 10): Promise<void> {
    for (let i = 0; i < jobs; i += 1) {
      batcher.submit([job()]);
      vi.advanceTimersByTime(perJobMs);
      driver.answerOldest();
      await vi.advanceTimersByTimeAsync(0); // the batcher learns of a settlement on a microtask
    }
    // An idle stretch: it must not make the engine look slower.
    vi.advanceTimersByTime(10_000);
  }

  function refusal(submit: () => void): ServeError | undefined {
    try {
      submit();
      return undefined;
    } catch (err) {
      return err as ServeError;
    }
  }

  /** An immediate batcher that admits within `queueBudgetMs`, and a worker taking `batchSize` jobs at once. */
  function admitting(batchSize: number, queueSize: number, queueBudgetMs: number) {
    const batcher = new Batcher({ policy: 'immediate', batchSize, maxBatchDelayMs: 0, queueSize, queueBudgetMs });
    return { batcher, driver: new Driver(batcher, batchSize) };
  }

  it('admission: a request whose expected queue wait exceeds the budget is refused at once, OVERLOADED + Retry-After', async () => {
    const { batcher, driver } = admitting(4, 1000, 100);
    await warm(batcher, driver, 10);
    batcher.submit([job(), job(), job(), job()]);
    expect(batcher.queue.size).toBe(0); // on the worker
    // 10 ms a job: a job with 10 ahead expects 100 ms (admitted), with 11 ahead 110 ms (refused).
    for (let i = 0; i <= 10; i += 1) expect(refusal(() => batcher.submit([job()]))).toBeUndefined();
    expect(batcher.queue.size).toBe(11);
    expect(batcher.expectedWaitMs()).toBeCloseTo(110, 0);
    const refused = refusal(() => batcher.submit([job()]));
    expect(refused).toMatchObject({ code: 'OVERLOADED', status: 503, retryAfterS: 1 });
    expect(refused!.message).toMatch(/^Model m is overloaded: 11 requests wait \(expected wait 110 ms/);
    expect(batcher.queue.size).toBe(11);
    // Room opens as the engine answers: admitted again.
    driver.answerOldest();
    await vi.advanceTimersByTimeAsync(0);
    expect(batcher.queue.size).toBe(7);
    expect(refusal(() => batcher.submit([job()]))).toBeUndefined();
  });

  it('Retry-After under sustained overload: adds the clients refused within the last hint ÷ the service rate, at most the budget', async () => {
    const { batcher, driver } = admitting(4, 100_000, 5_000);
    // 10 ms a job: the queue holds 500 jobs within the 5 s budget.
    await warm(batcher, driver, 10);
    batcher.submit([job(), job(), job(), job()]);
    for (let i = 0; i <= 500; i += 1) batcher.submit([job()]);
    expect(batcher.expectedWaitMs()).toBeCloseTo(5_010, 0);
    // Nobody refused before: the time the queue needs to be back in budget only (10 ms → 1 s).
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ code: 'OVERLOADED', retryAfterS: 1 });
    // 249 more within that second: with the first, 250 clients wait to return, 2.5 s of admissions at 10 ms each.
    for (let i = 0; i < 249; i += 1) refusal(() => batcher.submit([job()]));
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ retryAfterS: 3 });
    // Thousands refused: capped by the budget (5 s of work queued keeps the engine busy until they return).
    for (let i = 0; i < 5_000; i += 1) refusal(() => batcher.submit([job()]));
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ retryAfterS: 6 });
    // Once the refused clients' hint has passed they are no longer counted: what is left is the queue's own wait,
    // which has not moved for 6 s now, 1 s past the budget (still counted, the 5,000 would make it 7 s).
    vi.advanceTimersByTime(6_001);
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ code: 'OVERLOADED', retryAfterS: 2 });
  });

  it('admission: nothing new is admitted while the queue has not moved for the whole budget', async () => {
    const { batcher, driver } = admitting(2, 1000, 100);
    await warm(batcher, driver, 1);
    batcher.submit([job(), job(), job()]);
    expect(batcher.queue.size).toBe(1);
    // The engine stalls: the estimate (1 ms a job) says "fits", the waiting job says otherwise.
    vi.advanceTimersByTime(150);
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ code: 'OVERLOADED', retryAfterS: 1 });
  });

  it('admission: before the rate is known only the queue bound and the sojourn check apply', () => {
    const { batcher } = admitting(2, 1000, 100);
    for (let i = 0; i < 50; i += 1) expect(refusal(() => batcher.submit([job()]))).toBeUndefined();
    expect(batcher.expectedWaitMs()).toBeUndefined();
    vi.advanceTimersByTime(101); // nothing left the queue for the whole budget
    expect(refusal(() => batcher.submit([job()]))).toMatchObject({ code: 'OVERLOADED', retryAfterS: 1 });
  });

  it('the response timeout counts from dispatch: a job that waited in the queue still gets its whole time to run', async () => {
    const batcher = new Batcher({ policy: 'immediate', batchSize: 1, maxBatchDelayMs: 0, queueSize: 10 });
    const driver = new Driver(batcher, 1);
    const first = job(100);
    const second = job(100);
    batcher.submit([first]);
    batcher.submit([second]);
    vi.advanceTimersByTime(60);
    driver.answerOldest(); // second leaves the queue at t=60
    vi.advanceTimersByTime(99);
    expect(second.settled).toBe(false);
    vi.advanceTimersByTime(2);
    await expect(second.promise).rejects.toMatchObject({
      code: 'REQUEST_TIMEOUT',
      message: 'Request timed out: inference took longer than the response timeout (100 ms); its work was cancelled.',
    });
    expect(second.abandoned).toEqual({ reason: 'deadline', running: true });
  });

  it('a job abandoned by its client leaves the queue at once, 499 CLIENT_CLOSED', async () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 4, maxBatchDelayMs: 1000, queueSize: 10 });
    const [a, b] = [job(), job()];
    batcher.submit([a, b]);
    expect(a.abandon('client-gone')).toBe(true);
    expect(a.abandon('client-gone')).toBe(false);
    await expect(a.promise).rejects.toMatchObject({ code: 'CLIENT_CLOSED', status: 499 });
    expect(a.abandoned).toEqual({ reason: 'client-gone', running: false });
    expect(batcher.queue.size).toBe(1);
    expect(batcher.queue.oldest()).toBe(b);
  });

  it('putBack returns jobs to the front in their order', () => {
    const batcher = new Batcher({ policy: 'immediate', batchSize: 2, maxBatchDelayMs: 0, queueSize: 10 });
    const jobs = [job(), job(), job()];
    batcher.submit(jobs);
    const first = batcher.nextBatch()!;
    expect(first).toEqual(jobs.slice(0, 2));
    batcher.putBack(first);
    expect(batcher.nextBatch()).toEqual(jobs.slice(0, 2));
    expect(batcher.nextBatch()).toEqual(jobs.slice(2));
  });

  it('close() flushes without waiting for company and resolves once everything is answered', async () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 10, maxBatchDelayMs: 60_000, queueSize: 10 });
    const driver = new Driver(batcher, 10);
    batcher.submit([job(), job()]);
    expect(driver.sent).toHaveLength(0);
    let closed = false;
    void batcher.close().then(() => (closed = true));
    expect(driver.sent.map((s) => s.jobs.length)).toEqual([2]);
    await Promise.resolve();
    expect(closed).toBe(false);
    driver.answerOldest();
    await vi.advanceTimersByTimeAsync(0);
    expect(closed).toBe(true);
  });

  it('close() also resolves when the last queued job times out instead of leaving', async () => {
    const batcher = new Batcher({ policy: 'torchserve', batchSize: 10, maxBatchDelayMs: 60_000, queueSize: 10 });
    batcher.submit([job(50)]);
    let closed = false;
    void batcher.close().then(() => (closed = true));
    await vi.advanceTimersByTimeAsync(51);
    expect(closed).toBe(true);
  });

  type Command =
    | { kind: 'arrive'; count: number }
    | { kind: 'advance'; ms: number }
    | { kind: 'answer' }
    | { kind: 'die' }
    | { kind: 'bounce' };

  const command: fc.Arbitrary<Command> = fc.oneof(
    fc.record({ kind: fc.constant('arrive' as const), count: fc.integer({ min: 1, max: 5 }) }),
    fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: 0, max: 80 }) }),
    fc.record({ kind: fc.constant('answer' as const) }),
    fc.record({ kind: fc.constant('die' as const) }),
    fc.record({ kind: fc.constant('bounce' as const) }),
  );

  it('property: every accepted job is answered exactly once, batches respect size, room, order and the window', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          policy: fc.constantFrom('torchserve' as const, 'immediate' as const),
          batchSize: fc.integer({ min: 1, max: 6 }),
          maxBatchDelayMs: fc.integer({ min: 0, max: 50 }),
          queueSize: fc.integer({ min: 1, max: 12 }),
          responseTimeoutMs: fc.integer({ min: 10, max: 300 }),
          capacity: fc.integer({ min: 1, max: 10 }),
        }),
        fc.array(command, { maxLength: 60 }),
        async (settings, commands) => {
          const batcher = new Batcher({ ...settings });
          const driver = new Driver(batcher, settings.capacity);
          const accepted: Job[] = [];
          const outcomes = new Map<Job, number>();
          const track = (j: Job) =>
            void j.promise.then(
              () => outcomes.set(j, (outcomes.get(j) ?? 0) + 1),
              () => outcomes.set(j, (outcomes.get(j) ?? 0) + 1),
            );
          let checkedSent = 0;
          const checkInvariants = () => {
            for (const s of driver.sent.slice(checkedSent)) {
              expect(s.jobs.length).toBeGreaterThan(0);
              expect(s.jobs.length).toBeLessThanOrEqual(settings.batchSize);
              for (let i = 1; i < s.jobs.length; i += 1) {
                expect(s.jobs[i]!.arrivedAt).toBeGreaterThanOrEqual(s.jobs[i - 1]!.arrivedAt);
              }
              expect(s.jobs.length).toBe(Math.min(s.queuedBefore, settings.batchSize, s.room));
              if (settings.policy === 'torchserve' && !batcher.closing) {
                const due =
                  s.queuedBefore >= settings.batchSize || s.at - s.jobs[0]!.arrivedAt >= settings.maxBatchDelayMs;
                expect(due).toBe(true);
              }
              expect(s.allLive).toBe(true);
            }
            checkedSent = driver.sent.length;
            // Room never leaves a due job waiting (immediate: nothing waits at all).
            const oldest = batcher.queue.oldest();
            if (driver.room > 0 && oldest !== undefined) {
              expect(settings.policy).toBe('torchserve');
              expect(performance.now() - oldest.arrivedAt).toBeLessThanOrEqual(settings.maxBatchDelayMs + 1);
            }
          };
          for (const c of commands) {
            if (c.kind === 'arrive') {
              const jobs = Array.from({ length: c.count }, () => job(settings.responseTimeoutMs));
              try {
                batcher.submit(jobs);
                accepted.push(...jobs);
                jobs.forEach(track);
              } catch (err) {
                // More jobs than the queue can ever hold is the request's fault (413), else the queue is full now (503).
                expect((err as ServeError).code).toBe(
                  c.count > settings.queueSize ? 'PAYLOAD_TOO_LARGE' : 'QUEUE_FULL',
                );
                for (const j of jobs) j.reject(err as ServeError);
              }
            } else if (c.kind === 'advance') vi.advanceTimersByTime(c.ms);
            else if (c.kind === 'answer') driver.answerOldest();
            else if (c.kind === 'die') driver.dieAll();
            else {
              const jobs = driver.inFlight.pop();
              if (jobs) batcher.putBack(jobs);
            }
            checkInvariants();
          }
          // Drain: answer everything until nothing is left.
          void batcher.close();
          for (let i = 0; i < 1000 && batcher.pending > 0; i += 1) {
            driver.answerOldest();
            vi.advanceTimersByTime(settings.maxBatchDelayMs + 2);
          }
          await vi.advanceTimersByTimeAsync(0);
          expect(batcher.pending).toBe(0);
          for (const j of accepted) expect(outcomes.get(j)).toBe(1);
          expect(outcomes.size).toBe(accepted.length);
          batcher.dispose();
        },
      ),
      { numRuns: 300 },
    );
  });
});
