/**
 * Issue 6.4 — unregistering a model (`DELETE /models/{name}`) with jobs queued, through the router: the queued
 * jobs are finished when a worker can run them, or failed with a clear error when none can — never left hanging,
 * and the DELETE itself returns in bounded time. Every request is tallied; unanswered must be 0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { background, send, type Tally } from '../../harness/load.js';
import { stopAll } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { startStack, translateBody, type Stack } from '../../harness/stack.js';

const pending = async (stack: Stack, model: string): Promise<number> => {
  const res = await fetch(`${stack.management}/models/${model}`);
  if (res.status !== 200) return -1;
  const [d] = (await res.json()) as [{ jobQueueStatus: { pendingRequests: number } }];
  return d.jobQueueStatus.pendingRequests;
};

/** ko's worker holds each batch this long. */
const KO_BATCH_MS = 300;

afterAll(stopAll);

describe('DELETE /models/{name} with queued jobs (router → model server with fault-injected workers)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      languages: ['ko', 'en', 'fr', 'de'],
      handler: 'echo',
      // ko: a slow worker (its queue fills); en: a worker that hangs; fr: workers that never load; de: healthy.
      faults: { ko: `slow:${KO_BATCH_MS}`, en: 'hang-on-batch', fr: 'fail-load' },
      env: { ENGINE_SHARING: 'language' }, // an engine each, so each fault stays with its model
      register: false,
    });
    for (const [lang, query] of [
      ['ko', 'batch_size=1&response_timeout=30'],
      ['en', 'batch_size=1&response_timeout=2'],
      ['fr', 'batch_size=2&response_timeout=2&synchronous=false'],
      ['de', 'batch_size=8'],
    ] as const) {
      const res = await fetch(`${stack.management}/models?url=${lang}&max_batch_delay=5&${query}`, { method: 'POST' });
      expect(res.status, await res.text()).toBeLessThan(300);
    }
    // The router sends a language only once it has read it ready there (at most a probe period later).
    await until('the router to send de', async () => {
      const o = await send(stack.routerUrls[0]!, { body: translateBody('de', 'first') });
      return o.status === 200;
    });
  });
  afterAll(() => stack?.stop());

  /**
   * Queue `n` requests for `lang` through the router (or, `direct`, on the model server's inference port); resolves
   * once `atLeast` of them wait in its queue or are answered already, with the answers and how many were answered
   * then.
   */
  async function queue(lang: string, n: number, atLeast: number, direct = false) {
    const router = stack.routerUrls[0]!;
    const answers = Array.from({ length: n }, (_, i) =>
      direct
        ? send(`${stack.inference}/predictions/${lang}`, {
            body: JSON.stringify({ src_lang: 'en', src_text: `${lang} ${i}` }),
            deadlineMs: 30_000,
          })
        : send(router, { body: translateBody(lang, `${lang} ${i}`), deadlineMs: 30_000 }),
    );
    let answered = 0;
    for (const answer of answers) void answer.then(() => (answered += 1));
    await until(`${atLeast} queued for ${lang}`, async () => (await pending(stack, lang)) + answered >= atLeast);
    return { answers, answered };
  }

  it('a model with a working (slow) worker: DELETE waits for its queued jobs, every one answered 200', async () => {
    const others = background({
      url: () => stack.routerUrls[0]!,
      body: (i) => translateBody('de', `other ${i}`),
      concurrency: 2,
    });
    // batch_size 1: the worker holds exactly 1 job (its cap is its models' batch sizes), so 11 waiting or answered
    // means all 12 arrived.
    const { answers, answered } = await queue('ko', 12, 11);
    const left = 12 - answered;
    const started = performance.now();
    const del = await send(`${stack.management}/models/ko`, { method: 'DELETE', deadlineMs: 30_000 });
    const deleteMs = performance.now() - started;
    const outcomes = await Promise.all(answers);
    const tally: Tally = await others.stop();

    expect(del).toMatchObject({ status: 200, body: '{"status":"Model \\"ko\\" unregistered"}' });
    expect(outcomes.map((o) => `${o.status} ${o.message}`)).toEqual(Array(12).fill('200 '));
    // The jobs left when DELETE came, one batch at a time, the first already running: it waited for them, and no
    // longer than they needed.
    expect(deleteMs).toBeGreaterThan((left - 2) * KO_BATCH_MS);
    expect(deleteMs).toBeLessThan(left * KO_BATCH_MS + 4_000);
    expect((await fetch(`${stack.management}/models/ko`)).status).toBe(404);
    // Later requests for it: the model server says 404; the router, which still accepts ko (its setup_config.json),
    // says no model server has it now: 503 + Retry-After, never 404 for a language it serves.
    const gone = await send(`${stack.inference}/predictions/ko`, { body: '{"src_text":"late"}' });
    expect(gone).toMatchObject({ status: 404, kind: 'ModelNotFoundException' });
    const viaRouter = await send(stack.routerUrls[0]!, { body: translateBody('ko', 'late') });
    expect(viaRouter).toMatchObject({ status: 503, kind: 'ServiceUnavailableException' });
    // Other models were not disturbed.
    expect(tally.toJSON()).toMatchObject({ errors: {}, unanswered: 0 });
    expect(tally.ok, tally.toString() + JSON.stringify([...tally.messages])).toBe(tally.sent);
  });

  it('a model whose worker hangs: DELETE returns within response_timeout + 1 s, its jobs get 504, none hangs', async () => {
    // batch_size 1: exactly 1 job stuck on the hung worker, so 5 waiting means all 6 arrived.
    const { answers } = await queue('en', 6, 5);
    const started = performance.now();
    const del = await send(`${stack.management}/models/en`, { method: 'DELETE', deadlineMs: 30_000 });
    const deleteMs = performance.now() - started;
    const outcomes = await Promise.all(answers);

    expect(del.status).toBe(200);
    expect(deleteMs).toBeLessThan(3_500);
    for (const o of outcomes)
      expect(o).toMatchObject({
        status: 504,
        kind: 'RequestTimeoutException',
        message: expect.stringMatching(/^Request timed out\b/),
      });
  });

  it('a model with no worker able to load: its queued jobs fail clearly (503/504), DELETE returns, nothing hangs', async () => {
    // The router sends fr nowhere (no worker of it is ever ready): 503 + Retry-After at once. Its queue is filled
    // on the model server's own port.
    expect(await send(stack.routerUrls[0]!, { body: translateBody('fr', 'x') })).toMatchObject({
      status: 503,
      message: 'Model fr is unavailable now, no model server has it ready: 1 still loading it; retry later.',
    });
    const { answers } = await queue('fr', 4, 4, true);
    const started = performance.now();
    const del = await send(`${stack.management}/models/fr`, { method: 'DELETE', deadlineMs: 30_000 });
    const outcomes = await Promise.all(answers);

    expect(del.status).toBe(200);
    expect(performance.now() - started).toBeLessThan(3_500);
    for (const o of outcomes) {
      expect(o.status === 503 || o.status === 504, JSON.stringify(o)).toBe(true);
      expect(o.message).toMatch(
        /^(Model fr version 1\.0 was unregistered before this job ran\.|Request timed out\b.*)$/,
      );
    }
    expect((await send(`${stack.inference}/ping`)).status).toBe(200);
  });
});
