/**
 * API keys on, in-process (`app.request`) against the fake model server, with the real key ring (a folder of key
 * files) and the real file usage store: each API's answer to a missing, wrong, limited and exhausted key, keys added
 * and revoked without a restart, usage counted per key, and keys never in the log.
 */
import { mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { until } from '../../harness/polling.js';
import { createRouterApp } from '../app.js';
import { hashKey } from '../keys/key-ring.js';
import { KeyedAccess } from '../keys/keyed-access.js';
import { Upstream } from '../upstream/upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const dir = mkdtempSync(path.join(tmpdir(), 'mt-keys-'));
const keysDir = path.join(dir, 'keys');
const SECRETS = {
  open: 'open-secret-1',
  quota: 'quota-secret-2',
  rate: 'rate-secret-3',
  period: 'period-secret-4',
  proto: 'proto-secret-5',
  admin: 'admin-secret-6',
  native: 'native-secret-7',
  refund: 'refund-secret-8',
};

let fake: FakeModelServer;
let upstream: Upstream;
let access: KeyedAccess;
let app: ReturnType<typeof createRouterApp>;
const logged: string[] = [];

beforeAll(async () => {
  mkdirSync(keysDir);
  writeFileSync(
    path.join(keysDir, 'team.json'),
    JSON.stringify({
      keys: [
        { id: 'open', sha256: hashKey(SECRETS.open) },
        { id: 'quota', sha256: hashKey(SECRETS.quota), character_quota: 10 },
        { id: 'rate', sha256: hashKey(SECRETS.rate), requests_per_second: 1 },
        { id: 'period', sha256: hashKey(SECRETS.period), characters_per_period: 6, period_s: 3600 },
        { id: '__proto__', sha256: hashKey(SECRETS.proto), character_quota: 10 },
        { id: 'admin', sha256: hashKey(SECRETS.admin), admin: true },
        { id: 'native', sha256: hashKey(SECRETS.native), character_quota: 10 },
        { id: 'refund', sha256: hashKey(SECRETS.refund), character_quota: 100 },
      ],
    }),
  );
  fake = await startFakeModelServer();
  upstream = new Upstream({ url: fake.url, connections: 4, timeoutMs: 10_000 });
  access = new KeyedAccess({ keys: keysDir, store: { kind: 'file', dir: path.join(dir, 'usage') } });
  const logger = pino(
    { level: 'info' },
    new Writable({
      write(chunk: Buffer, _enc, done) {
        logged.push(chunk.toString('utf8'));
        done();
      },
    }),
  );
  // The model server's status document, as router/status.ts would fetch it.
  const status = { read: () => Promise.resolve(new TextEncoder().encode('{"models":[]}')) };
  app = createRouterApp(
    { maxBodyBytes: 4096, languages: ['en', 'de'], logBodies: false },
    { upstream, logger, access, status },
  );
});
afterAll(async () => {
  await upstream.close();
  await fake.close();
  rmSync(dir, { recursive: true, force: true });
});

const deepl = (secret: string | undefined, text = 'Hello') =>
  app.request('/v2/translate', {
    method: 'POST',
    headers: {
      'content-type': 'application/x-www-form-urlencoded',
      ...(secret === undefined ? {} : { authorization: `DeepL-Auth-Key ${secret}` }),
    },
    body: new URLSearchParams({ text, source_lang: 'EN', target_lang: 'DE' }).toString(),
  });
const libre = (apiKey: string | undefined, q = 'Hello') =>
  app.request('/translate', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ q, source: 'en', target: 'de', ...(apiKey === undefined ? {} : { api_key: apiKey }) }),
  });
const bearer = (secret: string) => ({ authorization: `Bearer ${secret}` });
const native = (secret: string | undefined, text = 'Hello', target = app) =>
  target.request('/', {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...(secret === undefined ? {} : bearer(secret)) },
    body: JSON.stringify({ src_lang: 'en', tgt_lang: 'de', src_text: text }),
  });
const usage = async (secret: string) =>
  (await app.request('/v2/usage', { headers: { authorization: `DeepL-Auth-Key ${secret}` } })).json();

/** Sends one request at a time, at most 20, until one is not a 200: that one (undefined if none was). */
async function firstRefusal(send: () => Response | Promise<Response>): Promise<Response | undefined> {
  for (let i = 0; i < 20; i++) {
    const res = await send();
    if (res.status !== 200) return res;
  }
  return undefined;
}

