import { describe, expect, it } from 'vitest';
import { call, metricValue } from '../../harness/http.js';
import {
  metricsText,
  registerModel,
  startPerTest,
  type TestServer,
  type TestServerOptions,
} from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

const predict = (t: TestServer, model: string, body: unknown, headers?: Record<string, string>) =>
  call(`${t.inference}/predictions/${model}`, { body, ...(headers ? { headers } : {}) });

describe('batching (real server, real workers)', () => {
  const start = startPerTest();
  // Batching is the frontend's: the worker loop runs in this process (harness/in-process-worker.ts).
  const startServer = (options: TestServerOptions = {}) => start({ workers: 'in-process', ...options });

  it('64 concurrent requests to batch_size 64 arrive at the worker as ONE batch (torchserve policy)', async () => {
    const t = await startServer({ config: { batchPolicy: 'torchserve' } });
    await registerModel(t, 'url=echo&batch_size=64&max_batch_delay=30000');
    const first = Array.from({ length: 63 }, (_, i) => predict(t, 'echo', { src_lang: 'en', src_text: `t${i}` }));
    // All 63 wait for company: describe shows them queued (the window is 30 s, so nothing has left).
    await until('63 queued jobs', async () => {
      const d = (await call(`${t.management}/models/echo`)).body[0];
      return d.jobQueueStatus.pendingRequests === 63 && d.jobQueueStatus.remainingCapacity === 4096 - 63;
    });
    const last = predict(t, 'echo', { src_lang: 'en', src_text: 't63' });
    const answers = await Promise.all([...first, last]);
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, body: { translated: `t${i}` } }));
    const text = await metricsText(t);
    const labels = { model_name: 'echo', model_version: '1.0' };
    expect(metricValue(text, 'mt_batch_size_count', labels)).toBe(1);
    expect(metricValue(text, 'mt_batch_size_sum', labels)).toBe(64);
    expect(metricValue(text, 'mt_requests_total', { ...labels, code: '200' })).toBe(64);
    expect(metricValue(text, 'ts_inference_requests_total', labels)).toBe(64);
    expect(metricValue(text, 'mt_queue_depth', labels)).toBe(0);
  });

  it('a lone request is answered within max_batch_delay plus a small margin, not before the window closes', async () => {
    const t = await startServer({ config: { batchPolicy: 'torchserve' } });
    await registerModel(t, 'url=echo&batch_size=64&max_batch_delay=200');
    await predict(t, 'echo', { src_text: 'warm-up' });
    const labels = { model_name: 'echo', model_version: '1.0' };
    const queuedBefore = metricValue(await metricsText(t), 'mt_queue_wait_seconds_sum', labels)!;
    const started = performance.now();
    // The server runs on this event loop: a 200 ms timer armed beside the request says how late a stall of this
    // process (a loaded machine, a collection) made the window's own timer, which is no fault of the batcher's.
    const lateMs = new Promise<number>((resolve) =>
      setTimeout(() => resolve(Math.max(0, performance.now() - started - 200)), 200),
    );
    const res = await predict(t, 'echo', { src_lang: 'ko', src_text: 'alone' });
    const elapsed = performance.now() - started;
    const late = await lateMs;
    expect(res).toMatchObject({ status: 200, body: { translated: 'alone' } });
    // In the server: the job left its queue when its window closed, 200 ms after it arrived.
    const queuedS = metricValue(await metricsText(t), 'mt_queue_wait_seconds_sum', labels)! - queuedBefore;
    expect(queuedS).toBeGreaterThanOrEqual(0.2);
    expect(queuedS).toBeLessThan(0.2 + 0.1 + late / 1000);
    // At the client: the window plus a round trip; the margin allows for a loaded shared CI machine.
    expect(elapsed).toBeGreaterThanOrEqual(195);
    expect(elapsed).toBeLessThan(200 + 300 + late);
  });

  it('two concurrent requests with batch_size 2 and a long delay arrive in one batch (TorchServe test)', async () => {
    const t = await startServer({ config: { batchPolicy: 'torchserve' } });
    await registerModel(t, 'url=echo&batch_size=2&max_batch_delay=30000');
    // One good and one bad input in the same batch: the bad one fails alone (pytorch/serve#1329).
    const [good, bad] = await Promise.all([
      predict(t, 'echo', { src_text: 'ok' }),
      predict(t, 'echo', { src_text: 5 }),
    ]);
    expect(good).toMatchObject({ status: 200, body: { translated: 'ok' } });
    expect(bad).toMatchObject({
      status: 400,
      body: { code: 400, type: 'BadRequestException', message: 'src_text must be a string.' },
    });
    const labels = { model_name: 'echo', model_version: '1.0' };
    // The worker reports the batch's end after its items, so the clients can have their answers first.
    const text = await until('the batch reported', async () => {
      const scraped = await metricsText(t);
      return metricValue(scraped, 'mt_batch_size_count', labels) === undefined ? undefined : scraped;
    });
    expect(metricValue(text, 'mt_batch_size_count', labels)).toBe(1);
    expect(metricValue(text, 'mt_batch_size_sum', labels)).toBe(2);
    expect(metricValue(text, 'mt_jobs_total', { ...labels, outcome: 'BAD_REQUEST' })).toBe(1);
  });

  it('a full queue answers 503 with Retry-After, distinct from "no worker", and every accepted job is answered', async () => {
    const t = await startServer({ config: { batchPolicy: 'torchserve', jobQueueSize: 8 } });
    await registerModel(t, 'url=echo&batch_size=64&max_batch_delay=1500');
    const accepted = Array.from({ length: 6 }, (_, i) => predict(t, 'echo', { src_text: `a${i}` }));
    await until(
      '6 queued',
      async () => (await call(`${t.management}/models/echo`)).body[0].jobQueueStatus.pendingRequests === 6,
    );
    // An array of 3 does not fit in the 2 places left: refused whole, nothing of it enqueued.
    const refusedArray = await predict(t, 'echo', { src_text: ['x', 'y', 'z'] });
    expect(refusedArray.status).toBe(503);
    // An array that could never fit is not worth retrying: 413, not 503.
    expect(await predict(t, 'echo', { src_text: Array.from({ length: 9 }, () => 'z') })).toMatchObject({
      status: 413,
      body: { code: 413, type: 'RequestEntityTooLargeException', message: expect.stringMatching(/9 texts.*at most 8/) },
    });
    const fits = predict(t, 'echo', { src_text: ['b0', 'b1'] });
    await until(
      '8 queued',
      async () => (await call(`${t.management}/models/echo`)).body[0].jobQueueStatus.pendingRequests === 8,
    );
    const refused = await predict(t, 'echo', { src_text: 'one too many' });
    expect(refused.status).toBe(503);
    expect(refused.body).toEqual({
      code: 503,
      type: 'ServiceUnavailableException',
      message: 'Job queue of model echo is full (8 jobs), retry later.',
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    // Refusals are counted too: the 503 rate is what an operator alerts on.
    const refusals = metricValue(await metricsText(t), 'mt_requests_total', { model_name: 'echo', code: '503' });
    expect(refusals).toBe(2);
    const answers = await Promise.all(accepted);
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, body: { translated: `a${i}` } }));
    expect(await fits).toMatchObject({ status: 200, body: { translated: ['b0', 'b1'] } });

    // No worker is a different 503.
    await call(`${t.management}/models/echo?min_worker=0&synchronous=true`, { method: 'PUT' });
    const noWorker = await predict(t, 'echo', { src_text: 'x' });
    expect(noWorker).toMatchObject({
      status: 503,
      body: {
        code: 503,
        type: 'ServiceUnavailableException',
        message: 'No worker is available for model echo version 1.0.',
      },
    });
    expect(noWorker.headers.get('retry-after')).toBeNull();
  });

  it('unregistering a model finishes its queued jobs before it answers', async () => {
    const t = await startServer({ config: { batchPolicy: 'torchserve' } });
    await registerModel(t, 'url=echo&batch_size=64&max_batch_delay=30000');
    const queued = ['u0', 'u1', 'u2'].map((text) => predict(t, 'echo', { src_text: text }));
    await until(
      '3 queued',
      async () => (await call(`${t.management}/models/echo`)).body[0].jobQueueStatus.pendingRequests === 3,
    );
    const gone = await call(`${t.management}/models/echo`, { method: 'DELETE' });
    expect(gone).toMatchObject({ status: 200, body: { status: 'Model "echo" unregistered' } });
    const answers = await Promise.all(queued);
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, body: { translated: `u${i}` } }));
    expect((await predict(t, 'echo', { src_text: 'late' })).status).toBe(404);
  });

  it('splits src_text arrays into jobs and answers in order; says who served in headers', async () => {
    const t = await startServer({
      setupConfig: { cuda_id: { ko: '0', ru: '1' } },
      entries: ['ko', 'ru'],
      cuda: { gpus: [0], unavailableReason: undefined },
    });
    await registerModel(t, 'url=ko&batch_size=4&max_batch_delay=5');
    await registerModel(t, 'url=ru&batch_size=4&max_batch_delay=5');
    const texts = Array.from({ length: 10 }, (_, i) => `s${i}`);
    const ko = await predict(t, 'ko', { src_lang: 'en', src_text: texts });
    expect(ko.status).toBe(200);
    expect(ko.body).toEqual({ translated: texts });
    expect(ko.headers.get('x-model-name')).toBe('ko');
    expect(ko.headers.get('x-model-version')).toBe('1.0');
    expect(ko.headers.get('x-device')).toBe('cuda:0');
    expect(ko.headers.get('x-device-fallback')).toBeNull();
    // A model on a GPU gets GPU_WORKERS processes (auto: 2 on CUDA); the array's jobs may go to either.
    expect(ko.headers.get('x-worker-id')).toMatch(/^\d+(,\d+)?$/);
    expect((await call(`${t.management}/models/ko`)).body[0].workers).toHaveLength(2);
    // GPU 1 is not on this "host": ru runs on the CPU and says why.
    const ru = await predict(t, 'ru', { src_lang: 'en', src_text: 'x' });
    expect(ru.headers.get('x-device')).toBe('cpu');
    expect(ru.headers.get('x-device-fallback')).toBe('cuda:1 requested; this host has GPU 0 only');
    const d = (await call(`${t.management}/models/ru`)).body[0];
    expect(d.workers[0]).toMatchObject({
      gpu: false,
      device: 'cpu',
      deviceFallback: 'cuda:1 requested; this host has GPU 0 only',
    });
    expect((await call(`${t.management}/models/ko`)).body[0].workers[0]).toMatchObject({ gpu: true, device: 'cuda:0' });

    expect(await predict(t, 'ko', { src_text: [] })).toMatchObject({
      status: 400,
      body: { message: 'src_text must not be an empty array.' },
    });
    expect(await predict(t, 'ko', { src_text: ['a', 7] })).toMatchObject({
      status: 400,
      body: { message: 'src_text[1] must be a string.' },
    });
    const invalidUtf8 = await fetch(`${t.inference}/predictions/ko`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: Buffer.concat([Buffer.from('{"src_text":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
    });
    expect(invalidUtf8.status).toBe(400);
    expect(await invalidUtf8.json()).toEqual({
      code: 400,
      type: 'BadRequestException',
      message: 'Request body is not valid UTF-8.',
    });
    expect(await call(`${t.inference}/predictions/ko`, { body: '{not json' })).toMatchObject({
      status: 400,
      body: {
        code: 400,
        type: 'BadRequestException',
        message: expect.stringMatching(/^Request body is not valid JSON: /),
      },
    });
    expect(await predict(t, 'nope', { src_text: 'x' })).toMatchObject({
      status: 404,
      body: { code: 404, type: 'ModelNotFoundException', message: 'Model not found: nope' },
    });
  });

  it('languages pinned to one device share one engine; ENGINE_SHARING=language gives one each', async () => {
    const setupConfig = { cuda_id: { ko: '0', en: '0', ru: '1' } };
    for (const engineSharing of ['device', 'language'] as const) {
      const t = await startServer({ setupConfig, entries: ['ko', 'en', 'ru'], config: { engineSharing } });
      for (const m of ['ko', 'en', 'ru']) await registerModel(t, `url=${m}`);
      const workers = new Set<string>();
      for (const m of ['ko', 'en', 'ru']) {
        const d = (await call(`${t.management}/models/${m}`)).body[0];
        // No CUDA on the test host: every language falls back to the CPU, with the reason.
        expect(d.engine.deviceFallback).toMatch(/^cuda:[01] requested; no GPU on the test host$/);
        workers.add(d.workers[0].id);
      }
      // All CPU-fallback languages share ONE CPU engine, whichever GPU they asked for.
      expect(workers.size).toBe(engineSharing === 'device' ? 1 : 3);
      await t.close();
    }
  });
});
