import { fork } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { errorAnswer } from '../../harness/error-body.js';
import { call, metricValue } from '../../harness/http.js';
import { describeModel, registerModel, startPerTest, type TestServer } from '../../harness/model-server.js';
import { alive } from '../../harness/processes.js';
import { until } from '../../harness/polling.js';
import { childConnection } from '../wlm/workers/worker-connection.js';

const predict = (t: TestServer, model: string, text: string) =>
  call(`${t.inference}/predictions/${model}`, { body: { src_lang: 'en', src_text: text } });

describe('worker faults (real worker processes with injected faults)', () => {
  const startServer = startPerTest();

  it('SIGKILL of a worker fails only its in-flight jobs; queued jobs wait for the restarted worker', async () => {
    const t = await startServer({ faults: { echo: 'slow:1500' } });
    await registerModel(t, 'url=echo&batch_size=2&max_batch_delay=0');
    const before = (await describeModel(t, 'echo')).workers[0];
    // Two jobs in flight on the worker (its cap: batch_size), two more waiting in the queue: which two are which is
    // the order the four concurrent requests reach the server in.
    const texts = ['t0', 't1', 't2', 't3'];
    const answers = await (async () => {
      const requests = texts.map((text) => predict(t, 'echo', text));
      await until(
        '2 queued behind 2 in flight',
        async () => (await describeModel(t, 'echo')).jobQueueStatus.pendingRequests === 2,
      );
      process.kill(before.pid, 'SIGKILL');
      return Promise.all(requests);
    })();
    const died = answers.filter((a) => a.status !== 200);
    expect(died).toHaveLength(2);
    for (const answer of died) {
      expect(answer).toMatchObject({
        status: 500,
        body: { code: 500, type: 'InternalServerException', message: 'Worker died.' },
      });
    }
    const after = (await describeModel(t, 'echo')).workers[0];
    expect(after.status).toBe('READY');
    expect(after.pid).not.toBe(before.pid);
    expect(after.id).not.toBe(before.id);
    answers.forEach((answer, i) => {
      if (answer.status !== 200) return;
      expect(answer.body).toEqual({ translated: texts[i] });
      expect(answer.headers.get('x-worker-id')).toBe(after.id);
    });
    const text = (await call(`${t.metrics}/metrics`)).body as string;
    expect(metricValue(text, 'mt_jobs_total', { model_name: 'echo', outcome: 'WORKER_DIED' })).toBe(2);
    expect(metricValue(text, 'mt_worker_deaths_total', {})).toBe(1);
  });

  it('a job past its response_timeout gets 504 and a worker that makes no progress is killed and replaced', async () => {
    const t = await startServer({ faults: { echo: 'hang-on-batch' } });
    await registerModel(t, 'url=echo&batch_size=1&response_timeout=1');
    const hung = (await describeModel(t, 'echo')).workers[0];
    const started = performance.now();
    const res = await predict(t, 'echo', 'stuck');
    expect(res).toMatchObject(
      errorAnswer(
        504,
        'RequestTimeoutException',
        'Request timed out: inference took longer than the response timeout (1000 ms); its work was cancelled.',
      ),
    );
    expect(performance.now() - started).toBeGreaterThanOrEqual(990);
    await until('the hung worker to be killed', () => !alive(hung.pid));
    const replacement = await until('a replacement worker', async () => {
      const w = (await describeModel(t, 'echo')).workers[0];
      return w?.status === 'READY' && w.pid !== hung.pid ? w : undefined;
    });
    expect(alive(replacement.pid)).toBe(true);
  });

  it('every job stuck on a worker recycled for no progress gets 504, also those whose deadline was later', async () => {
    const t = await startServer({ faults: { echo: 'hang-on-batch' } });
    await registerModel(t, 'url=echo&batch_size=4&response_timeout=1');
    // The first request hangs the worker; the next ones, 300 ms later (the age gap under test: the first is long
    // on the worker by then), reach it in a second batch and still have 300 ms of their deadline left when the
    // worker, silent for the response timeout since the first arrived, is recycled.
    const first = predict(t, 'echo', 'hangs');
    await new Promise((resolve) => setTimeout(resolve, 300));
    const later = ['l0', 'l1'].map((text) => predict(t, 'echo', text));
    const answers = await Promise.all([first, ...later]);
    expect(answers.map((a) => a.status)).toEqual([504, 504, 504]);
    expect(answers[0]!.body.message).toBe(
      'Request timed out: inference took longer than the response timeout (1000 ms); its work was cancelled.',
    );
    expect(answers[1]!.body).toEqual({
      code: 504,
      type: 'RequestTimeoutException',
      message: 'Request timed out: its worker made no progress for 1000 ms and was recycled.',
    });
  });

  it('a model unregistered while its job hangs the worker: the worker is still recycled, DELETE within response_timeout + 1 s', async () => {
    const t = await startServer({ faults: { echo: 'hang-on-batch' } });
    // The job waits max_batch_delay for company before it reaches the worker, so its own deadline passes (and the
    // DELETE, which waits for the queued jobs, takes the model off its engine) 300 ms before the worker has been
    // silent for the response timeout: the order under test.
    await registerModel(t, 'url=echo&batch_size=2&max_batch_delay=300&response_timeout=1');
    const hung = (await describeModel(t, 'echo')).workers[0];
    const answer = predict(t, 'echo', 'hangs');
    await until(
      'the job on the worker',
      async () => (await describeModel(t, 'echo')).jobQueueStatus.pendingRequests === 0,
    );
    const started = performance.now();
    const del = await call(`${t.management}/models/echo`, { method: 'DELETE' });
    const deleteMs = performance.now() - started;
    expect(del.status).toBe(200);
    expect((await answer).status).toBe(504);
    expect(alive(hung.pid)).toBe(false);
    // Not the worker's stop grace (3 s here) on top: the hang was seen as one, though its model was gone.
    expect(deleteMs).toBeLessThan(2_000);
  });

  it('a worker that crashes on a batch answers 500 "Worker died." and is restarted with backoff', async () => {
    const t = await startServer({ faults: { echo: 'crash-on-batch' } });
    await registerModel(t, 'url=echo');
    const first = (await describeModel(t, 'echo')).workers[0];
    expect(await predict(t, 'echo', 'poison')).toMatchObject({ status: 500, body: { message: 'Worker died.' } });
    await until('a restarted worker', async () => {
      const w = (await describeModel(t, 'echo')).workers[0];
      return w?.status === 'READY' && w.pid !== first.pid;
    });
    expect((await call(`${t.inference}/ping`)).body).toEqual({ status: 'Healthy' });
  });

  it('a lying worker (batch-done without the items) fails those items with 500, not a hang', async () => {
    const t = await startServer({ faults: { echo: 'skip-items' } });
    await registerModel(t, 'url=echo');
    expect(await predict(t, 'echo', 'lost')).toMatchObject({
      status: 500,
      body: { code: 500, type: 'InternalServerException', message: 'Worker did not answer every item of its batch.' },
    });
  });

  it('a handler whose inference throws answers 503 "Prediction failed" (TorchServe), and the worker lives on', async () => {
    const t = await startServer({ faults: { echo: 'fail-inference' } });
    await registerModel(t, 'url=echo');
    const pid = (await describeModel(t, 'echo')).workers[0].pid;
    expect(await predict(t, 'echo', 'boom')).toMatchObject({
      status: 503,
      body: { code: 503, type: 'ServiceUnavailableException', message: 'Prediction failed' },
    });
    expect((await describeModel(t, 'echo')).workers[0]).toMatchObject({ pid, status: 'READY' });
  });

  it('workers come from the injected factory: one that starts something else is a clean 500, not a hang', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-spawn-'));
    const impostor = path.join(dir, 'impostor.mjs');
    writeFileSync(impostor, 'process.exit(3);\n');
    try {
      const t = await startServer({ spawn: () => childConnection(fork(impostor, [], { stdio: 'ignore' })) });
      const res = await call(`${t.management}/models?url=echo`, { method: 'POST' });
      expect(res).toMatchObject(
        errorAnswer(500, 'InternalServerException', 'Failed to start workers for model echo version: 1.0'),
      );
      expect((await call(`${t.management}/models/echo`)).status).toBe(404);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a model whose workers fail to load → 500, it is unregistered again, other models keep serving', async () => {
    // An engine per model: only broken's workers fail.
    const t = await startServer({
      entries: ['echo', 'broken'],
      faults: { broken: 'fail-load' },
      config: { engineSharing: 'language' },
    });
    await registerModel(t, 'url=echo');
    const res = await call(`${t.management}/models?url=broken`, { method: 'POST' });
    expect(res).toMatchObject(
      errorAnswer(500, 'InternalServerException', 'Failed to start workers for model broken version: 1.0'),
    );
    expect((await call(`${t.management}/models/broken`)).status).toBe(404);
    expect(await predict(t, 'echo', 'still here')).toMatchObject({ status: 200, body: { translated: 'still here' } });
    expect((await call(`${t.inference}/ping`)).body).toEqual({ status: 'Healthy' });
  });

  it('/ping turns Unhealthy once a model’s workers have been failing past the threshold, and back when fixed', async () => {
    const t = await startServer({
      entries: ['echo', 'broken'],
      faults: { broken: 'fail-load' },
      config: { engineSharing: 'language' },
      timings: { unhealthyAfterMs: 300, backoffUnitMs: 20 },
    });
    await registerModel(t, 'url=echo');
    const res = await call(`${t.management}/models?url=broken&synchronous=false`, { method: 'POST' });
    expect(res).toMatchObject({ status: 202, body: { status: 'Processing worker updates...' } });
    const ping = await until('Unhealthy', async () => {
      const p = await call(`${t.inference}/ping`);
      return p.status === 500 ? p : undefined;
    });
    expect(ping.body).toEqual({ status: 'Unhealthy' });
    // A model that cannot be served refuses at once instead of queueing forever.
    expect(await predict(t, 'broken', 'x')).toMatchObject({
      status: 503,
      body: { type: 'ServiceUnavailableException' },
    });
    expect((await call(`${t.management}/models/broken`, { method: 'DELETE' })).status).toBe(200);
    expect(await call(`${t.inference}/ping`)).toMatchObject({ status: 200, body: { status: 'Healthy' } });
  });
});