describe('DeepL with keys on', () => {
  it('answers 403 without a key or with a wrong one, and translates with a good one', async () => {
    for (const secret of [undefined, 'wrong']) {
      const res = await deepl(secret);
      expect(res.status).toBe(403);
      expect(await res.json()).toEqual({ message: 'Forbidden' });
    }
    expect((await deepl(SECRETS.open)).status).toBe(200);
  });

  it('answers 456 past the character quota, and /v2/usage counts against it', async () => {
    expect((await deepl(SECRETS.quota, 'Hello')).status).toBe(200);
    const over = await deepl(SECRETS.quota, 'World!');
    expect(over.status).toBe(456);
    expect(await over.json()).toEqual({ message: 'Quota Exceeded' });
    expect(await usage(SECRETS.quota)).toEqual({ character_count: 5, character_limit: 10 });
    expect((await deepl(SECRETS.quota, 'Hi')).status).toBe(200);
  });

  it('answers 429 with Retry-After past the characters of its period', async () => {
    expect((await deepl(SECRETS.period, 'Hello')).status).toBe(200);
    const over = await deepl(SECRETS.period, 'World');
    expect(over.status).toBe(429);
    expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(Number(over.headers.get('retry-after'))).toBeLessThanOrEqual(3600);
    expect(await over.json()).toEqual({ message: 'Too many requests' });
  });

  it('answers 429 with Retry-After: 1 to the request past the requests per second', async () => {
    const refused = await firstRefusal(() => deepl(SECRETS.rate));
    expect(refused!.status).toBe(429);
    expect(refused!.headers.get('retry-after')).toBe('1');
  });
});

describe('LibreTranslate with keys on', () => {
  it("answers LibreTranslate's 400 without a key, 403 with a wrong one, and translates with a good one", async () => {
    const none = await libre(undefined);
    expect(none.status).toBe(400);
    expect(await none.json()).toEqual({ error: 'Please contact the server operator to get an API key' });
    const wrong = await libre('wrong');
    expect(wrong.status).toBe(403);
    expect(await wrong.json()).toEqual({ error: 'Invalid API key' });
    expect(await (await libre(SECRETS.open)).json()).toEqual({ translatedText: 'de:olleH' });
  });

  it('answers 429 Slowdown with Retry-After past the requests per second', async () => {
    const refused = await firstRefusal(() => libre(SECRETS.rate));
    expect(refused!.status).toBe(429);
    expect(refused!.headers.get('retry-after')).toBe('1');
    expect(await refused!.json()).toEqual({ error: 'Slowdown: 1 per 1 second' });
  });

  it('tells the frontend that keys are required', async () => {
    expect(await (await app.request('/frontend/settings')).json()).toMatchObject({ apiKeys: true, keyRequired: true });
  });
});

describe('the key ring', () => {
  it('takes a key added to the folder, and drops one removed, without a restart', async () => {
    const file = path.join(keysDir, 'late.json');
    writeFileSync(file, JSON.stringify({ id: 'late', sha256: hashKey('late-secret') }));
    await until('the added key to be accepted', async () => (await deepl('late-secret')).status === 200);
    unlinkSync(file);
    await until('the removed key to be refused', async () => (await deepl('late-secret')).status === 403);
  });

  it("shows each key's use by key id to an admin key only: /metrics and /status.json", async () => {
    for (const secret of [undefined, SECRETS.open, 'wrong']) {
      const res = await app.request('/metrics', secret === undefined ? {} : { headers: bearer(secret) });
      expect([res.status, await res.json()]).toEqual([
        401,
        {
          code: 401,
          type: 'InvalidKeyException',
          message: "The API keys' use is shown to an admin key: Authorization: Bearer <key>.",
        },
      ]);
      const page = await app.request('/status.json', secret === undefined ? {} : { headers: bearer(secret) });
      expect(await page.json()).toEqual({ models: [] });
    }
    const metrics = await (await app.request('/metrics', { headers: bearer(SECRETS.admin) })).text();
    expect(metrics).toContain('mt_api_key_characters_total{key_id="quota"} 7');
    expect(metrics).toContain('mt_api_key_character_quota{key_id="quota"} 10');
    const res = await app.request('/status.json', { headers: bearer(SECRETS.admin) });
    const status = (await res.json()) as { models: unknown; apiKeys: unknown[] };
    expect(status.models).toEqual([]);
    expect(status.apiKeys).toContainEqual({
      id: 'quota',
      requests: 2,
      characters: 7,
      requestsPerSecond: null,
      charactersPerPeriod: null,
      periodS: 60,
      characterQuota: 10,
    });
  });

  it('logs key ids, never keys', () => {
    const log = logged.join('');
    expect(log).toContain('"key":"open"');
    for (const secret of [...Object.values(SECRETS), 'late-secret']) expect(log).not.toContain(secret);
  });
});

