import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from 'undici';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { startBaseline, type Baseline } from '../lib/baseline.js';
import { stopAll, tempDir } from '../../harness/process-registry.js';

// The transformers.js baseline the batching-gain figure compares against, on the tiny generated model.
const work = tempDir('baseline-test');
let baseline: Baseline;

beforeAll(async () => {
  const modelDir = path.join(work.dir, 'tiny');
  makeDemoModel('tiny', modelDir);
  baseline = await startBaseline({ workDir: work.dir, name: 'test', modelDir, newTokens: 7, intraOpThreads: 1 });
});

afterAll(async () => {
  await stopAll();
  work.remove();
});

const post = async (body: unknown) => {
  const res = await request(`${baseline.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.statusCode, headers: res.headers, body: (await res.body.json()) as Record<string, unknown> };
};

describe('transformers.js baseline server', () => {
  it('answers the front contract with exactly the fixed number of generated tokens', async () => {
    for (const [src_lang, tgt_lang] of [
      ['en', 'ko'],
      ['ko', 'fr'],
    ]) {
      const res = await post({ src_lang, tgt_lang, src_text: 'The server answers every request in order.' });
      expect(res.status).toBe(200);
      expect(Object.keys(res.body)).toEqual(['translated']);
      expect(typeof res.body.translated).toBe('string');
      expect(res.headers['x-generated-tokens']).toBe('7');
    }
  });

  it('counts generated tokens per request when requests overlap', async () => {
    const answers = await Promise.all(
      Array.from({ length: 6 }, (_, i) =>
        post({ src_lang: 'en', tgt_lang: 'de', src_text: `Sentence number ${i} of a few.` }),
      ),
    );
    expect(answers.map((a) => [a.status, a.headers['x-generated-tokens']])).toEqual(
      Array.from({ length: 6 }, () => [200, '7']),
    );
  });

  it('refuses a request without the required fields', async () => {
    const res = await post({ src_lang: 'en', tgt_lang: 'ko' });
    expect(res).toMatchObject({
      status: 400,
      body: {
        code: 400,
        type: 'BadRequestException',
        message: 'src_lang, src_text and tgt_lang are required strings.',
      },
    });
  });
});
