/**
 * The router app in-process (`app.request`) with the real undici upstream against a fake model server that
 * is a real HTTP server: routing, pass-through, every 4xx, every upstream failure, the log line.
 */
import { createServer } from 'node:net';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { expectErrorBody } from '../../harness/error-body.js';
import { createRouterApp } from '../app.js';
import { Upstream } from '../upstream/upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const LANGUAGES = ['ko', 'en', 'zh', 'fr'];
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

let fake: FakeModelServer;
let logLines: Record<string, unknown>[] = [];
const logger = pino(
  { level: 'info' },
  new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logLines.push(JSON.parse(line));
      done();
    },
  }),
);

function makeApp(url: string, options: { timeoutMs?: number; logBodies?: boolean } = {}) {
  const upstream = new Upstream({ url, connections: 4, timeoutMs: options.timeoutMs ?? 10_000 });
  const app = createRouterApp(
    { maxBodyBytes: 2048, languages: LANGUAGES, logBodies: options.logBodies ?? false },
    { upstream, logger },
  );
  return { app, upstream };
}

let router: ReturnType<typeof makeApp>;

beforeAll(async () => {
  fake = await startFakeModelServer();
  router = makeApp(fake.url);
});
afterAll(async () => {
  await router.upstream.close();
  await fake.close();
});
afterEach(() => {
  logLines = [];
});

const post = (body: unknown, headers: Record<string, string> = {}, app = router.app) =>
  app.request('/', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });

