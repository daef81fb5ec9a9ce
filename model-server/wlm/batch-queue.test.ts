import { describe, expect, it } from 'vitest';
import { BatchQueue } from './batch-queue.js';
import { Job, newJobId } from './job.js';

const jobsOf = (group: string, n: number) =>
  Array.from({ length: n }, (_, i) => {
    const job = new Job({
      id: `${group}${i}`,
      model: 'm',
      version: '1.0',
      body: null,
      responseTimeoutMs: 60_000,
      group,
    });
    return job;
  });
const lone = () => new Job({ id: newJobId(), model: 'm', version: '1.0', body: null, responseTimeoutMs: 60_000 });
const ids = (jobs: Job[]) => jobs.map((j) => j.id);

describe('BatchQueue: fair between requests', () => {
  it('takes one job per request in turn, each request in its own order', () => {
    const q = new BatchQueue(100);
    q.enqueue(jobsOf('d', 5));
    q.enqueue(jobsOf('s', 1));
    q.enqueue(jobsOf('t', 2));
    expect(q.size).toBe(8);
    expect(q.groups).toBe(3);
    expect(ids(q.take(4))).toEqual(['d0', 's0', 't0', 'd1']);
    // The rotation goes on where it stopped: t, then d alone.
    expect(ids(q.take(10))).toEqual(['t1', 'd2', 'd3', 'd4']);
    expect(q.size).toBe(0);
    expect(q.groups).toBe(0);
  });

  it('a single sentence behind a long document leaves in the next batch', () => {
    const q = new BatchQueue(1000);
    q.enqueue(jobsOf('doc', 500));
    q.take(64);
    const single = lone();
    q.enqueue([single]);
    expect(q.take(2)).toContain(single);
  });

  it('one-job requests stay first in, first out', () => {
    const q = new BatchQueue(10);
    const jobs = [lone(), lone(), lone()];
    for (const j of jobs) q.enqueue([j]);
    expect(q.take(3)).toEqual(jobs);
  });

  it('an abandoned job stops counting at once and is never handed out', async () => {
    const q = new BatchQueue(10);
    const doc = jobsOf('d', 3);
    q.enqueue(doc);
    doc[1]!.abandon('client-gone');
    await expect(doc[1]!.promise).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
    expect(q.size).toBe(2);
    expect(ids(q.take(5))).toEqual(['d0', 'd2']);
    const alone = lone();
    q.enqueue([alone]);
    alone.abandon('deadline');
    expect(q.size).toBe(0);
    expect(q.groups).toBe(0);
    expect(q.oldest()).toBeUndefined();
  });

  it('putBack returns jobs to the front of their request and that request to the front of the rotation', () => {
    const q = new BatchQueue(10);
    q.enqueue(jobsOf('a', 3));
    q.enqueue(jobsOf('b', 2));
    const taken = q.take(2); // a0 b0
    expect(ids(taken)).toEqual(['a0', 'b0']);
    q.putBack(taken);
    expect(q.size).toBe(5);
    expect(ids(q.take(5))).toEqual(['a0', 'b0', 'a1', 'b1', 'a2']);
  });

  it('oldest() is the earliest arrival among the requests waiting', () => {
    const q = new BatchQueue(10);
    const first = jobsOf('x', 2);
    q.enqueue(first);
    q.enqueue([lone()]);
    expect(q.oldest()).toBe(first[0]);
  });

  it('refuses a request that does not fit, whole', () => {
    const q = new BatchQueue(4);
    q.enqueue(jobsOf('a', 3));
    expect(() => q.enqueue(jobsOf('b', 2))).toThrow(/is full \(4 jobs\)/);
    expect(() => q.enqueue(jobsOf('c', 5))).toThrow(/holds at most 4/);
    expect(q.size).toBe(3);
  });
});