describe('a usage store that fails', () => {
  it("answers each API's 500 in its shape and logs the failure", async () => {
    const file = path.join(dir, 'usage', 'usage.json');
    writeFileSync(file, 'not json');
    const deeplRes = await deepl(SECRETS.open);
    expect(deeplRes.status).toBe(500);
    expect(await deeplRes.json()).toEqual({ message: 'Internal server error.' });
    const libreRes = await libre(SECRETS.open);
    expect(libreRes.status).toBe(500);
    expect(await libreRes.json()).toEqual({ error: 'Internal server error.' });
    expect(logged.join('')).toContain('"msg":"unhandled error"');
    unlinkSync(file);
    expect((await deepl(SECRETS.open)).status).toBe(200);
  });
});

describe('every door needs a key (issue 40)', () => {
  it('refuses the native POST / without a key or with a wrong one, and counts it against a good one', async () => {
    const seen = fake.seen.length;
    const none = await native(undefined);
    expect([none.status, await none.json()]).toEqual([
      401,
      {
        code: 401,
        type: 'InvalidKeyException',
        message: 'An API key is required: send it as Authorization: Bearer <key>.',
      },
    ]);
    const wrong = await native('wrong');
    expect([wrong.status, await wrong.json()]).toMatchObject([401, { message: 'The API key is not valid.' }]);
    expect(fake.seen.length).toBe(seen);
    const good = await native(SECRETS.native, 'Hello');
    expect([good.status, await good.json()]).toEqual([200, { translated: 'de:olleH' }]);
    // DeepL's header works too: one key for every door.
    const deeplHeader = await app.request('/', {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `DeepL-Auth-Key ${SECRETS.native}` },
      body: JSON.stringify({ src_lang: 'en', tgt_lang: 'de', src_text: 'Hi' }),
    });
    expect(deeplHeader.status).toBe(200);
    expect(await usage(SECRETS.native)).toEqual({ character_count: 7, character_limit: 10 });
    const over = await native(SECRETS.native, 'Hello');
    expect([over.status, await over.json()]).toEqual([
      403,
      {
        code: 403,
        type: 'QuotaExceededException',
        message: 'The character quota of API key "native" (10) is used up.',
      },
    ]);
    // The same text through DeepL: the quota is the key's, whichever door.
    expect((await deepl(SECRETS.native, 'Hello')).status).toBe(456);
  });

  it('answers the native 429 with Retry-After past the requests per second', async () => {
    const refused = await firstRefusal(() => native(SECRETS.rate));
    expect([refused!.status, refused!.headers.get('retry-after')]).toEqual([429, '1']);
    expect(await refused!.json()).toEqual({
      code: 429,
      type: 'TooManyRequestsException',
      message: 'API key "rate" may send 1 requests per second.',
    });
  });

  it('leaves POST / open, uncounted, only with NATIVE_API_OPEN', async () => {
    const open = createRouterApp(
      { maxBodyBytes: 4096, languages: ['en', 'de'], logBodies: false, nativeApiOpen: true },
      { upstream, logger: pino({ level: 'silent' }), access },
    );
    expect((await native(undefined, 'Hello', open)).status).toBe(200);
    expect((await deepl(undefined)).status).toBe(403);
  });

  it('has no KServe door on the public port: /v2/models/… is answered 404 and never reaches a model server', async () => {
    const seen = fake.seen.length;
    for (const path of ['/v2/models/de/infer', '/v2/models/de/versions/1/infer']) {
      const res = await app.request(path, {
        method: 'POST',
        headers: { 'content-type': 'application/json', ...bearer(SECRETS.open) },
        body: JSON.stringify({ inputs: [{ name: 'src_text', shape: [1], datatype: 'BYTES', data: ['Hello'] }] }),
      });
      expect(res.status).toBe(404);
    }
    expect(fake.seen.length).toBe(seen);
  });

  it('counts a key whose id is __proto__', async () => {
    expect((await deepl(SECRETS.proto, 'Hello')).status).toBe(200);
    expect((await deepl(SECRETS.proto, 'World')).status).toBe(200);
    expect((await deepl(SECRETS.proto, 'Again')).status).toBe(456);
    expect(await usage(SECRETS.proto)).toEqual({ character_count: 10, character_limit: 10 });
  });

  it('bills nothing for a translation the model server refused, through every door', async () => {
    const busy = '!status 503 1';
    const refusals = [
      await deepl(SECRETS.refund, busy),
      await libre(SECRETS.refund, busy),
      await native(SECRETS.refund, busy),
    ];
    expect(refusals.map((r) => r.status)).toEqual([429, 429, 503]);
    expect(await usage(SECRETS.refund)).toEqual({ character_count: 0, character_limit: 100 });
    expect((await deepl(SECRETS.refund, 'Hello')).status).toBe(200);
    expect(await usage(SECRETS.refund)).toEqual({ character_count: 5, character_limit: 100 });
  });
});
