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
import { Upstream } from '../upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const dir = mkdtempSync(path.join(tmpdir(), 'mt-keys-'));
const keysDir = path.join(dir, 'keys');
const SECRETS = { open: 'open-secret-1', quota: 'quota-secret-2', rate: 'rate-secret-3', period: 'period-secret-4' };

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

  it("exposes each key's use by key id: /metrics and /status.json", async () => {
    const metrics = await (await app.request('/metrics')).text();
    expect(metrics).toContain('mt_api_key_characters_total{key_id="quota"} 7');
    expect(metrics).toContain('mt_api_key_character_quota{key_id="quota"} 10');
    const res = await app.request('/status.json');
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
