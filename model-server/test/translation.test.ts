import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, metricValue } from '../../harness/http.js';
import { startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

describe('translation handler behind the model server (generated tiny M2M100)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['ko', 'en', 'fr'], {
      workers: 'in-process',
      setupConfig: { cuda_id: { ko: '0', en: '0', fr: '1' } },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it('translates one text and an array, on one CPU engine shared by every language, and says so', async () => {
    const one = await call(`${t.inference}/predictions/ko`, { body: { src_lang: 'en', src_text: 'Hello world' } });
    expect(one.status, JSON.stringify(one.body)).toBe(200);
    expect(typeof one.body.translated).toBe('string');
    expect(one.headers.get('x-device')).toBe('cpu');
    expect(one.headers.get('x-device-fallback')).toBe('cuda:0 requested; no GPU on the test host');

    const texts = ['Hello world', 'How are you?', 'Good morning'];
    const many = await call(`${t.inference}/predictions/fr`, { body: { src_lang: 'en', src_text: texts } });
    expect(many.status, JSON.stringify(many.body)).toBe(200);
    expect(many.body.translated).toHaveLength(3);
    // Each element is what a single request for that text answers: batching does not change results.
    const alone = await call(`${t.inference}/predictions/fr`, { body: { src_lang: 'en', src_text: texts[1] } });
    expect(many.body.translated[1]).toBe(alone.body.translated);

    const workers = new Set<string>();
    for (const m of ['ko', 'en', 'fr']) workers.add((await call(`${t.management}/models/${m}`)).body[0].workers[0].id);
    expect(workers.size).toBe(1);
  });

  it('concurrent requests for different languages share decoder runs: the engine metrics show its real batch', async () => {
    const sum = (text: string, name: string) =>
      text
        .split('\n')
        .filter((line) => line.startsWith(`${name}{`))
        .reduce((n, line) => n + Number(line.split(' ').pop()), 0);
    const before = (await call(`${t.metrics}/metrics`)).body as string;
    const answers = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(`${t.inference}/predictions/${['ko', 'en', 'fr'][i % 3]}`, {
          body: { src_lang: 'en', src_text: `Good morning number ${i}` },
        }),
      ),
    );
    for (const a of answers) expect(a.status).toBe(200);
    const after = (await call(`${t.metrics}/metrics`)).body as string;
    const steps = sum(after, 'mt_engine_steps_total') - sum(before, 'mt_engine_steps_total');
    const rows = sum(after, 'mt_engine_step_rows_total') - sum(before, 'mt_engine_step_rows_total');
    expect(steps).toBeGreaterThan(0);
    // Twelve one-sentence requests generating ≤ 16 tokens each, alone, would take ≥ 12 runs of 1 row per token.
    expect(rows / steps).toBeGreaterThan(2);
  });

  it('fails a bad input alone, with the catalogued 400', async () => {
    const [good, unknown] = await Promise.all([
      call(`${t.inference}/predictions/en`, { body: { src_lang: 'ko', src_text: '안녕하세요' } }),
      call(`${t.inference}/predictions/en`, { body: { src_lang: 'xx', src_text: 'hi' } }),
    ]);
    expect(good.status).toBe(200);
    expect(unknown.status).toBe(400);
    expect(unknown.body).toMatchObject({ code: 400, type: 'BadRequestException' });
    const text = (await call(`${t.metrics}/metrics`)).body as string;
    expect(metricValue(text, 'mt_requests_total', { model_name: 'en', code: '400' })).toBe(1);
  });
});