describe('routing', () => {
  it('forwards {src_lang, src_text} to /predictions/{tgt_lang} and answers the model server JSON', async () => {
    const res = await post({ src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko', extra: 'dropped' });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ translated: 'ko:olleH' });
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(res.headers.get('x-model-name')).toBe('ko');
    expect(res.headers.get('x-worker-id')).toBe('w-0');
    expect(res.headers.get('x-device')).toBe('cpu');
    expect(res.headers.get('x-device-fallback')).toBe('no CUDA provider');
    expect(res.headers.get('x-internal-only')).toBeNull();
    const requestId = res.headers.get('x-request-id');
    expect(requestId).toMatch(UUID);
    const seen = fake.seen.at(-1)!;
    expect(seen.path).toBe('/predictions/ko');
    expect(seen.body).toEqual({ src_lang: 'en', src_text: 'Hello' });
    expect(seen.headers['x-request-id']).toBe(requestId);
    expect(seen.headers['content-type']).toBe('application/json');
  });

  it('passes src_lang "auto" and split on to the model server; a bad split is a 400 naming it', async () => {
    const res = await post({ src_lang: 'auto', src_text: 'Hello. Bye.', tgt_lang: 'ko', split: 'none' });
    expect(res.status).toBe(200);
    expect(fake.seen.at(-1)!.body).toEqual({ src_lang: 'auto', src_text: 'Hello. Bye.', split: 'none' });
    const bad = await post({ src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko', split: 'words' });
    await expectErrorBody(
      bad,
      400,
      'BadRequestException',
      'Field "split" must be "sentences" (the default) or "none", got "words".',
    );
  });

  it('passes format and ignore_tags on; an unknown format is a 400 naming the formats', async () => {
    const html = '<p>Hello <code>x</code></p>';
    const res = await post({ src_lang: 'en', src_text: html, tgt_lang: 'ko', format: 'html', ignore_tags: ['kbd'] });
    expect(res.status).toBe(200);
    expect(fake.seen.at(-1)!.body).toEqual({ src_lang: 'en', src_text: html, format: 'html', ignore_tags: ['kbd'] });
    const bad = await post({ src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko', format: 'pdf' });
    expect(bad.status).toBe(400);
    expect((await bad.json()).message).toBe(
      'Field "format" must be one of text, html, xml, srt, vtt (text is the default), got "pdf".',
    );
  });

  it('passes a glossary (inline or by id) and alternatives on; a glossary not term → term is a 400', async () => {
    const body = { src_lang: 'en', src_text: 'a fox', tgt_lang: 'ko', glossary: { fox: '여우' } };
    expect((await post(body)).status).toBe(200);
    expect(fake.seen.at(-1)!.body).toEqual({ src_lang: 'en', src_text: 'a fox', glossary: { fox: '여우' } });
    const byId = { src_lang: 'en', src_text: 'a fox', glossary_id: 'g-1', alternatives: 2 };
    expect((await post({ ...byId, tgt_lang: 'ko' })).status).toBe(200);
    expect(fake.seen.at(-1)!.body).toEqual(byId);
    expect((await post({ ...byId, tgt_lang: 'ko', alternatives: 1.5 })).status).toBe(400);
    const bad = await post({ ...body, glossary: { fox: 1 } });
    expect(bad.status).toBe(400);
    expect((await bad.json()).message).toBe(
      'Field "glossary" must be an object of source term → target term (strings).',
    );
  });

  it('keeps an array in order and routes each target language to its own model', async () => {
    const texts = ['one', 'two', 'three', 'four', 'five'];
    for (const tgt of ['zh', 'fr']) {
      const res = await post({ src_lang: 'en', src_text: texts, tgt_lang: tgt });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ translated: texts.map((t) => `${tgt}:${[...t].reverse().join('')}`) });
      expect(res.headers.get('x-model-name')).toBe(tgt);
    }
  });

  it('accepts what curl -d sends (form content type, or none) as the seed did', async () => {
    const body = { src_lang: 'en', src_text: 'Hi', tgt_lang: 'ko' };
    expect((await post(body, { 'content-type': 'application/x-www-form-urlencoded' })).status).toBe(200);
    const bare = await router.app.request('/', { method: 'POST', body: JSON.stringify(body) });
    expect(bare.status).toBe(200);
  });

  it('reuses a valid incoming x-request-id and replaces an invalid one', async () => {
    const kept = await post({ src_lang: 'en', src_text: 'a', tgt_lang: 'ko' }, { 'x-request-id': 'front-123.abc' });
    expect(kept.headers.get('x-request-id')).toBe('front-123.abc');
    expect(fake.seen.at(-1)!.headers['x-request-id']).toBe('front-123.abc');
    const replaced = await post(
      { src_lang: 'en', src_text: 'a', tgt_lang: 'ko' },
      { 'x-request-id': 'bad id\twith spaces' },
    );
    expect(replaced.headers.get('x-request-id')).toMatch(UUID);
  });
});

describe('bad input gets a 4xx naming the field', () => {
  const ok = { src_lang: 'en', src_text: 'Hello', tgt_lang: 'ko' };
  const supported = 'supported: ko, en, zh, fr.';
  const cases: [string, unknown, number, string, string][] = [
    ['bad JSON', '{"src_lang": "en",', 400, 'BadRequestException', 'Request body is not valid JSON: '],
    [
      'empty body',
      '',
      400,
      'BadRequestException',
      'Request body is empty; expected a JSON object {"src_lang", "src_text", "tgt_lang"}.',
    ],
    [
      'an array body',
      '[1,2]',
      400,
      'BadRequestException',
      'Request body must be a JSON object {"src_lang", "src_text", "tgt_lang"}, got array.',
    ],
    [
      'missing src_lang',
      { src_text: 'x', tgt_lang: 'ko' },
      400,
      'BadRequestException',
      'Missing field "src_lang" (a language code such as "en").',
    ],
    [
      'missing src_text',
      { src_lang: 'en', tgt_lang: 'ko' },
      400,
      'BadRequestException',
      'Missing field "src_text" (a string or an array of strings).',
    ],
    [
      'missing tgt_lang',
      { src_lang: 'en', src_text: 'x' },
      400,
      'BadRequestException',
      'Missing field "tgt_lang" (a language code such as "ko").',
    ],
    [
      'numeric src_lang',
      { ...ok, src_lang: 5 },
      400,
      'BadRequestException',
      'Field "src_lang" must be a string (a language code such as "en"), got number.',
    ],
    [
      'malformed src_lang',
      { ...ok, src_lang: 'EN!' },
      400,
      'BadRequestException',
      'Field "src_lang" must be a language code of 2-3 lowercase letters such as "en", or "auto", got "EN!".',
    ],
    [
      'null tgt_lang',
      { ...ok, tgt_lang: null },
      400,
      'BadRequestException',
      'Field "tgt_lang" must be a string (a language code such as "ko"), got null.',
    ],
    [
      'unknown tgt_lang',
      { ...ok, tgt_lang: 'xx' },
      400,
      'BadRequestException',
      `Field "tgt_lang": "xx" is not served here; ${supported}`,
    ],
    [
      'object src_text',
      { ...ok, src_text: { a: 1 } },
      400,
      'BadRequestException',
      'Field "src_text" must be a string or an array of strings, got object.',
    ],
    ['empty src_text', { ...ok, src_text: '' }, 400, 'BadRequestException', 'Field "src_text" is empty.'],
    ['whitespace src_text', { ...ok, src_text: ' \n\t ' }, 400, 'BadRequestException', 'Field "src_text" is empty.'],
    ['empty array', { ...ok, src_text: [] }, 400, 'BadRequestException', 'Field "src_text" is an empty array.'],
    [
      'bad array items',
      { ...ok, src_text: ['a', 3, ' '] },
      400,
      'BadRequestException',
      'Field "src_text[1]" must be a string, got number. Field "src_text[2]" is empty.',
    ],
    [
      'several fields at once',
      { src_lang: 'EN', src_text: '', tgt_lang: 'xx' },
      400,
      'BadRequestException',
      `Field "src_lang" must be a language code of 2-3 lowercase letters such as "en", or "auto", got "EN". Field "src_text" is empty. Field "tgt_lang": "xx" is not served here; ${supported}`,
    ],
  ];
  it.each(cases)('%s', async (_name, body, status, type, message) => {
    const res = await post(body);
    expect(res.status).toBe(status);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    const got = (await res.json()) as { code: number; type: string; message: string };
    if (message.endsWith(': ')) {
      expect(got).toMatchObject({ code: status, type });
      expect(got.message.startsWith(message)).toBe(true);
    } else {
      expect(got).toEqual({ code: status, type, message });
    }
  });

  it('wrong content type → 415', async () => {
    const res = await post(ok, { 'content-type': 'multipart/form-data; boundary=x' });
    await expectErrorBody(
      res,
      415,
      'UnsupportedMediaTypeException',
      'Content-Type multipart/form-data is not accepted; send the JSON body as application/json.',
    );
  });

  const tooLarge = {
    code: 413,
    type: 'RequestEntityTooLargeException',
    message: 'Request body is larger than 2048 bytes.',
  };
  it('body over the limit → 413, by Content-Length', async () => {
    const res = await post({ ...ok, src_text: 'x'.repeat(3000) });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(tooLarge);
  });

  it('body over the limit → 413, streamed without Content-Length', async () => {
    const payload = new TextEncoder().encode(JSON.stringify({ ...ok, src_text: 'y'.repeat(3000) }));
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        for (let i = 0; i < payload.length; i += 500) controller.enqueue(payload.slice(i, i + 500));
        controller.close();
      },
    });
    const res = await router.app.request('/', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'transfer-encoding': 'chunked' },
      body: stream,
      // @ts-expect-error undici needs this for a stream body
      duplex: 'half',
    });
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual(tooLarge);
  });

  it('unknown path → 404, wrong method → 405', async () => {
    const notFound = await router.app.request('/predictions/ko', { method: 'POST' });
    await expectErrorBody(
      notFound,
      404,
      'ResourceNotFoundException',
      'Requested resource is not found, please refer to API document.',
    );
    const wrongMethod = await router.app.request('/');
    await expectErrorBody(
      wrongMethod,
      405,
      'MethodNotAllowedException',
      'Requested method is not allowed, please refer to API document.',
    );
  });
});

