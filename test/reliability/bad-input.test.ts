/**
 * Issue 6.1 — bad input. A corpus of hostile and broken requests, sent to a real stack (model server with the
 * generated tiny M2M100, router, both fronts) at the router, through each front, and at the model server's
 * inference API. Each must be answered with the right 4xx and TorchServe's JSON error `{code, type, message}`
 * whose message names the problem — never a stack trace, never an HTML page, never a hang — while a stream of
 * good requests keeps succeeding on the same processes.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { background, send, type Tally } from '../../harness/load.js';
import { stopAll, type ManagedProcess } from '../../harness/process-registry.js';
import { rawRequest } from '../../harness/raw-http.js';
import { startFronts, startStack, translateBody, type Stack } from '../../harness/stack.js';

const ROUTER_MAX = 32_768;
const MODEL_SERVER_MAX = 65_536;
const QUEUE = 256;
const LANGS = ['en', 'ko', 'fr'];
const nginx = findNginx(process.env);
if (!nginx)
  console.warn('bad-input.test: nginx is not installed; the nginx front is NOT tested (apt-get install nginx-light)');

/** One hostile request and the answer it must get. */
interface Case {
  name: string;
  method?: string;
  path?: string;
  headers?: Record<string, string>;
  body?: string | Buffer;
  status: number;
  type: string;
  /** What the message must say (it names the problem). */
  message: RegExp;
}

const BAD = 'BadRequestException';
const body = (fields: Record<string, unknown>) =>
  JSON.stringify({ src_lang: 'en', src_text: 'hello', tgt_lang: 'ko', ...fields });
const without = (field: string) => {
  const b: Record<string, unknown> = { src_lang: 'en', src_text: 'hello', tgt_lang: 'ko' };
  delete b[field];
  return JSON.stringify(b);
};
const deep = (n: number) => `${'['.repeat(n)}"x"${']'.repeat(n)}`;
const invalidUtf8 = Buffer.concat([
  Buffer.from('{"src_lang":"en","src_text":"caf'),
  Buffer.from([0xc3, 0x28, 0xff]),
  Buffer.from('","tgt_lang":"ko"}'),
]);
/** Characters of text one translation request may carry in this stack (MAX_REQUEST_CHARS). */
const MAX_CHARS = 8_000;
/** Over MAX_CHARS (and dozens of times the tiny model's 128-token window, which alone is no longer a refusal). */
const FAR_TOO_LONG = 'the quick brown fox jumps over the lazy dog '.repeat(300);

/** The two size limits both hops enforce (characters of text, bytes of body), for bodies made by `make`. */
const overLimits = (make: (fields: Record<string, unknown>) => string, maxBytes: number): Case[] => [
  {
    name: 'text over the request character limit',
    body: make({ src_text: FAR_TOO_LONG }),
    status: 413,
    type: 'RequestEntityTooLargeException',
    message: new RegExp(
      `^Request has ${FAR_TOO_LONG.length} characters of text; at most ${MAX_CHARS} .*MAX_REQUEST_CHARS`,
    ),
  },
  {
    name: 'body over the size limit',
    body: make({ src_text: 'x'.repeat(maxBytes) }),
    status: 413,
    type: 'RequestEntityTooLargeException',
    message: new RegExp(`larger than ${maxBytes} bytes`),
  },
];

/** A request the router must refuse as the client's 400, its message matching `message`. */
const bad = (name: string, body: string | Buffer, message: RegExp): Case => ({
  name,
  body,
  status: 400,
  type: BAD,
  message,
});
/** A body the router must refuse as not JSON at all. */
const notJson = (name: string, body: string) => bad(name, body, /not valid JSON/);

