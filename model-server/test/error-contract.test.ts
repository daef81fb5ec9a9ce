/**
 * The error contract of the inference port (common/errors.ts): every error answer names its catalogue code in
 * `x-error-code`, and an inference error states in `x-reached-worker` whether any job of the request reached a
 * worker — the router retries on another replica only when none did. Real model server, real worker processes.
 */
import { describe, expect, it } from 'vitest';
import { until } from '../../harness/polling.js';
import { call } from '../../harness/http.js';
import { describeModel, startPerTest, type TestServer } from '../../harness/model-server.js';

describe('error answers carry their code and whether the request reached a worker', () => {
  let t: TestServer | undefined;
  const startServer = startPerTest();

  it('refusals before any job ran say so; a failure on a worker says it reached one', async () => {
    t = await startServer({ faults: { echo: 'fail-inference' } });
    const unknown = await call(`${t.inference}/predictions/nope`, { body: { src_lang: 'en', src_text: 'x' } });
    expect([unknown.status, unknown.headers.get('x-error-code'), unknown.headers.get('x-reached-worker')]).toEqual([
      404,
      'MODEL_NOT_FOUND',
      'false',
    ]);
    const notFound = await call(`${t.inference}/nothing-here`);
    expect([notFound.status, notFound.headers.get('x-error-code')]).toEqual([404, 'RESOURCE_NOT_FOUND']);
    expect((await call(`${t.management}/models?url=echo`, { method: 'POST' })).status).toBe(200);
    const failed = await call(`${t.inference}/predictions/echo`, { body: { src_lang: 'en', src_text: 'boom' } });
    expect([failed.status, failed.headers.get('x-error-code'), failed.headers.get('x-reached-worker')]).toEqual([
      503,
      'PREDICTION_FAILED',
      'true',
    ]);
  });

  it('a document refused part way (shutdown after its first sentence ran) says it reached a worker', async () => {
    t = await startServer({ faults: { echo: 'slow:1500' } });
    const reg = await call(`${t.management}/models?url=echo&batch_size=1&max_batch_delay=0`, { method: 'POST' });
    expect(reg.status).toBe(200);
    const server = t;
    const predict = (src_text: string | string[]) =>
      call(`${server.inference}/predictions/echo`, { body: { src_lang: 'en', src_text } });
    const document = predict(['ran', 'queued', 'queued too']);
    await until(
      'one sentence on the worker, two queued',
      async () => (await describeModel(server, 'echo')).jobQueueStatus.pendingRequests === 2,
    );
    const single = predict('queued alone');
    await until(
      'the single sentence queued too',
      async () => (await describeModel(server, 'echo')).jobQueueStatus.pendingRequests === 3,
    );
    const closing = t.server.manager.close(100);
    const [doc, alone] = await Promise.all([document, single]);
    await closing;
    expect(doc.status).toBeGreaterThanOrEqual(500);
    expect(doc.headers.get('x-reached-worker')).toBe('true');
    expect([alone.status, alone.headers.get('x-error-code'), alone.headers.get('x-reached-worker')]).toEqual([
      503,
      'SHUTTING_DOWN',
      'false',
    ]);
  });
});
