/**
 * Abandoned work is dropped (issue 11): 1,000 translation requests, aborted by their clients mid-generation, through
 * the front (nginx when installed, else the built-in one) → router → model server, and straight to :9999. Each hop
 * passes the disconnect on, the model server cancels the jobs, and the engine's rows leave its batch at the next
 * step: its live rows fall to zero and it stops stepping, instead of generating answers nobody will read.
 *
 * Real processes, the generated tiny model, four target languages (each its own lane at the router and queue at
 * the model server). Every row generates exactly 200 tokens (MIN_NEW_TOKENS = MAX_NEW_TOKENS), so that it is still
 * generating when the disconnects arrive: stopped at its source's cap (~60 tokens here), each of the 248 rows seen
 * generating in one run finished before its cancel reached the engine, and none was cancelled.
 */
import { Agent, request } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { stopAll } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { startStack, type Stack } from '../../harness/stack.js';

const LANGS = ['en', 'ko', 'fr', 'de'];
const REQUESTS = 1_000;
const SENTENCE = 'the committee will meet again next week to review the budget and the schedule for the new building';

/** Counters that move while anything is in flight: engine steps, jobs and requests ending, batches coming back. */
const ACTIVITY = ['mt_engine_steps_total', 'mt_jobs_total', 'mt_requests_total', 'mt_batch_size_count'];

function sum(metrics: string, name: string, labels: Record<string, string> = {}): number {
  let total = 0;
  for (const line of metrics.split('\n')) {
    if (!line.startsWith(`${name}{`) && !line.startsWith(`${name} `)) continue;
    if (Object.entries(labels).every(([k, v]) => line.includes(`${k}="${v}"`))) total += Number(line.split(' ').pop());
  }
  return total;
}

afterAll(stopAll);