describe('upstream failures become clear JSON', () => {
  const send = (text: string, app = router.app) => post({ src_lang: 'en', src_text: text, tgt_lang: 'ko' }, {}, app);

  /** Each case: its name, what the fake model server is told to do, the answer (status, type, message), its headers. */
  const cases: [string, string, [number, string, string], Record<string, string>?][] = [
    [
      'model server 400 (unknown src_lang) passes through with its message',
      '!status 400',
      [400, 'BadRequestException', 'fake 400'],
    ],
    [
      'queue full: 503 passes through with its Retry-After',
      '!status 503 7',
      [503, 'ServiceUnavailableException', 'fake 503'],
      { 'retry-after': '7', 'x-error-code': 'QUEUE_FULL' },
    ],
    ['model server 504 stays a 504', '!status 504', [504, 'RequestTimeoutException', 'fake 504']],
    [
      'an error page without an error code is the model server failing: 502, not its status',
      '!garbage',
      [502, 'BadGatewayException', 'Model server answered 500 without an error code.'],
      { 'x-error-code': 'UPSTREAM_UNAVAILABLE' },
    ],
    ['a reset connection → 502', '!reset', [502, 'BadGatewayException', 'Model server is unavailable.']],
  ];
  for (const [name, text, answer, headers = {}] of cases) {
    it(name, async () => {
      const res = await send(text);
      for (const [header, value] of Object.entries(headers)) expect(res.headers.get(header)).toBe(value);
      await expectErrorBody(res, ...answer);
    });
  }

  it("the log line names a 502's transport cause, which says whether the connection was refused or torn", async () => {
    await send('!reset');
    expect(logLines.find((l) => l.status === 502)).toMatchObject({
      error: 'UPSTREAM_UNAVAILABLE',
      cause: expect.stringMatching(/^(ECONNRESET|UND_ERR_SOCKET)$/),
    });
  });

  it('no answer within the timeout → 504', async () => {
    const slow = makeApp(fake.url, { timeoutMs: 300 });
    try {
      const started = performance.now();
      const res = await send('!slow 3000', slow.app);
      await expectErrorBody(res, 504, 'RequestTimeoutException', 'Model server did not answer within 0.3 s.');
      expect(performance.now() - started).toBeLessThan(2_500);
    } finally {
      await slow.upstream.close();
    }
  });

  it('model server down → 502 well within a second, and /health says so', async () => {
    const port = await closedPort();
    const down = makeApp(`http://127.0.0.1:${port}`);
    try {
      const started = performance.now();
      const res = await send('Hello', down.app);
      expect(performance.now() - started).toBeLessThan(1_000);
      await expectErrorBody(res, 502, 'BadGatewayException', 'Model server is unavailable.');
      const health = await down.app.request('/health');
      expect(health.status).toBe(503);
      expect(await health.json()).toEqual({ status: 'Unhealthy', modelServer: 'Unreachable' });
    } finally {
      await down.upstream.close();
    }
  });
});