/** The router's corpus (also sent through each front: the router's answers pass through untouched). */
const ROUTER_CASES: Case[] = [
  // Malformed and truncated JSON
  notJson('truncated JSON', '{"src_lang":"en","src_text":"hi","tgt_lang":"ko"'),
  notJson('JavaScript, not JSON', "{src_lang: 'en', src_text: 'hi', tgt_lang: 'ko'}"),
  notJson('trailing comma', '{"src_lang":"en","src_text":"hi","tgt_lang":"ko",}'),
  notJson('NaN literal', '{"src_lang":"en","src_text":NaN,"tgt_lang":"ko"}'),
  notJson('two JSON documents', '{"src_lang":"en"}{"tgt_lang":"ko"}'),
  bad('empty body', '', /body is empty/),
  bad('whitespace body', ' \n\t ', /body is empty/),
  bad('JSON null', 'null', /must be a JSON object.*got null/),
  bad('JSON array', '[{"src_lang":"en"}]', /must be a JSON object.*got array/),
  bad('JSON string', '"translate me"', /must be a JSON object.*got string/),
  bad('JSON number', '42', /must be a JSON object.*got number/),
  bad('empty object', '{}', /Missing field "src_lang".*Missing field "src_text".*Missing field "tgt_lang"/),
  // Wrong types and nulls in every field
  bad('src_lang null', body({ src_lang: null }), /"src_lang" must be a string.*got null/),
  bad('src_lang number', body({ src_lang: 7 }), /"src_lang" must be a string.*got number/),
  bad('src_text null', body({ src_text: null }), /"src_text" must be a string or an array of strings, got null/),
  bad('src_text number', body({ src_text: 42 }), /"src_text" must be .*got number/),
  bad('src_text object', body({ src_text: { text: 'hi' } }), /"src_text" must be .*got object/),
  bad('src_text boolean', body({ src_text: true }), /"src_text" must be .*got boolean/),
  bad('tgt_lang null', body({ tgt_lang: null }), /"tgt_lang" must be a string.*got null/),
  bad('tgt_lang array', body({ tgt_lang: ['ko'] }), /"tgt_lang" must be a string.*got array/),
  bad('src_lang missing', without('src_lang'), /Missing field "src_lang"/),
  bad('src_text missing', without('src_text'), /Missing field "src_text"/),
  bad('tgt_lang missing', without('tgt_lang'), /Missing field "tgt_lang"/),
  bad(
    'every field wrong at once',
    JSON.stringify({ src_lang: 1, src_text: null, tgt_lang: false }),
    /"src_lang".*"src_text".*"tgt_lang"/,
  ),
  // Empty and whitespace text
  bad('empty text', body({ src_text: '' }), /"src_text" is empty/),
  bad('whitespace text', body({ src_text: ' \n\t\r ' }), /"src_text" is empty/),
  bad('ideographic-space text', body({ src_text: '\u3000\u3000' }), /"src_text" is empty/),
  // Arrays: empty, mixed, nested, huge
  bad('empty array', body({ src_text: [] }), /"src_text" is an empty array/),
  bad('array with a number', body({ src_text: ['hi', 5] }), /"src_text\[1\]" must be a string, got number/),
  bad('array with an empty text', body({ src_text: ['hi', '  '] }), /"src_text\[1\]" is empty/),
  bad('array with null', body({ src_text: [null] }), /"src_text\[0\]" must be a string, got null/),
  bad('nested array', body({ src_text: [['hi']] }), /"src_text\[0\]" must be a string, got array/),
  bad(
    'deeply nested array',
    `{"src_lang":"en","tgt_lang":"ko","src_text":${deep(5000)}}`,
    /"src_text\[0\]" must be a string, got array/,
  ),
  {
    name: 'array larger than the queue can ever hold',
    body: body({ src_text: Array.from({ length: QUEUE * 2 }, (_, i) => `t${i}`) }),
    status: 413,
    type: 'RequestEntityTooLargeException',
    message: new RegExp(`${QUEUE * 2} texts.*at most ${QUEUE}`),
  },
  // Encoding and size
  bad('invalid UTF-8', invalidUtf8, /not valid UTF-8/),
  {
    name: 'more sentences than one request may carry',
    body: body({ src_text: Array.from({ length: 1001 }, () => 'x') }),
    status: 413,
    type: 'RequestEntityTooLargeException',
    message: /^Request has more than 1000 sentences; at most 1000 .*MAX_REQUEST_SENTENCES/,
  },
  ...overLimits(body, ROUTER_MAX),
  // Languages: unknown and malformed codes
  bad('unknown tgt_lang', body({ tgt_lang: 'xx' }), /"tgt_lang": "xx" is not served here; supported: en, ko, fr/),
  bad('upper-case tgt_lang', body({ tgt_lang: 'KO' }), /"tgt_lang": "KO" is not served/),
  bad('path in tgt_lang', body({ tgt_lang: '../../models' }), /"tgt_lang": "..\/..\/models" is not served/),
  bad('NUL in tgt_lang', body({ tgt_lang: 'ko\u0000' }), /"tgt_lang".*is not served/),
  bad(
    'malformed src_lang',
    body({ src_lang: 'english' }),
    /"src_lang" must be a language code of 2-3 lowercase letters.*"english"/,
  ),
  bad('empty src_lang', body({ src_lang: '' }), /"src_lang" must be a language code/),
  bad('unknown src_lang (well-formed)', body({ src_lang: 'qq' }), /Unknown src_lang "qq"/),
  // Content types
  {
    name: 'XML content type',
    headers: { 'content-type': 'application/xml' },
    body: body({}),
    status: 415,
    type: 'UnsupportedMediaTypeException',
    message: /application\/xml is not accepted/,
  },
  {
    name: 'multipart form',
    headers: { 'content-type': 'multipart/form-data; boundary=x' },
    body: '--x\r\n\r\nhi\r\n--x--',
    status: 415,
    type: 'UnsupportedMediaTypeException',
    message: /multipart\/form-data is not accepted/,
  },
  {
    name: 'image content type',
    headers: { 'content-type': 'image/png' },
    body: body({}),
    status: 415,
    type: 'UnsupportedMediaTypeException',
    message: /image\/png/,
  },
  // Wrong methods and paths
  { name: 'GET /', method: 'GET', status: 405, type: 'MethodNotAllowedException', message: /method is not allowed/ },
  {
    name: 'PUT /',
    method: 'PUT',
    body: body({}),
    status: 405,
    type: 'MethodNotAllowedException',
    message: /method is not allowed/,
  },
  {
    name: 'DELETE /',
    method: 'DELETE',
    status: 405,
    type: 'MethodNotAllowedException',
    message: /method is not allowed/,
  },
  {
    name: 'PATCH /health',
    method: 'PATCH',
    path: '/health',
    body: '{}',
    status: 405,
    type: 'MethodNotAllowedException',
    message: /method is not allowed/,
  },
  {
    name: 'POST /translations (no such path)',
    path: '/translations',
    body: body({}),
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
  {
    name: 'model server path',
    path: '/predictions/ko',
    body: body({}),
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
  {
    name: 'management path',
    path: '/models?url=ko',
    body: '',
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
  {
    name: 'metrics path',
    method: 'GET',
    path: '/metrics',
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
  {
    name: 'dot-dot path',
    method: 'GET',
    path: '/../../etc/passwd',
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
];

/** The router's cases whose problem is in a field the model server reads too. */
const CONTRACT_CASES = new Set([
  'src_lang null',
  'src_lang number',
  'src_text null',
  'src_text number',
  'src_text object',
  'src_text boolean',
  'src_lang missing',
  'src_text missing',
  'empty text',
  'whitespace text',
  'ideographic-space text',
  'empty array',
  'array with a number',
  'array with an empty text',
  'array with null',
  'nested array',
  'deeply nested array',
  'malformed src_lang',
  'empty src_lang',
  'unknown src_lang (well-formed)',
]);

/** The model server's inference API: body `{src_lang, src_text}`, the model (target language) in the path. */
const MS = (fields: Record<string, unknown>) => JSON.stringify({ src_lang: 'en', src_text: 'hello', ...fields });
const MODEL_SERVER_CASES: Case[] = [
  // The body's own fields: this edge parses the contract the router does (common/translation-contract.ts), so the
  // router's cases get the same answers here (a body's tgt_lang is not read: the target is the path's model).
  ...ROUTER_CASES.filter((c) => CONTRACT_CASES.has(c.name)),
  notJson('truncated JSON', '{"src_lang":"en","src_text":"hi"'),
  {
    name: 'not JSON, no JSON content type',
    headers: { 'content-type': 'text/plain' },
    body: 'translate me',
    status: 400,
    type: BAD,
    message: /must be a JSON object/,
  },
  bad('empty body', '', /body is empty/),
  bad('JSON null', 'null', /must be a JSON object/),
  bad('JSON array', '["hi"]', /must be a JSON object/),
  {
    name: 'array larger than the queue can ever hold',
    body: MS({ src_text: Array.from({ length: QUEUE + 1 }, () => 'a') }),
    status: 413,
    type: 'RequestEntityTooLargeException',
    message: new RegExp(`${QUEUE + 1} texts.*at most ${QUEUE}`),
  },
  bad(
    'invalid UTF-8',
    Buffer.concat([Buffer.from('{"src_lang":"en","src_text":"'), Buffer.from([0xff, 0xfe]), Buffer.from('"}')]),
    /not valid UTF-8/,
  ),
  ...overLimits(MS, MODEL_SERVER_MAX),
  {
    name: 'unknown model',
    path: '/predictions/xx',
    body: MS({}),
    status: 404,
    type: 'ModelNotFoundException',
    message: /xx/,
  },
  {
    name: 'unknown version',
    path: '/predictions/ko/9.9',
    body: MS({}),
    status: 404,
    type: 'ModelVersionNotFoundException',
    message: /9\.9/,
  },
  {
    name: 'GET a prediction',
    method: 'GET',
    path: '/predictions/ko',
    status: 405,
    type: 'MethodNotAllowedException',
    message: /method is not allowed/,
  },
  {
    name: 'POST /ping',
    path: '/ping',
    body: '{}',
    status: 405,
    type: 'MethodNotAllowedException',
    message: /method is not allowed/,
  },
  {
    name: 'management path on the inference port',
    method: 'GET',
    path: '/models',
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
  {
    name: 'unknown path',
    path: '/predict/ko',
    body: MS({}),
    status: 404,
    type: 'ResourceNotFoundException',
    message: /not found/,
  },
];

/** Requests no HTTP client library sends: broken framing and header abuse, on a raw socket. */
interface RawCase {
  name: string;
  bytes: string | Buffer;
  /** Acceptable statuses (a front may name the problem 400 where the router says 431). */
  status: number[];
}
const HTTP_HEAD = 'POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\n';
const RAW_CASES: RawCase[] = [
  { name: 'garbage request line', bytes: 'HELLO THERE\r\n\r\n', status: [400] },
  {
    name: 'header block over 64 KiB',
    bytes: `${HTTP_HEAD}X-Big: ${'a'.repeat(70_000)}\r\nContent-Length: 2\r\n\r\n{}`,
    status: [400, 431],
  },
  {
    name: 'control character in a header',
    bytes: `${HTTP_HEAD}X-Bad: a\u0001b\r\nContent-Length: 2\r\n\r\n{}`,
    status: [400],
  },
  { name: 'non-numeric Content-Length', bytes: `${HTTP_HEAD}Content-Length: ten\r\n\r\n{}`, status: [400] },
  {
    name: 'conflicting Content-Lengths',
    bytes: `${HTTP_HEAD}Content-Length: 2\r\nContent-Length: 3\r\n\r\n{}`,
    status: [400],
  },
  {
    name: 'Content-Length with chunked',
    bytes: `${HTTP_HEAD}Content-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n`,
    status: [400],
  },
  {
    name: 'request target over 64 KiB',
    bytes: `GET /${'a'.repeat(70_000)} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n`,
    status: [400, 414, 431],
  },
  { name: 'unknown transfer coding', bytes: `${HTTP_HEAD}Transfer-Encoding: gzip\r\n\r\n{}`, status: [400] },
  {
    name: 'broken chunk framing',
    bytes: `${HTTP_HEAD}Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n`,
    status: [400],
  },
  {
    name: 'chunked body over the size limit',
    bytes:
      `${HTTP_HEAD}Transfer-Encoding: chunked\r\n\r\n${(4096).toString(16)}\r\n${'x'.repeat(4096)}\r\n`.repeat(1) +
      `${(4096).toString(16)}\r\n${'x'.repeat(4096)}\r\n`.repeat(ROUTER_MAX / 4096 + 1) +
      '0\r\n\r\n',
    status: [413],
  },
];

const STACK_TRACE = /\n\s+at |node_modules|\.ts:\d+|\.js:\d+/;

/** Runs `check`, collecting its assertion failure instead of stopping at the first: one run shows every bad answer. */
/** One case sent to `url` (its method, headers and body), answered within 10 s. */
const sendCase = (url: string, c: Case) =>
  send(url, {
    method: c.method ?? 'POST',
    headers: { 'content-type': 'application/json', ...c.headers },
    ...(c.body === undefined ? {} : { body: c.body }),
    deadlineMs: 10_000,
  });

function collect(problems: string[], check: () => void): void {
  try {
    check();
  } catch (err) {
    problems.push((err as Error).message.split('\n')[0]!);
  }
}

function expectErrorBody(
  what: string,
  status: number,
  text: string,
  expected: { status: number; type: string; message: RegExp },
) {
  expect(status, `${what}: ${text}`).toBe(expected.status);
  let parsed: { code?: unknown; type?: unknown; message?: unknown };
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new Error(`${what}: answered ${status} without a JSON body: ${text.slice(0, 300)}`);
  }
  expect(Object.keys(parsed).sort(), what).toEqual(['code', 'message', 'type']);
  expect(parsed.code, what).toBe(expected.status);
  expect(parsed.type, what).toBe(expected.type);
  expect(parsed.message, what).toMatch(expected.message);
  expect(text, `${what}: stack trace in the answer`).not.toMatch(STACK_TRACE);
}

describe('hostile and broken requests (real stack: tiny model, router, fronts)', () => {
  let stack: Stack;
  const fronts: { kind: string; url: string; proc: ManagedProcess }[] = [];
  let good: ReturnType<typeof background>;

  beforeAll(async () => {
    stack = await startStack({
      languages: LANGS,
      handler: 'translation',
      demoModel: 'tiny',
      env: {
        ROUTER_MAX_BODY_BYTES: String(ROUTER_MAX),
        MAX_REQUEST_SIZE: String(MODEL_SERVER_MAX),
        JOB_QUEUE_SIZE: String(QUEUE),
        MAX_REQUEST_CHARS: String(MAX_CHARS),
      },
      register: { batchSize: 8, maxBatchDelayMs: 5 },
    });
    fronts.push(...(await startFronts(stack, nginx ? ['builtin', 'nginx'] : ['builtin'], 'front-')));
    // Good traffic through the router all along: the bad requests must not disturb it.
    good = background({
      url: () => stack.routerUrls[0]!,
      body: (i) => translateBody(LANGS[i % LANGS.length]!, `good request ${i}`),
      concurrency: 3,
    });
  });
  afterAll(async () => {
    await good?.stop();
    for (const f of fronts) await f.proc.stop();
    await stack?.stop();
    await stopAll();
  });

  it(`has at least 40 distinct cases for the router and more for the model server`, () => {
    expect(ROUTER_CASES.length).toBeGreaterThanOrEqual(40);
    expect(new Set(ROUTER_CASES.map((c) => c.name)).size).toBe(ROUTER_CASES.length);
    expect(ROUTER_CASES.filter((c) => CONTRACT_CASES.has(c.name))).toHaveLength(CONTRACT_CASES.size);
    expect(ROUTER_CASES.length + MODEL_SERVER_CASES.length + RAW_CASES.length).toBeGreaterThanOrEqual(80);
  });

  const targets = () => [
    { name: 'router', url: stack.routerUrls[0]! },
    ...fronts.map((f) => ({ name: `front (${f.kind})`, url: f.url })),
  ];

  it('router and fronts: every case gets its 4xx and a JSON error naming the problem', async () => {
    const problems: string[] = [];
    for (const target of targets()) {
      for (const c of ROUTER_CASES) {
        const o = await sendCase(`${target.url}${c.path ?? '/'}`, c);
        collect(problems, () => expectErrorBody(`${target.name} ← ${c.name}`, o.status, o.body, c));
      }
    }
    expect(problems).toEqual([]);
  });

  it('model server inference API: every case gets its 4xx and a JSON error naming the problem', async () => {
    const problems: string[] = [];
    for (const c of MODEL_SERVER_CASES) {
      const o = await sendCase(`${stack.inference}${c.path ?? '/predictions/ko'}`, c);
      collect(problems, () => expectErrorBody(`model server ← ${c.name}`, o.status, o.body, c));
    }
    expect(problems).toEqual([]);
  });

  it('broken framing and header abuse: a JSON 4xx from every port, then the connection closes', async () => {
    const ports = [
      { name: 'router', port: Number(new URL(stack.routerUrls[0]!).port), max: ROUTER_MAX },
      ...fronts.map((f) => ({ name: `front (${f.kind})`, port: Number(new URL(f.url).port), max: ROUTER_MAX })),
      { name: 'model server inference', port: Number(new URL(stack.inference).port), max: MODEL_SERVER_MAX },
      { name: 'model server management', port: Number(new URL(stack.management).port), max: MODEL_SERVER_MAX },
    ];
    const problems: string[] = [];
    for (const target of ports) {
      for (const c of RAW_CASES) {
        // The chunked case is sized for the router's limit; the model server's is larger, so it is skipped there.
        if (c.status.includes(413) && target.max !== ROUTER_MAX) continue;
        const reply = await rawRequest(target.port, c.bytes);
        const what = `${target.name} ← ${c.name}`;
        collect(problems, () => {
          expect(c.status, `${what}: ${reply.status} ${reply.body}`).toContain(reply.status);
          const type = reply.status === 413 ? 'RequestEntityTooLargeException' : BAD;
          expectErrorBody(what, reply.status, reply.body, { status: reply.status, type, message: /\w/ });
        });
      }
    }
    expect(problems).toEqual([]);
  });

  it('the good traffic kept succeeding throughout', async () => {
    const tally: Tally = await good.stop();
    expect(tally.sent).toBeGreaterThan(10);
    expect(tally.toJSON()).toMatchObject({ ok: tally.sent, errors: {}, unanswered: 0 });
  });
});
