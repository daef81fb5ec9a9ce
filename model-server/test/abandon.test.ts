/**
 * Abandoned work on the model server's own port: a client that disconnects takes its jobs with it (a queued job
 * leaves its queue, a running one is cancelled on its worker), and the response timeout bounds time on a worker
 * without recycling a worker that makes progress. Real worker processes; the echo handler with an injected delay
 * stands in for a long generation (the engine's own row cancellation is tested in engine/ and worker/).
 */
import { describe, expect, it } from 'vitest';
import { errorAnswer } from '../../harness/error-body.js';
import { call, metricValue } from '../../harness/http.js';
import {
  describeModel,
  metricsText,
  registerModel,
  startPerTest,
  type TestServer,
} from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

/** POST a prediction that the client abandons after `abortAfterMs`; resolves once the client side is closed. */
async function abandoned(t: TestServer, text: string, abortAfterMs: number): Promise<void> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), abortAfterMs);
  await fetch(`${t.inference}/predictions/echo`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ src_lang: 'en', src_text: text }),
    signal: controller.signal,
  }).then(
    () => expect.unreachable('the request was aborted'),
    (err: Error) => expect(err.name).toBe('AbortError'),
  );
  clearTimeout(timer);
}

describe('abandoned work (real worker processes)', () => {
  const startServer = startPerTest();

  it('a client that disconnects cancels its jobs: running on the worker and waiting in the queue', async () => {
    const t = await startServer({ faults: { echo: 'slow:1500' } });
    await registerModel(t, 'url=echo&batch_size=1&max_batch_delay=0');
    // The first request occupies the worker (cap 1), the second waits in the queue; both clients give up.
    const running = abandoned(t, 'running', 300);
    const worker = () => t.server.manager.registry.get('echo').pool.workers()[0];
    await until('the first job on the worker', () => worker()?.inFlightJobs === 1);
    const queued = abandoned(t, 'queued', 300);
    await Promise.all([running, queued]);
    await until('both jobs cancelled', async () => {
      const text = await metricsText(t);
      const get = (stage: string) =>
        metricValue(text, 'mt_cancelled_jobs_total', { model_name: 'echo', reason: 'client-gone', stage }) ?? 0;
      return get('running') === 1 && get('queued') === 1;
    });
    expect((await describeModel(t, 'echo')).jobQueueStatus.pendingRequests).toBe(0);
    const text = await metricsText(t);
    expect(metricValue(text, 'mt_jobs_total', { model_name: 'echo', outcome: 'CLIENT_CLOSED' })).toBe(2);
    // Nobody was recycled for it, and the worker still serves.
    expect(metricValue(text, 'mt_worker_deaths_total', {}) ?? 0).toBe(0);
    const after = await call(`${t.inference}/predictions/echo`, { body: { src_lang: 'en', src_text: 'next' } });
    expect(after).toMatchObject({ status: 200, body: { translated: 'next' } });
  });

  it('a job slower than the response timeout gets 504 and is cancelled; a worker that answers is not recycled', async () => {
    const t = await startServer({ faults: { echo: 'slow:1200' } });
    await registerModel(t, 'url=echo&batch_size=4&max_batch_delay=0&response_timeout=1');
    const pid = (await describeModel(t, 'echo')).workers[0].pid;
    const res = await call(`${t.inference}/predictions/echo`, { body: { src_lang: 'en', src_text: 'slow' } });
    expect(res).toMatchObject(
      errorAnswer(
        504,
        'RequestTimeoutException',
        'Request timed out: inference took longer than the response timeout (1000 ms); its work was cancelled.',
      ),
    );
    // The worker is alive and busy (its heartbeat goes on while the handler works), so it is not recycled: it
    // answers the cancelled item at 1.2 s, and the job stops counting against its room then.
    await until('the cancelled item to be answered by the worker', async () => {
      const text = await metricsText(t);
      return metricValue(text, 'mt_cancelled_jobs_total', { model_name: 'echo', reason: 'deadline', stage: 'running' });
    });
    expect((await describeModel(t, 'echo')).workers[0].pid).toBe(pid);
  });
});