describe('health and logs', () => {
  it('GET /health is 200 while the model server answers /ping', async () => {
    const res = await router.app.request('/health');
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ status: 'Healthy', modelServer: 'Healthy' });
  });

  it('writes one structured line per request, without texts by default', async () => {
    const res = await post({ src_lang: 'en', src_text: ['secret one', 'secret two'], tgt_lang: 'fr' });
    const requestId = res.headers.get('x-request-id');
    const bad = await post({ src_lang: 'en', src_text: 'secret three', tgt_lang: 'xx' });
    expect(bad.status).toBe(400);
    expect(logLines).toHaveLength(2);
    expect(logLines[0]).toMatchObject({
      msg: 'request',
      reqId: requestId,
      method: 'POST',
      path: '/',
      status: 200,
      tgt_lang: 'fr',
      texts: 2,
      model: 'fr',
      worker: 'w-0',
      device: 'cpu',
    });
    expect(typeof logLines[0]!.ms).toBe('number');
    expect(logLines[1]).toMatchObject({ status: 400, error: 'UNKNOWN_LANGUAGE' });
    expect(JSON.stringify(logLines)).not.toContain('secret');
  });

  it('logs texts only with LOG_BODIES', async () => {
    const verbose = makeApp(fake.url, { logBodies: true });
    try {
      await post({ src_lang: 'en', src_text: 'visible text', tgt_lang: 'ko' }, {}, verbose.app);
      expect(logLines.at(-1)).toMatchObject({ src_text: 'visible text' });
    } finally {
      await verbose.upstream.close();
    }
  });
});

/** A port nothing listens on: bind one, note it, close it. */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}