describe('documents, not just sentences (generated tiny M2M100 behind the model server)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['ko', 'en', 'de', 'zh'], {
      workers: 'in-process',
      batchSize: 16,
      config: { maxRequestSentences: 40 },
    });
  });
  afterAll(async () => {
    await t?.close();
  });
  const translate = async (tgt: string, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
    const res = await call(`${t.inference}/predictions/${tgt}`, { body, headers });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { translated: string | string[]; detected_src_lang?: string | string[] };
  };

  it("a document's translation is exactly its sentences' translations joined by the separators between them", async () => {
    const sentences = [
      'The meeting starts at 10:30 tomorrow.',
      'Dr. Lee will present the results.',
      'Please bring 3.5 kg of paper!',
      'Is that clear?',
      'Thanks.',
    ];
    const separators = ['  ', ' ', '\n\n', '\n  '];
    const doc = `${sentences[0]}${separators.map((sep, i) => sep + sentences[i + 1]).join('')}\n`;
    const alone = await Promise.all(sentences.map((s) => translate('de', { src_lang: 'en', src_text: s })));
    const expected = `${alone[0]!.translated}${separators.map((sep, i) => sep + alone[i + 1]!.translated).join('')}\n`;
    // no-store: the sentences translated alone must run again, not come from the translation cache.
    const whole = await translate('de', { src_lang: 'en', src_text: doc }, { 'cache-control': 'no-store' });
    expect(whole.translated).toBe(expected);
    // Each sentence was its own job: the batcher saw 5 jobs for the document.
    const metrics = (await call(`${t.metrics}/metrics`)).body as string;
    expect(metricValue(metrics, 'mt_jobs_total', { model_name: 'de', outcome: 'ok' })).toBe(10);
  });

  it('a sentence longer than the model reads is translated whole: the answer covers all of it, never cut', async () => {
    // The tiny model reads 128 tokens; 150 words without a sentence end are several windows.
    const long = Array.from({ length: 150 }, (_, i) => ['alpha', 'beta', 'gamma', 'delta'][i % 4]).join(' ');
    const whole = (await translate('ko', { src_lang: 'en', src_text: long })).translated as string;
    const firstWindow = (await translate('ko', { src_lang: 'en', src_text: long.split(' ').slice(0, 40).join(' ') }))
      .translated as string;
    // More parts, more translated text than any one window gives.
    expect(whole.length).toBeGreaterThan(firstWindow.length);
  });

  it('src_lang "auto": detected per text, reported beside the translation, and used as the source', async () => {
    const german = 'Der Zug nach Berlin hatte heute Morgen fast eine Stunde Verspätung.';
    const korean = '오늘 저녁에는 친구들과 함께 영화를 보러 갈 거예요.';
    const auto = await translate('en', { src_lang: 'auto', src_text: [german, korean] });
    expect(auto.detected_src_lang).toEqual(['de', 'ko']);
    const explicit = await translate('en', { src_lang: 'de', src_text: german });
    expect((auto.translated as string[])[0]).toBe(explicit.translated);
    const single = await translate('zh', { src_lang: 'auto', src_text: german });
    expect(single.detected_src_lang).toBe('de');
    const unsure = await call(`${t.inference}/predictions/en`, { body: { src_lang: 'auto', src_text: 'ok' } });
    expect(unsure).toMatchObject({ status: 400, body: { code: 400, type: 'BadRequestException' } });
    expect(unsure.body.message).toMatch(/^Could not detect the language of src_text/);
  });

  it('past the sentence limit: 413 naming MAX_REQUEST_SENTENCES, never a shortened 200', async () => {
    const doc = Array.from({ length: 41 }, (_, i) => `Sentence number ${i} is here.`).join(' ');
    const res = await call(`${t.inference}/predictions/en`, { body: { src_lang: 'de', src_text: doc } });
    expect(res).toMatchObject({ status: 413, body: { code: 413, type: 'RequestEntityTooLargeException' } });
    expect(res.body.message).toBe(
      'Request has more than 40 sentences; at most 40 are translated in one request (MAX_REQUEST_SENTENCES): split it into several requests.',
    );
  });
});

describe('fair to everyone else: a single sentence during a long document (generated tiny M2M100)', () => {
  let t: TestServer;
  beforeAll(async () => {
    // Every row generates exactly 100 tokens: the order of the answers is the scheduler's, not the model's.
    t = await startTinyTranslationServer(['ko'], {
      workers: 'in-process',
      batchSize: 64,
      config: { maxNewTokens: 100, minNewTokens: 100 },
    });
  });
  afterAll(async () => {
    await t?.close();
  });
  /** Nothing from the cache: both answers are the engine's. */
  const post = async (text: string) => {
    const res = await call(`${t.inference}/predictions/ko`, {
      body: { src_lang: 'en', src_text: text },
      headers: { 'cache-control': 'no-store' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body as { translated: string };
  };

  it('a sentence sent while a long document generates is answered first, and as it is alone', async () => {
    const single = 'Where is the station?';
    const alone = await post(single);
    // 200 bulk jobs: 64 on the worker (its cap, batch_size 64), the rest waiting their turn in the queue.
    const document = Array.from({ length: 200 }, (_, i) => `This is sentence number ${i} of a long report.`).join(' ');
    const order: string[] = [];
    const doc = post(document).then((r) => (order.push('document'), r));
    const server = t;
    await until(
      'the document filling the worker',
      async () => (await call(`${server.management}/models/ko`)).body[0].jobQueueStatus.pendingRequests > 0,
    );
    const answer = await post(single);
    order.push('single');
    await doc;
    expect(order).toEqual(['single', 'document']);
    expect(answer.translated).toBe(alone.translated);
  });
});
