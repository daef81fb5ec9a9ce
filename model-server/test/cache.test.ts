/**
 * The translation cache in a real model server with real workers on the generated tiny model: a hit never reaches
 * the engine and is the fresh answer byte for byte; Cache-Control: no-cache bypasses it; a sentence seen before hits
 * inside a new document; only successful answers are stored; its metrics move; CACHE_MAX_BYTES=0 turns it off.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, metricValue } from '../../harness/http.js';
import {
  startTestServer,
  startTinyTranslationServer,
  type TestServer,
  type TestServerOptions,
} from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

let t: TestServer;

beforeAll(async () => {
  t = await startTinyTranslationServer(['ko', 'de'], { config: { cacheDisclose: true } });
});
afterAll(async () => {
  await t?.close();
});

/** Another server on the same generated model, serving `ko` (not yet registered) with `config` on its settings. */
const startKoServer = (config: TestServerOptions['config'] = {}) =>
  startTestServer({
    entries: ['ko'],
    handler: 'translation',
    modelDir: t.modelDir,
    config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1, ...config },
  });

/** The raw answer: status, body bytes as text, the cache header. */
async function translate(model: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await fetch(`${t.inference}/predictions/${model}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, text: await res.text(), cache: res.headers.get('x-cache'), headers: res.headers };
}

/** The counters a hit must leave alone, and the cache's own. */
async function counters(model: string) {
  const text = (await call(`${t.metrics}/metrics`)).body as string;
  const sum = (name: string) =>
    text
      .split('\n')
      .filter((line) => line.startsWith(`${name}{`))
      .reduce((n, line) => n + Number(line.split(' ').pop()), 0);
  const labels = { model_name: model };
  return {
    steps: sum('mt_engine_steps_total'),
    rows: sum('mt_engine_step_rows_total'),
    jobs: sum('mt_jobs_total'),
    hits: metricValue(text, 'mt_cache_hits_total', labels) ?? 0,
    misses: metricValue(text, 'mt_cache_misses_total', labels) ?? 0,
    bytes: metricValue(text, 'mt_cache_bytes', {}) ?? 0,
  };
}

/**
 * The counters once the engine has reported the steps of work it ran: a worker reports them with each finished
 * batch, just after the answers of its jobs.
 */
async function countersAfterSteps(model: string, before: { steps: number }) {
  return until('the engine reporting its steps', async () => {
    const now = await counters(model);
    return now.steps > before.steps ? now : undefined;
  });
}

describe('translation cache', () => {
  it('a repeated request never reaches the engine and answers the fresh bytes', async () => {
    const body = { src_lang: 'en', src_text: 'The weather is fine today.' };
    const before = await counters('ko');
    const fresh = await translate('ko', body);
    expect(fresh.status, fresh.text).toBe(200);
    expect(fresh.cache).toBe('miss');
    const afterFresh = await countersAfterSteps('ko', before);
    expect(afterFresh.misses).toBe(before.misses + 1);
    expect(afterFresh.bytes).toBeGreaterThan(0);

    const hit = await translate('ko', body);
    expect(hit.status).toBe(200);
    expect(hit.cache).toBe('hit');
    expect(hit.text).toBe(fresh.text);
    expect(hit.headers.get('x-worker-id')).toBeNull();
    expect(hit.headers.get('x-model-name')).toBe('ko');
    expect(hit.headers.get('x-device')).toBe(fresh.headers.get('x-device'));
    const afterHit = await counters('ko');
    expect(afterHit).toEqual({ ...afterFresh, hits: afterFresh.hits + 1 });
  });

  it('Cache-Control: no-cache runs the engine again, and its answer is the cached one', async () => {
    const body = { src_lang: 'en', src_text: 'Please send the report by Friday.' };
    const start = await counters('de');
    const first = await translate('de', body);
    const before = await countersAfterSteps('de', start);
    const bypass = await translate('de', body, { 'cache-control': 'no-cache' });
    expect(bypass.status).toBe(200);
    expect(bypass.cache).toBeNull();
    expect(bypass.text).toBe(first.text);
    const after = await countersAfterSteps('de', before);
    expect(after.jobs).toBe(before.jobs + 1);
    expect({ hits: after.hits, misses: after.misses }).toEqual({ hits: before.hits, misses: before.misses });
  });

  it('a sentence seen before hits inside a new document, and the document is the fresh one', async () => {
    const seen = 'The train leaves at nine.';
    await translate('ko', { src_lang: 'en', src_text: seen });
    const doc = `Good morning everyone. ${seen}\n\nSee you soon.`;
    const fresh = await translate('ko', { src_lang: 'en', src_text: doc }, { 'cache-control': 'no-store' });
    const before = await counters('ko');
    const mixed = await translate('ko', { src_lang: 'en', src_text: doc.replace('Good morning', 'Hello') });
    expect(mixed.status).toBe(200);
    expect(mixed.cache).toBe('partial');
    const after = await counters('ko');
    // "See you soon." was stored by neither earlier request (no-store): it and the new first sentence run.
    expect(after.hits).toBe(before.hits + 1);
    expect(after.misses).toBe(before.misses + 2);
    expect(after.jobs).toBe(before.jobs + 2);
    // The same document again is answered whole from the cache, equal to a fresh translation of it.
    const again = await translate('ko', { src_lang: 'en', src_text: doc });
    expect(again.cache).toBe('partial');
    const fullyCached = await translate('ko', { src_lang: 'en', src_text: doc });
    expect(fullyCached.cache).toBe('hit');
    expect(fullyCached.text).toBe(fresh.text);
  });

  it("a sentence the engine refuses fails its document with that sentence's error, beside a cached one", async () => {
    const glossary = { owl: '<pad>', fox: '</s>' };
    const seen = 'The bridge opens at noon.';
    expect((await translate('ko', { src_lang: 'en', src_text: seen, glossary })).status).toBe(200);
    // Both refused sentences fail in the worker; the answer is the first one's in the plan, whichever settles first.
    const doc = `${seen} An owl sleeps. A fox runs.`;
    const refused = await translate('ko', { src_lang: 'en', src_text: doc, glossary });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.text)).toEqual({
      code: 400,
      type: 'BadRequestException',
      message: 'The glossary term "<pad>" has characters this model cannot write.',
    });
  });

  it('stores only successful answers', async () => {
    const bad = { src_lang: 'xx', src_text: 'Hello there.' };
    const first = await translate('ko', bad);
    expect(first.status).toBe(400);
    const before = await counters('ko');
    const second = await translate('ko', bad);
    expect(second.text).toBe(first.text);
    const after = await counters('ko');
    expect(after.misses).toBe(before.misses + 1);
    expect(after.hits).toBe(before.hits);
  });
});

describe('without CACHE_DISCLOSE', () => {
  it('answers from the cache without saying so: no x-cache for strangers, the counters for operators', async () => {
    const quiet = await startKoServer();
    try {
      expect((await call(`${quiet.management}/models?url=ko`, { method: 'POST' })).status).toBe(200);
      const body = JSON.stringify({ src_lang: 'en', src_text: 'Hello there, stranger.' });
      const answers = [];
      for (let i = 0; i < 2; i++) {
        const r = await fetch(`${quiet.inference}/predictions/ko`, { method: 'POST', body });
        answers.push({ cache: r.headers.get('x-cache'), text: await r.text() });
      }
      expect(answers[1]!.text).toBe(answers[0]!.text);
      expect(answers.map((a) => a.cache)).toEqual([null, null]);
      const text = (await call(`${quiet.metrics}/metrics`)).body as string;
      expect(metricValue(text, 'mt_cache_hits_total', { model_name: 'ko' })).toBe(1);
    } finally {
      await quiet.close();
    }
  });
});

describe('CACHE_MAX_BYTES=0', () => {
  it('turns the cache off: every request runs, nothing is counted', async () => {
    const off = await startKoServer({ cacheMaxBytes: 0 });
    try {
      expect((await call(`${off.management}/models?url=ko`, { method: 'POST' })).status).toBe(200);
      const body = { src_lang: 'en', src_text: 'Hello world.' };
      const res = [];
      for (let i = 0; i < 2; i++) {
        const r = await fetch(`${off.inference}/predictions/ko`, { method: 'POST', body: JSON.stringify(body) });
        res.push({ cache: r.headers.get('x-cache'), worker: r.headers.get('x-worker-id'), text: await r.text() });
      }
      expect(res[0]!.text).toBe(res[1]!.text);
      expect(res.map((r) => r.cache)).toEqual([null, null]);
      expect(res[1]!.worker).not.toBeNull();
      const text = (await call(`${off.metrics}/metrics`)).body as string;
      expect(metricValue(text, 'mt_cache_hits_total', { model_name: 'ko' })).toBeUndefined();
      expect(metricValue(text, 'mt_cache_bytes', {})).toBe(0);
    } finally {
      await off.close();
    }
  });
});
