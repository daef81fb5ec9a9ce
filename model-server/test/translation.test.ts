import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../engine/demo-model/index.js';
import { call, metricValue, startTestServer, type TestServer } from './helpers.js';

describe('translation handler behind the model server (generated tiny M2M100)', () => {
  let t: TestServer;
  let modelRoot: string;
  beforeAll(async () => {
    modelRoot = mkdtempSync(path.join(tmpdir(), 'mt-serve-tiny-'));
    makeDemoModel('tiny', modelRoot);
    t = await startTestServer({
      entries: ['ko', 'en', 'fr'],
      handler: 'translation',
      modelDir: modelRoot,
      setupConfig: { cuda_id: { ko: '0', en: '0', fr: '1' } },
      config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1 },
    });
    for (const m of ['ko', 'en', 'fr']) {
      const res = await call(`${t.management}/models?url=${m}&batch_size=8&max_batch_delay=5`, { method: 'POST' });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
  });
  afterAll(async () => {
    await t?.close();
    rmSync(modelRoot, { recursive: true, force: true });
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

    const pids = new Set<number>();
    for (const m of ['ko', 'en', 'fr']) pids.add((await call(`${t.management}/models/${m}`)).body[0].workers[0].pid);
    expect(pids.size).toBe(1);
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
