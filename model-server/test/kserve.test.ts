/**
 * The Open Inference Protocol (KServe v2) on the inference port, against real servers and worker processes: the
 * health, metadata and inference routes, the protocol's published examples (errors included), Triton's binary
 * tensor data, overload and timeout answers, and a round trip through the generated tiny M2M100 whose translations
 * must be what `/predictions` answers.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeBytesElements, encodeBytesElements } from '../http/open-inference.js';
import { call, metricValue, OPEN_INFERENCE_SPEC_EXAMPLE } from '../../harness/http.js';
import {
  startPerTest,
  startTestServer,
  startTinyTranslationServer,
  type TestServer,
  withTokenServer,
} from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

const register = (t: TestServer, query: string) => call(`${t.management}/models?${query}`, { method: 'POST' });
const texts = (data: string[]) => ({ name: 'text', datatype: 'BYTES', shape: [data.length], data });
const lang = (code: string) => ({ name: 'src_lang', datatype: 'BYTES', shape: [1], data: [code] });
const infer = (t: TestServer, model: string, body: unknown) =>
  call(`${t.inference}/v2/models/${model}/infer`, { body });

// In order: the first test registers the echo model the others call.
describe('Open Inference Protocol routes (echo models, real workers)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer({
      entries: ['echo', 'fr'],
      faults: { fr: 'fail-load' },
      config: { engineSharing: 'language' }, // an engine per model: only fr's workers fail
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('server live at once; server ready only once every registered model has a ready worker', async () => {
    expect(await call(`${t.inference}/v2/health/live`)).toMatchObject({ status: 200, body: { live: true } });
    // kserve docs/predict-api/v2/required_api.md, Health: "200 ... indicates true and a 4xx ... indicates false".
    expect(await call(`${t.inference}/v2/health/ready`)).toMatchObject({
      status: 400,
      body: { error: 'Server is not ready: no model is registered' },
    });
    expect((await register(t, 'url=echo')).status).toBe(200);
    // fr's workers fail to load (injected fault) and keep restarting: registered, never ready.
    expect((await register(t, 'url=fr&synchronous=false')).status).toBe(202);
    expect(await call(`${t.inference}/v2/models/echo/ready`)).toMatchObject({
      status: 200,
      body: { name: 'echo', ready: true },
    });
    const notReady = { error: 'Model fr version 1.0 is not ready: no worker has loaded it yet' };
    expect(await call(`${t.inference}/v2/models/fr/ready`)).toMatchObject({ status: 400, body: notReady });
    expect(await call(`${t.inference}/v2/models/fr/versions/1.0/ready`)).toMatchObject({ status: 400, body: notReady });
    expect((await call(`${t.inference}/v2/health/ready`)).body).toEqual({
      error: 'Server is not ready: 1 of 2 models are not ready',
    });
    await call(`${t.management}/models/fr?min_worker=0&synchronous=true`, { method: 'PUT' });
    expect((await call(`${t.inference}/v2/models/fr/ready`)).body).toEqual({
      error: 'Model fr version 1.0 is not ready: it has no workers (scaled to 0)',
    });
    expect((await call(`${t.management}/models/fr`, { method: 'DELETE' })).status).toBe(200);
    expect(await call(`${t.inference}/v2/health/ready`)).toMatchObject({ status: 200, body: { ready: true } });
    expect(await call(`${t.inference}/v2/models/echo/versions/1.0/ready`)).toMatchObject({
      status: 200,
      body: { name: 'echo', ready: true },
    });
  });

  it('server and model metadata in the shapes inference_rest.md defines', async () => {
    // $metadata_server_response = {name, version, extensions}.
    expect(await call(`${t.inference}/v2`)).toMatchObject({
      status: 200,
      body: { name: 'mt-serve', version: expect.stringMatching(/^\d+\.\d+\.\d+/), extensions: ['binary_tensor_data'] },
    });
    // $metadata_model_response = {name, versions, platform, inputs, outputs}, variable dimensions as -1.
    const expected = {
      name: 'echo',
      versions: ['1.0'],
      platform: 'mt-serve_echo',
      inputs: [
        { name: 'text', datatype: 'BYTES', shape: [-1] },
        { name: 'src_lang', datatype: 'BYTES', shape: [1] },
      ],
      outputs: [
        { name: 'translated', datatype: 'BYTES', shape: [-1] },
        { name: 'detected_src_lang', datatype: 'BYTES', shape: [-1] },
      ],
    };
    expect(await call(`${t.inference}/v2/models/echo`)).toMatchObject({ status: 200, body: expected });
    expect((await call(`${t.inference}/v2/models/echo/versions/1.0`)).body).toEqual(expected);
  });

  it('errors: 404 for an unknown model, version or route, 405 for a wrong method, all as {"error"}', async () => {
    const cases: [string, string, number, string][] = [
      ['GET', '/v2/models/xx', 404, 'Model not found: xx'],
      ['GET', '/v2/models/xx/ready', 404, 'Model not found: xx'],
      ['POST', '/v2/models/xx/infer', 404, 'Model not found: xx'],
      ['GET', '/v2/models/echo/versions/9.9', 404, 'Model version: 9.9 does not exist for model: echo'],
      ['POST', '/v2/models/echo/versions/9.9/infer', 404, 'Model version: 9.9 does not exist for model: echo'],
      ['GET', '/v2/repository/index', 404, 'Requested resource is not found, please refer to API document.'],
      ['GET', '/v2/models/echo/infer', 405, 'Requested method is not allowed, please refer to API document.'],
      ['POST', '/v2/health/ready', 405, 'Requested method is not allowed, please refer to API document.'],
    ];
    for (const [method, route, status, error] of cases) {
      const res = await call(`${t.inference}${route}`, { method, ...(method === 'POST' ? { body: {} } : {}) });
      expect({ route, status: res.status, body: res.body }).toEqual({ route, status, body: { error } });
      expect(res.headers.get('x-request-id')).toBeTruthy();
    }
    // TorchServe's routes keep TorchServe's shape.
    expect((await call(`${t.inference}/predictions/xx`, { body: {} })).body).toEqual({
      code: 404,
      type: 'ModelNotFoundException',
      message: 'Model not found: xx',
    });
  });

  it('the spec\'s example request and a bad tensor: 400 {"error"}, counted like any other request', async () => {
    expect(await infer(t, 'echo', OPEN_INFERENCE_SPEC_EXAMPLE)).toMatchObject({
      status: 400,
      body: { error: 'Unexpected input "input0": this model takes "text" and "src_lang".' },
    });
    expect(await infer(t, 'echo', { inputs: [{ ...texts(['a', 'b']), shape: [3] }, lang('en')] })).toMatchObject({
      status: 400,
      body: { error: 'Input "text" has shape [3] (3 elements) but 2 data elements.' },
    });
    expect(await call(`${t.inference}/v2/models/echo/infer`, { body: '{"inputs": [' })).toMatchObject({
      status: 400,
      body: { error: expect.stringMatching(/^Request body is not valid JSON: /) },
    });
    const metrics = (await call(`${t.metrics}/metrics`)).body as string;
    expect(metricValue(metrics, 'mt_requests_total', { model_name: 'echo', code: '400' })).toBe(3);
  });

  it('infers: the id comes back, the outputs asked for, the shape of the texts, and who served', async () => {
    const res = await infer(t, 'echo', {
      id: 'req-7',
      parameters: { src_lang: 'en' },
      inputs: [{ name: 'text', datatype: 'BYTES', shape: [2, 1], data: [['One.'], ['Two.']] }],
      outputs: [{ name: 'translated' }],
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    // The shape of the spec's example response: {id, outputs: [{name, shape, datatype, data}]}, plus model_name.
    expect(res.body).toEqual({
      model_name: 'echo',
      model_version: '1.0',
      id: 'req-7',
      outputs: [{ name: 'translated', datatype: 'BYTES', shape: [2, 1], data: ['One.', 'Two.'] }],
    });
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-model-name')).toBe('echo');
    expect(res.headers.get('x-worker-id')).toMatch(/^\d+$/);
    const versioned = await call(`${t.inference}/v2/models/echo/versions/1.0/infer`, {
      body: { inputs: [lang('en'), texts(['Three.'])] },
    });
    expect(versioned.body).toEqual({
      model_name: 'echo',
      model_version: '1.0',
      outputs: [{ name: 'translated', datatype: 'BYTES', shape: [1], data: ['Three.'] }],
    });
  });

  it('OPTIONS / documents every /v2 route, and each documented one is answered', async () => {
    const doc = (await call(`${t.inference}/`, { method: 'OPTIONS' })).body;
    const routes = Object.entries(doc.paths as Record<string, object>)
      .filter(([route]) => route.startsWith('/v2'))
      .flatMap(([route, ops]) => Object.keys(ops).map((method) => [method.toUpperCase(), route] as const));
    expect(routes).toHaveLength(9);
    for (const [method, route] of routes) {
      const url = route.replace('{model_name}', 'echo').replace('{model_version}', '1.0');
      const body = { inputs: [texts(['doc']), lang('en')] };
      const res = await call(`${t.inference}${url}`, { method, ...(method === 'POST' ? { body } : {}) });
      expect({ route, status: res.status }).toEqual({ route, status: 200 });
    }
  });

  it("Triton's binary tensor data, laid out as tritonclient.http sends it: inputs and outputs after the JSON header", async () => {
    // As triton-inference-server/client tritonclient/http/_utils.py `_get_inference_request` builds it with default
    // arguments: every input binary (set_data_from_numpy), no outputs named, so binary_data_output is set.
    const textBlob = encodeBytesElements(['Grüße.', '世界.']);
    const langBlob = encodeBytesElements(['en']);
    const binaryInput = (name: string, shape: number[], blob: Uint8Array) => ({
      name,
      shape,
      datatype: 'BYTES',
      parameters: { binary_data_size: blob.length },
    });
    const header = Buffer.from(
      JSON.stringify({
        inputs: [binaryInput('text', [2], textBlob), binaryInput('src_lang', [1], langBlob)],
        parameters: { binary_data_output: true },
      }),
    );
    const res = await fetch(`${t.inference}/v2/models/echo/infer`, {
      method: 'POST',
      headers: { 'inference-header-content-length': `${header.length}` },
      body: Buffer.concat([header, textBlob, langBlob]),
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/octet-stream');
    const body = Buffer.from(await res.arrayBuffer());
    const jsonLength = Number(res.headers.get('inference-header-content-length'));
    const json = JSON.parse(body.subarray(0, jsonLength).toString('utf8'));
    expect(json.outputs).toEqual([
      { name: 'translated', datatype: 'BYTES', shape: [2], parameters: { binary_data_size: textBlob.length } },
    ]);
    expect(decodeBytesElements(body.subarray(jsonLength), 'translated')).toEqual(['Grüße.', '世界.']);
  });
});

describe('Open Inference Protocol with token authorization (in-process)', () => {
  it('health answers without the key, as probes need; everything else wants it and refuses as {"error"}', async () => {
    await withTokenServer({ inference: 'infer-key', management: 'manage-key' }, async (server, config) => {
      const app = server.inferenceApp;
      expect((await app.request('/v2/health/live')).status).toBe(200);
      expect((await app.request('/v2/health/ready')).status).toBe(400);
      const refused = await app.request('/v2');
      expect(refused.status).toBe(401);
      expect(await refused.json()).toEqual({
        error: 'Token Authorization failed. Token either incorrect, expired, or not provided correctly',
      });
      const allowed = await app.request('/v2', { headers: { authorization: 'Bearer infer-key' } });
      expect(allowed.status).toBe(200);
      const tooBig = await app.request('/v2/models/en/infer', {
        method: 'POST',
        headers: { authorization: 'Bearer infer-key', 'content-type': 'application/json' },
        body: 'x'.repeat(config.maxRequestBytes + 1),
      });
      expect(tooBig.status).toBe(413);
      expect(await tooBig.json()).toEqual({ error: `Request body is larger than ${config.maxRequestBytes} bytes.` });
    });
  });
});

describe('Open Inference Protocol under load and faults (echo, real workers)', () => {
  let t: TestServer | undefined;
  const startServer = startPerTest();

  it('a full queue: 503 {"error"} with Retry-After', async () => {
    t = await startServer({ config: { batchPolicy: 'torchserve', jobQueueSize: 2 } });
    expect((await register(t, 'url=echo&batch_size=64&max_batch_delay=1500')).status).toBe(200);
    const server = t;
    const waiting = infer(server, 'echo', { inputs: [texts(['a', 'b']), lang('en')] });
    await until(
      '2 queued',
      async () => (await call(`${server.management}/models/echo`)).body[0].jobQueueStatus.pendingRequests === 2,
    );
    const refused = await infer(t, 'echo', { inputs: [texts(['c']), lang('en')] });
    expect(refused).toMatchObject({
      status: 503,
      body: { error: 'Job queue of model echo is full (2 jobs), retry later.' },
    });
    expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect((await waiting).body.outputs[0].data).toEqual(['a', 'b']);
  });

  it('a job past its response_timeout: 504 {"error"}', async () => {
    t = await startServer({ faults: { echo: 'slow:1200' } });
    expect((await register(t, 'url=echo&batch_size=4&max_batch_delay=0&response_timeout=1')).status).toBe(200);
    expect(await infer(t, 'echo', { inputs: [texts(['slow']), lang('en')] })).toMatchObject({
      status: 504,
      body: {
        error: 'Request timed out: inference took longer than the response timeout (1000 ms); its work was cancelled.',
      },
    });
  });

  it('a client that disconnects cancels its jobs, as on /predictions', async () => {
    t = await startServer({ faults: { echo: 'slow:1500' } });
    expect((await register(t, 'url=echo&batch_size=1&max_batch_delay=0')).status).toBe(200);
    const controller = new AbortController();
    // The client gives up after 300 ms, its job still on the slow worker: the disconnect under test.
    const timer = setTimeout(() => controller.abort(), 300);
    await fetch(`${t.inference}/v2/models/echo/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ inputs: [texts(['running', 'queued']), lang('en')] }),
      signal: controller.signal,
    }).then(
      () => expect.unreachable('the request was aborted'),
      (err: Error) => expect(err.name).toBe('AbortError'),
    );
    clearTimeout(timer);
    const server = t;
    await until('both jobs cancelled', async () => {
      const text = (await call(`${server.metrics}/metrics`)).body as string;
      const get = (stage: string) =>
        metricValue(text, 'mt_cancelled_jobs_total', { model_name: 'echo', reason: 'client-gone', stage }) ?? 0;
      return get('running') === 1 && get('queued') === 1;
    });
  });
});

describe('Open Inference Protocol round trip (generated tiny M2M100)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['en', 'de']);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('translations equal what /predictions answers for the same texts', async () => {
    const source = ['The train was late this morning.', 'Dr. Lee will present the results. Is that clear?'];
    const v2 = await infer(t, 'de', { id: 'tiny-1', inputs: [texts(source), lang('en')] });
    expect(v2.status, JSON.stringify(v2.body)).toBe(200);
    const torchserve = await call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', src_text: source } });
    expect(torchserve.status).toBe(200);
    expect(v2.body).toEqual({
      model_name: 'de',
      model_version: '1.0',
      id: 'tiny-1',
      outputs: [{ name: 'translated', datatype: 'BYTES', shape: [2], data: torchserve.body.translated }],
    });
    expect(v2.body.outputs[0].data.every((s: string) => s.length > 0)).toBe(true);
    expect((await call(`${t.inference}/v2/models/de`)).body.platform).toBe('onnx_onnxv1');
  });

  it('src_lang "auto" answers detected_src_lang beside the translation; split "none" as on /predictions', async () => {
    const german = 'Der Zug nach Berlin hatte heute Morgen fast eine Stunde Verspätung.';
    const korean = '오늘 저녁에는 친구들과 함께 영화를 보러 갈 거예요.';
    const v2 = await infer(t, 'en', { parameters: { src_lang: 'auto' }, inputs: [texts([german, korean])] });
    expect(v2.status, JSON.stringify(v2.body)).toBe(200);
    const torchserve = await call(`${t.inference}/predictions/en`, {
      body: { src_lang: 'auto', src_text: [german, korean] },
    });
    expect(v2.body.outputs).toEqual([
      { name: 'translated', datatype: 'BYTES', shape: [2], data: torchserve.body.translated },
      { name: 'detected_src_lang', datatype: 'BYTES', shape: [2], data: ['de', 'ko'] },
    ]);
    const doc = 'Good morning. See you later.';
    const whole = await infer(t, 'de', { parameters: { src_lang: 'en', split: 'none' }, inputs: [texts([doc])] });
    const same = await call(`${t.inference}/predictions/de`, {
      body: { src_lang: 'en', src_text: doc, split: 'none' },
    });
    expect(whole.body.outputs[0].data).toEqual([same.body.translated]);
    const unknown = await infer(t, 'en', { inputs: [texts(['hi']), lang('xx')] });
    expect(unknown.status).toBe(400);
    expect(Object.keys(unknown.body)).toEqual(['error']);
  });
});
