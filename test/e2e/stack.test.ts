/**
 * End to end, every process real: the tiny generated model, the model server and its workers, the router, and
 * both fronts — nginx (skipped, saying so, only where nginx is not installed; CI installs it) and the built-in
 * proxy. Requests go in where a client sends them (the front) and must come back routed to the model named by
 * tgt_lang, on the device setup_config.json pins it to, in order, or as the right 4xx/5xx JSON.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { expectErrorBody } from '../../harness/error-body.js';
import { stopAll } from '../../harness/process-registry.js';
import { startStackWithFronts, type StackWithFronts } from '../../harness/stack.js';

const CUDA_IDS = { ko: '0', en: '0', de: '1' };
const MAX_BODY = 65_536;
const nginx = findNginx(process.env);
if (!nginx)
  console.warn('stack.test: nginx is not installed; the nginx front is NOT tested here (apt-get install nginx-light)');
const FRONTS = nginx ? (['nginx', 'builtin'] as const) : (['builtin'] as const);

let stack: StackWithFronts;

beforeAll(async () => {
  // The tiny model generated and the store archived by the real CLIs; languages registered through the real API.
  stack = await startStackWithFronts(
    {
      languages: Object.keys(CUDA_IDS),
      devices: CUDA_IDS,
      handler: 'translation',
      demoModel: 'tiny',
      archiveWithCli: true,
      env: { ROUTER_MAX_BODY_BYTES: String(MAX_BODY) },
      register: { batchSize: 8, maxBatchDelayMs: 20, workers: 1 },
    },
    FRONTS,
  );
});

afterAll(async () => {
  await stack?.stop();
  await stopAll();
});

const translate = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe.each(FRONTS)('through the %s front', (kind) => {
  const url = () => stack.fronts[kind]!.url;

  it('routes each tgt_lang to its own model, on the device setup_config.json pins it to', async () => {
    const workers: Record<string, string> = {};
    for (const [lang, device] of Object.entries(CUDA_IDS)) {
      const res = await translate(
        url(),
        { src_lang: 'en', src_text: 'Hello world.', tgt_lang: lang },
        { 'x-request-id': `e2e-${lang}` },
      );
      expect(res.status).toBe(200);
      const body = (await res.json()) as { translated: unknown };
      expect(typeof body.translated).toBe('string');
      expect(res.headers.get('x-front')).toBe(kind);
      expect(res.headers.get('x-request-id')).toBe(`e2e-${lang}`);
      expect(res.headers.get('x-model-name')).toBe(lang);
      // No GPU here: the worker says where it was asked to run and why it runs on the CPU instead.
      const where = `${res.headers.get('x-device')} ${res.headers.get('x-device-fallback') ?? ''}`;
      expect(where.includes(`cuda:${device}`)).toBe(true);
      workers[lang] = `${res.headers.get('x-device')} ${res.headers.get('x-worker-id')}`;
    }
    // One engine (one worker) per actual device, shared by its languages: ko and en share one; de shares it
    // too only where both devices fell back to the same CPU (no GPU here), and has its own on a GPU host.
    expect(workers.ko).toBe(workers.en);
    const [deDevice] = workers.de!.split(' ');
    if (deDevice === workers.ko!.split(' ')[0]) expect(workers.de).toBe(workers.ko);
    else expect(workers.de).not.toBe(workers.ko);
  });

  it('answers an array in order, each text as it is translated alone', async () => {
    const texts = ['Hello world.', 'How are you today?', 'A', 'The weather is nice, is it not?'];
    const res = await translate(url(), { src_lang: 'en', src_text: texts, tgt_lang: 'de' });
    expect(res.status).toBe(200);
    const { translated } = (await res.json()) as { translated: string[] };
    expect(translated).toHaveLength(texts.length);
    const alone = await Promise.all(
      texts.map(async (text) => {
        const one = await translate(url(), { src_lang: 'en', src_text: text, tgt_lang: 'de' });
        return ((await one.json()) as { translated: string }).translated;
      }),
    );
    expect(translated).toEqual(alone);
  });

  const badRequest = (message: string) => ({ code: 400, type: 'BadRequestException', message });
  const cases: [string, unknown, Record<string, string>, number, object | RegExp][] = [
    [
      'bad JSON',
      '{"src_lang":',
      {},
      400,
      /^\{"code":400,"type":"BadRequestException","message":"Request body is not valid JSON: /,
    ],
    [
      'missing src_text',
      { src_lang: 'en', tgt_lang: 'ko' },
      {},
      400,
      badRequest('Missing field "src_text" (a string or an array of strings).'),
    ],
    [
      'numeric tgt_lang',
      { src_lang: 'en', src_text: 'x', tgt_lang: 7 },
      {},
      400,
      badRequest('Field "tgt_lang" must be a string (a language code such as "ko"), got number.'),
    ],
    [
      'unknown tgt_lang',
      { src_lang: 'en', src_text: 'x', tgt_lang: 'fr' },
      {},
      400,
      badRequest('Field "tgt_lang": "fr" is not served here; supported: ko, en, de.'),
    ],
    [
      'malformed src_lang',
      { src_lang: 'english', src_text: 'x', tgt_lang: 'ko' },
      {},
      400,
      badRequest(
        'Field "src_lang" must be a language code of 2-3 lowercase letters such as "en", or "auto", got "english".',
      ),
    ],
    [
      'unknown src_lang (model server)',
      { src_lang: 'xx', src_text: 'x', tgt_lang: 'ko' },
      {},
      400,
      /^\{"code":400,"type":"BadRequestException","message":"[^"]*\\"xx\\"[^"]*en[^"]*"\}$/,
    ],
    [
      'empty text',
      { src_lang: 'en', src_text: '  ', tgt_lang: 'ko' },
      {},
      400,
      badRequest('Field "src_text" is empty.'),
    ],
    [
      'empty array',
      { src_lang: 'en', src_text: [], tgt_lang: 'ko' },
      {},
      400,
      badRequest('Field "src_text" is an empty array.'),
    ],
    [
      'wrong content type',
      { src_lang: 'en', src_text: 'x', tgt_lang: 'ko' },
      { 'content-type': 'application/xml' },
      415,
      {
        code: 415,
        type: 'UnsupportedMediaTypeException',
        message: 'Content-Type application/xml is not accepted; send the JSON body as application/json.',
      },
    ],
    [
      'body over the limit (the front refuses it)',
      { src_lang: 'en', src_text: 'x'.repeat(MAX_BODY), tgt_lang: 'ko' },
      {},
      413,
      {
        code: 413,
        type: 'RequestEntityTooLargeException',
        message: `Request body is larger than ${MAX_BODY} bytes.`,
      },
    ],
  ];
  it.each(cases)('%s → its 4xx JSON', async (_name, body, headers, status, expected) => {
    const res = await translate(url(), body, headers);
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const text = await res.text();
    if (expected instanceof RegExp) expect(text).toMatch(expected);
    else expect(JSON.parse(text)).toEqual(expected);
  });

  it('never reaches the management or metrics API', async () => {
    for (const path of ['/models', '/metrics', '/ping', '/predictions/ko']) {
      const res = await fetch(`${url()}${path}`);
      await expectErrorBody(
        res,
        404,
        'ResourceNotFoundException',
        'Requested resource is not found, please refer to API document.',
      );
    }
  });
});

describe('the model server to its clients', () => {
  it('keeps idle connections 75 s, longer than the router keeps its own (a lane paused by a refusal reopens without connecting)', async () => {
    const res = await fetch(`${stack.inference}/ping`);
    await res.arrayBuffer();
    expect(res.headers.get('keep-alive')).toBe('timeout=75');
  });
});

describe('model server stopped', () => {
  it('answers 503 JSON + Retry-After within a second through every front', async () => {
    stack.modelServer.signal('SIGKILL');
    await stack.modelServer.exited;
    for (const kind of FRONTS) {
      const started = performance.now();
      const res = await translate(stack.fronts[kind]!.url, { src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko' });
      expect(performance.now() - started).toBeLessThan(1_000);
      // The first request may meet the refusal itself; either way the router then knows ko's host is down.
      expect(res.status).toBe(503);
      expect(res.headers.get('retry-after')).toBe('1');
      expect(await res.json()).toEqual({
        code: 503,
        type: 'ServiceUnavailableException',
        message: 'Model ko is unavailable now, no model server has it ready: 1 down; retry later.',
      });
    }
  });
});
