/**
 * Routing per language pair (setup_config.json's `pairs`): the router sends a pair with a model of its own to that
 * model's store entry and every other pair to its target's, through a real model server serving an NLLB stand-in
 * for every target and a Marian en→de stand-in for that pair; a pair no model serves is a 400 naming those served.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SetupConfig } from '../../common/config.js';
import { call } from '../../harness/http.js';
import { registerModel, startTestServer, type TestServer } from '../../harness/model-server.js';
import { archiveModels } from '../../model-server/tools/archiver.js';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { createRouterApp } from '../app.js';
import { Upstream } from '../upstream/upstream.js';

const root = mkdtempSync(path.join(tmpdir(), 'pairs-'));
const nllb = path.join(root, 'nllb');
const opus = path.join(root, 'opus');
let t: TestServer;
let upstream: Upstream;

beforeAll(async () => {
  makeDemoModel('tiny-nllb', nllb, { quantize: false });
  makeDemoModel('tiny-opus-mt-en-de', opus, { quantize: false });
  t = await startTestServer({
    entries: ['de', 'ko'],
    handler: 'translation',
    modelDir: nllb,
    config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1, modelDtype: 'fp32' },
  });
  archiveModels({ modelDir: opus, store: t.store, names: ['en-de'], handler: 'translation' });
  for (const entry of ['de', 'ko', 'en-de']) await registerModel(t, `url=${entry}&batch_size=8&max_batch_delay=5`);
  upstream = new Upstream({ url: t.inference, connections: 4, timeoutMs: 30_000 });
}, 120_000);
afterAll(async () => {
  await upstream?.close();
  await t?.close();
  rmSync(root, { recursive: true, force: true });
});

function router(routes: SetupConfig) {
  return createRouterApp(
    { maxBodyBytes: 65_536, languages: Object.keys(routes.cuda_id), logBodies: false, routes },
    { upstream, logger: pino({ level: 'silent' }) },
  );
}

async function post(app: ReturnType<typeof router>, body: object) {
  const res = await app.request('/', {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, model: res.headers.get('x-model-name'), body: (await res.json()) as any };
}

describe('routing per language pair', () => {
  const routes: SetupConfig = {
    cuda_id: { de: '0', ko: '0' },
    pairs: { 'en-de': { model_dir: opus, cuda_id: '0' } },
  };

  it("sends a pair with a model of its own there, and every other pair to its target's model", async () => {
    const app = router(routes);
    const text = 'good morning the quick brown fox';
    const enDe = await post(app, { src_lang: 'en', src_text: text, tgt_lang: 'de' });
    expect(enDe, JSON.stringify(enDe.body)).toMatchObject({ status: 200, model: 'en-de' });
    // What the Marian model itself answers (its entry translates into its target, de).
    const direct = await call(`${t.inference}/predictions/en-de`, { body: { src_lang: 'en', src_text: text } });
    expect(enDe.body.translated).toBe(direct.body.translated);
    const frDe = await post(app, { src_lang: 'fr', src_text: text, tgt_lang: 'de' });
    expect(frDe).toMatchObject({ status: 200, model: 'de' });
    expect(frDe.body.translated).not.toBe(enDe.body.translated);
    expect(await post(app, { src_lang: 'en', src_text: text, tgt_lang: 'ko' })).toMatchObject({
      status: 200,
      model: 'ko',
    });
  });

  it('a pair no model serves is a 400 naming the pairs served', async () => {
    const app = router({ cuda_id: { ko: '0' }, pairs: routes.pairs! });
    expect(await post(app, { src_lang: 'fr', src_text: 'bonjour', tgt_lang: 'de' })).toEqual({
      status: 400,
      model: null,
      body: {
        code: 400,
        type: 'BadRequestException',
        message: 'Pair fr → de is not served; served: any → ko, en → de.',
      },
    });
    expect((await post(app, { src_lang: 'en', src_text: 'hello', tgt_lang: 'de' })).model).toBe('en-de');
  });
});
