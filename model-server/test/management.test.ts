import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveModels } from '../tools/archiver.js';
import { HANDLER_NAMES } from '../worker/handlers/index.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { alive } from '../../harness/processes.js';
import { until } from '../../harness/polling.js';

describe('management API (real server, real workers)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({ entries: ['echo', 'other'] });
    // A second version of "echo" in its own store entry.
    archiveModels({ modelDir: t.modelDir, store: t.store, names: ['echo'], handler: 'echo', version: '2.0' });
  });
  afterAll(() => t?.close());

  it('register → describe → scale → unregister', async () => {
    const reg = await call(`${t.management}/models?url=other&batch_size=8&max_batch_delay=20&initial_workers=1`, {
      method: 'POST',
    });
    expect(reg).toMatchObject({
      status: 200,
      body: { status: 'Model "other" Version: 1.0 registered with 1 initial workers' },
    });

    const described = await call(`${t.management}/models/other`);
    expect(described.status).toBe(200);
    expect(Array.isArray(described.body)).toBe(true);
    const d = described.body[0];
    expect(d).toMatchObject({
      modelName: 'other',
      modelVersion: '1.0',
      modelUrl: 'other',
      runtime: 'node',
      minWorkers: 1,
      maxWorkers: 1,
      batchSize: 8,
      maxBatchDelay: 20,
      responseTimeout: 120,
      loadedAtStartup: false,
      handler: 'echo',
      jobQueueStatus: { remainingCapacity: 4096, pendingRequests: 0 },
    });
    expect(d.workers).toHaveLength(1);
    expect(d.workers[0]).toMatchObject({ status: 'READY', gpu: false, gpuUsage: 'N/A', device: 'cpu' });
    expect(d.workers[0].memoryUsage).toBeGreaterThan(0);
    expect(alive(d.workers[0].pid)).toBe(true);
    expect(Date.parse(d.workers[0].startTime)).not.toBeNaN();

    const up = await call(`${t.management}/models/other?min_worker=2&max_worker=2&synchronous=true`, { method: 'PUT' });
    expect(up).toMatchObject({ status: 200, body: { status: 'Workers scaled to 2 for model: other' } });
    const two = (await call(`${t.management}/models/other`)).body[0];
    expect(two.workers.map((w: { status: string }) => w.status)).toEqual(['READY', 'READY']);

    const down = await call(`${t.management}/models/other?min_worker=1`, { method: 'PUT' });
    expect(down).toMatchObject({ status: 202, body: { status: 'Processing worker updates...' } });
    const retired = two.workers[1].pid as number;
    await until('the scaled-away worker to exit', () => !alive(retired));

    const gone = await call(`${t.management}/models/other`, { method: 'DELETE' });
    expect(gone).toMatchObject({ status: 200, body: { status: 'Model "other" unregistered' } });
    expect(await call(`${t.management}/models/other`)).toMatchObject({
      status: 404,
      body: { code: 404, type: 'ModelNotFoundException', message: 'Model not found: other' },
    });
    await until('the unregistered model’s worker to exit', () => !alive(two.workers[0].pid));
  });

  it('registers from a JSON body, lists with pagination, handles versions and set-default', async () => {
    const v1 = await call(`${t.management}/models`, { body: { url: 'echo', batch_size: 4, synchronous: true } });
    expect(v1.status).toBe(200);
    // The 2.0 entry overwrote the store entry "echo"; register 1.0 first, so write it back between.
    expect((await call(`${t.management}/models/echo`)).body[0].modelVersion).toBe('2.0');
    archiveModels({ modelDir: t.modelDir, store: t.store, names: ['echo'], handler: 'echo', version: '1.0' });
    const v2 = await call(`${t.management}/models?url=echo`, { method: 'POST' });
    expect(v2).toMatchObject({
      status: 200,
      body: { status: 'Model "echo" Version: 1.0 registered with 1 initial workers' },
    });
    expect(await call(`${t.management}/models?url=echo`, { method: 'POST' })).toMatchObject({
      status: 409,
      body: {
        code: 409,
        type: 'ConflictStatusException',
        message: 'Model version 1.0 is already registered for model echo',
      },
    });

    const all = await call(`${t.management}/models/echo/all`);
    expect(all.body.map((d: { modelVersion: string }) => d.modelVersion).sort()).toEqual(['1.0', '2.0']);
    expect((await call(`${t.management}/models/echo/1.0`)).body[0].modelVersion).toBe('1.0');
    expect(await call(`${t.management}/models/echo/3.0`)).toMatchObject({
      status: 404,
      body: {
        code: 404,
        type: 'ModelVersionNotFoundException',
        message: 'Model version: 3.0 does not exist for model: echo',
      },
    });

    // The first registered version is the default; set-default moves it.
    let p = await call(`${t.inference}/predictions/echo`, { body: { src_text: 'x' } });
    expect(p.headers.get('x-model-version')).toBe('2.0');
    const setDefault = await call(`${t.management}/models/echo/1.0/set-default`, { method: 'PUT' });
    expect(setDefault).toMatchObject({
      status: 200,
      body: { status: 'Default version successfully updated for model "echo" to "1.0"' },
    });
    p = await call(`${t.inference}/predictions/echo`, { body: { src_text: 'x' } });
    expect(p.headers.get('x-model-version')).toBe('1.0');
    p = await call(`${t.inference}/predictions/echo/2.0`, { body: { src_text: 'x' } });
    expect(p.headers.get('x-model-version')).toBe('2.0');
    expect(await call(`${t.inference}/predictions/echo/9.9`, { body: { src_text: 'x' } })).toMatchObject({
      status: 404,
      body: { message: 'Model version: 9.9 does not exist for model: echo' },
    });

    await call(`${t.management}/models?url=other&initial_workers=0`, { method: 'POST' });
    const page1 = await call(`${t.management}/models?limit=1`);
    expect(page1.body).toEqual({ models: [{ modelName: 'echo', modelUrl: 'echo' }], nextPageToken: '1' });
    const page2 = await call(`${t.management}/models?limit=1&next_page_token=1`);
    expect(page2.body).toEqual({ models: [{ modelName: 'other', modelUrl: 'other' }] });

    // Unregister one version: the other stays and becomes the default.
    expect((await call(`${t.management}/models/echo/1.0`, { method: 'DELETE' })).status).toBe(200);
    expect((await call(`${t.management}/models/echo`)).body[0].modelVersion).toBe('2.0');
    expect((await call(`${t.management}/models/echo`, { method: 'DELETE' })).status).toBe(200);
    expect((await call(`${t.management}/models/other`, { method: 'DELETE' })).status).toBe(200);
  });

  // shared/TORCHSERVE.md: "Its own API tests worth reproducing", plus our parameter checks.
  const BAD = [400, 'BadRequestException'];
  const NOT_ALLOWED = [
    405,
    'MethodNotAllowedException',
    'Requested method is not allowed, please refer to API document.',
  ];
  const NO_RESOURCE = [
    404,
    'ResourceNotFoundException',
    'Requested resource is not found, please refer to API document.',
  ];
  it.each([
    ['POST', '/models', ...BAD, 'Parameter url is required.'],
    ['POST', '/models/echo/1.0', ...NOT_ALLOWED],
    ['GET', '/models/echo/1.0/set-default', ...NOT_ALLOWED],
    ['GET', '/models/a/b/c', ...NO_RESOURCE],
    ['POST', '/models?url=echo&runtime=python', ...BAD, 'Invalid RuntimeType value: python'],
    ['POST', '/models?url=', 404, 'ModelNotFoundException', 'Model not found at: '],
    ['POST', '/models?url=missing', 404, 'ModelNotFoundException', 'Model not found at: missing'],
    ['POST', '/models?url=..', ...BAD, 'Parameter url must name an entry of the model store, got: ..'],
    [
      'POST',
      '/models?url=../store/echo',
      ...BAD,
      'Parameter url must name an entry of the model store, got: ../store/echo',
    ],
    [
      'POST',
      '/models?url=%2Fetc%2Fpasswd',
      ...BAD,
      'Parameter url must name an entry of the model store, got: /etc/passwd',
    ],
    [
      'POST',
      '/models?url=https%3A%2F%2Fexample.com%2Fm.mar',
      ...BAD,
      'Parameter url must name an entry of the model store, got: https://example.com/m.mar',
    ],
    [
      'POST',
      '/models?url=echo&batch_size=0',
      ...BAD,
      'Invalid value for parameter batch_size: "0" (expected an integer from 1 to 1024).',
    ],
    [
      'POST',
      '/models?url=echo&max_batch_delay=-1',
      ...BAD,
      'Invalid value for parameter max_batch_delay: "-1" (expected an integer from 0 to 600000).',
    ],
    [
      'POST',
      '/models?url=echo&initial_workers=x',
      ...BAD,
      'Invalid value for parameter initial_workers: "x" (expected an integer from 0 to 64).',
    ],
    [
      'POST',
      '/models?url=echo&response_timeout=0',
      ...BAD,
      'Invalid value for parameter response_timeout: "0" (expected an integer from 1 to 86400).',
    ],
    [
      'POST',
      '/models?url=echo&synchronous=maybe',
      ...BAD,
      'Invalid value for parameter synchronous: "maybe" (expected true or false).',
    ],
    [
      'POST',
      '/models?url=echo&handler=nope',
      ...BAD,
      `Parameter handler must be one of ${HANDLER_NAMES.join(', ')}, got: nope`,
    ],
    ['POST', '/models?url=echo&model_name=..bad', ...BAD, 'Invalid model name: ..bad'],
    ['PUT', '/models/nope?min_worker=1', 404, 'ModelNotFoundException', 'Model not found: nope'],
    ['PUT', '/models/nope?min_worker=3&max_worker=1', ...BAD, 'max_worker cannot be less than min_worker.'],
    [
      'PUT',
      '/models/nope?min_worker=-1',
      ...BAD,
      'Invalid value for parameter min_worker: "-1" (expected an integer from 0 to 64).',
    ],
    ['GET', '/models/nope', 404, 'ModelNotFoundException', 'Model not found: nope'],
    ['GET', '/models/nope/1.0', 404, 'ModelNotFoundException', 'Model not found: nope'],
    ['DELETE', '/models/nope', 404, 'ModelNotFoundException', 'Model not found: nope'],
    ['GET', '/', ...NOT_ALLOWED],
    ['PATCH', '/models', ...NOT_ALLOWED],
    ['GET', '/nothing/here', ...NO_RESOURCE],
  ])('%s %s → %i %s', async (method, path, status, type, message) => {
    const res = await call(`${t.management}${path}`, { method });
    expect(res.body).toEqual({ code: status, type, message });
    expect(res.status).toBe(status);
    expect(res.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('lists with limit=-1 or a large next_page_token answer 200', async () => {
    expect((await call(`${t.management}/models?limit=-1`)).status).toBe(200);
    expect(await call(`${t.management}/models?next_page_token=100000`)).toMatchObject({
      status: 200,
      body: { models: [] },
    });
  });

  it('answers OPTIONS / with an OpenAPI document on every port', async () => {
    for (const base of [t.inference, t.management, t.metrics]) {
      const res = await call(`${base}/`, { method: 'OPTIONS' });
      expect(res.status).toBe(200);
      expect(res.body.openapi).toMatch(/^3\./);
      expect(Object.keys(res.body.paths).length).toBeGreaterThan(1);
    }
    expect((await call(`${t.inference}/`)).status).toBe(405);
  });

  it('reuses a valid incoming x-request-id and replaces an invalid one', async () => {
    const kept = await call(`${t.management}/models`, { headers: { 'x-request-id': 'router-7f3a.1' } });
    expect(kept.headers.get('x-request-id')).toBe('router-7f3a.1');
    const replaced = await call(`${t.management}/models`, { headers: { 'x-request-id': 'bad id with spaces' } });
    expect(replaced.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    const error = await call(`${t.inference}/predictions/nope`, { body: {}, headers: { 'x-request-id': 'abc-1' } });
    expect(error.status).toBe(404);
    expect(error.headers.get('x-request-id')).toBe('abc-1');
  });

  it('refuses a body over max_request_size with 413 on every port, declared or chunked', async () => {
    const big = 'x'.repeat(6_553_501);
    const tooLarge = {
      code: 413,
      type: 'RequestEntityTooLargeException',
      message: 'Request body is larger than 6553500 bytes.',
    };
    for (const url of [`${t.inference}/predictions/echo`, `${t.management}/models`, `${t.metrics}/metrics`]) {
      const res = await call(url, { method: 'POST', body: big });
      expect(res).toMatchObject({ status: 413, body: tooLarge });
    }
    // Without a Content-Length (chunked), counted as it streams: over the limit refused, under it let through (to
    // the route, which knows no model `nope`).
    const chunked = (text: string) =>
      fetch(`${t.inference}/predictions/nope`, {
        method: 'POST',
        body: new ReadableStream({
          start(controller) {
            for (let at = 0; at < text.length; at += 1 << 20)
              controller.enqueue(Buffer.from(text.slice(at, at + (1 << 20))));
            controller.close();
          },
        }),
        duplex: 'half',
      } as RequestInit);
    const over = await chunked(big);
    expect({ status: over.status, body: await over.json() }).toEqual({ status: 413, body: tooLarge });
    const under = await chunked(JSON.stringify({ text: 'small' }));
    expect({ status: under.status, body: await under.json() }).toMatchObject({
      status: 404,
      body: { type: 'ModelNotFoundException' },
    });
  });
});