describe('abandoned work is dropped: 1,000 requests aborted mid-generation', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      languages: LANGS,
      handler: 'translation',
      demoModel: 'tiny',
      front: findNginx(process.env) ? 'nginx' : 'builtin',
      env: { MAX_NEW_TOKENS: '200', MIN_NEW_TOKENS: '200', RESPONSE_TIMEOUT_S: '120' },
      register: { batchSize: 64, maxBatchDelayMs: 5 },
    });
  });
  afterAll(async () => {
    await stack?.stop();
  });
  const scrape = async () => (await (await fetch(`${stack.metrics}/metrics`)).text()) as string;

  for (const via of ['front → router → model server', 'model server :9999'] as const) {
    it(`${via}: the rows leave the engine, it stops stepping, every job is accounted for`, async () => {
      const front = via !== 'model server :9999';
      const before = await scrape();
      const dispatcher = new Agent({ connections: REQUESTS, keepAliveTimeout: 10_000 });
      const controllers: AbortController[] = [];
      const outcomes = Array.from({ length: REQUESTS }, (_, i) => {
        const controller = new AbortController();
        controllers.push(controller);
        const lang = LANGS[i % LANGS.length]!;
        const url = front ? `${stack.frontUrl!}/` : `${stack.inference}/predictions/${lang}`;
        const body = front
          ? { src_lang: 'en', src_text: `${SENTENCE} ${i}`, tgt_lang: lang }
          : { src_lang: 'en', src_text: `${SENTENCE} ${i}` };
        return request(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify(body),
          dispatcher,
          signal: controller.signal,
        }).then(
          async (res) => ({
            status: res.statusCode,
            retryAfter: res.headers['retry-after'],
            body: await res.body.text(),
          }),
          (err: Error) => ({ status: 0, retryAfter: undefined, body: err.name }),
        );
      });
      // Mid-generation: the engine is stepping a full batch.
      const generating = await until(
        'the engine generating',
        async () => {
          const live = sum(await scrape(), 'mt_engine_live_rows');
          return live >= 64 ? live : undefined;
        },
        30_000,
      );
      const abortedAt = performance.now();
      for (const c of controllers) c.abort();
      const answered = await Promise.all(outcomes);
      // The rows leave at the engine's next step boundary once each cancel arrives, and the model server goes quiet:
      // no live rows, no job queued, and for half a second none of ACTIVITY moving (a request the router held in its
      // lane may still reach the model server as its neighbours leave, and be cancelled in turn: that is the tail
      // this waits out, so that none of it lands in the next case's before/after numbers).
      let quietSince = performance.now();
      let activity = '';
      let after = '';
      await until(
        'the model server idle',
        async () => {
          after = await scrape();
          const now = performance.now();
          const activityNow = ACTIVITY.map((name) => sum(after, name)).join();
          const busy = sum(after, 'mt_engine_live_rows') > 0 || sum(after, 'mt_queue_depth') > 0;
          if (busy || activityNow !== activity) [activity, quietSince] = [activityNow, now];
          return now - quietSince >= 500;
        },
        10_000,
      );
      const drainedMs = quietSince - abortedAt;

      const grown = (name: string, labels: Record<string, string> = {}) =>
        sum(after, name, labels) - sum(before, name, labels);
      const cancelled = (stage: string) => grown('mt_cancelled_jobs_total', { reason: 'client-gone', stage });
      const delta = (outcome: string) => grown('mt_jobs_total', { outcome });
      const reached = delta('ok') + delta('CLIENT_CLOSED');
      const rowsCancelled = grown('mt_engine_rows_ended_early_total', { how: 'cancelled' });
      const finishedAfterAbandon = grown('mt_jobs_finished_after_abandon_total');
      console.info(
        `abandon via ${via}: ${generating} rows generating when ${REQUESTS} clients left; live rows 0 after ${drainedMs.toFixed(0)} ms; ` +
          `${cancelled('running')} running and ${cancelled('queued')} queued jobs cancelled, ${delta('ok')} finished first, ` +
          `${rowsCancelled} engine rows cancelled, ${finishedAfterAbandon} finished before their cancel arrived, ${REQUESTS - reached} never reached the model server`,
      );
      // Every client gave up before an answer: a few were answered first, a few refused at once (503 + Retry-After:
      // 1,000 arrivals at once are more than the queue budget admits); none got an error.
      expect(answered.filter((a) => a.status !== 0 && a.status !== 200 && !(a.status === 503 && a.retryAfter))).toEqual(
        [],
      );
      // The jobs the model server accepted were cancelled, not answered: every hop passed the disconnect on.
      expect(delta('CLIENT_CLOSED')).toBeGreaterThan(delta('ok'));
      // The rows that were generating were cancelled, not finished: the frontend counts the jobs, the engine its rows
      // (one per job: NUM_BEAMS=1). Each of those rows was answered ok before its client left, left the engine at a
      // step boundary once its cancel arrived, or finished first, at or before that boundary (its answer dropped).
      // Rows answered or cancelled that were not generating yet only add to the left side.
      expect(cancelled('running')).toBeGreaterThanOrEqual(generating - delta('ok'));
      // How many finish first depends on how long the 1,000 disconnects take to reach the engine (on a loaded machine,
      // a whole cohort); that cancels reach it at all does not: without them no row would leave early, every row
      // would finish, and the sum above would hold on finished rows alone.
      expect(rowsCancelled + finishedAfterAbandon).toBeGreaterThanOrEqual(generating - delta('ok'));
      expect(rowsCancelled).toBeGreaterThan(0);
      // Every job the model server accepted ended: answered or cancelled, nothing else (no 504, no error).
      expect(sum(after, 'mt_jobs_total') - sum(before, 'mt_jobs_total')).toBe(reached);
      expect(sum(after, 'mt_queue_depth')).toBe(0);
      // Nothing was recycled.
      expect(sum(after, 'mt_worker_deaths_total')).toBe(0);
      await dispatcher.destroy();
    });
  }
});
