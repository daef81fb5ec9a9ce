/**
 * Routing per language pair (setup_config.json's `pairs`): the router sends a pair with a model of its own to that
 * model's store entry and every other pair to its target's, through a real model server serving an NLLB stand-in
 * for every target and a Marian en→de stand-in for that pair; a pair no model serves is a 400 naming those served.
 * `POST /`, DeepL and LibreTranslate (texts and files) alike; `auto` text is detected before routing; the language
 * lists show what the pairs add.
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
import { DocumentJobs } from '../apis/documents.js';
import { translateTexts } from '../apis/translate-texts.js';
import { createLanguageRoutes } from '../language-routes.js';
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
const jobs: DocumentJobs[] = [];
afterAll(async () => {
  for (const job of jobs) await job.close(0);
  await upstream?.close();
  await t?.close();
  rmSync(root, { recursive: true, force: true });
});

function router(routes: SetupConfig) {
  const languages = Object.keys(routes.cuda_id);
  const languageRoutes = createLanguageRoutes(languages, routes);
  const documents = new DocumentJobs({
    dir: mkdtempSync(path.join(root, 'documents-')),
    translate: (request) => translateTexts({ languages, upstream, routes: languageRoutes }, request),
  });
  jobs.push(documents);
  return createRouterApp(
    { maxBodyBytes: 65_536, languages, logBodies: false, routes },
    { upstream, logger: pino({ level: 'silent' }), documents },
  );
}

/** A form (or, with a file, a multipart) request to one of the compatible APIs; its status and JSON body. */
async function api(app: ReturnType<typeof router>, route: string, fields: Record<string, string>, file?: string) {
  let init: RequestInit;
  if (file === undefined) {
    init = {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(fields).toString(),
    };
  } else {
    const form = new FormData();
    for (const [name, value] of Object.entries(fields)) form.append(name, value);
    form.append('file', new Blob([file]), 'a.txt');
    init = { method: 'POST', body: form };
  }
  const res = await app.request(route, init);
  return { status: res.status, body: (await res.json()) as any };
}

/** What a model's own entry answers for `text` (the pair's entry translates into its target, the others need one). */
async function direct(entry: string, text: string) {
  const reply = await call(`${t.inference}/predictions/${entry}`, { body: { src_lang: 'en', src_text: text } });
  return reply.body.translated as string;
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

describe('the compatible APIs route per pair', () => {
  const pairs: SetupConfig['pairs'] = { 'en-de': { model_dir: opus, cuda_id: '0' } };
  const text = 'good morning the quick brown fox';
  const french = 'bonjour mes amis, comment allez-vous ce matin';

  it("DeepL and LibreTranslate send en → de to the pair's model, other sources to the target's", async () => {
    const app = router({ cuda_id: { de: '0', fr: '0', ko: '0' }, pairs });
    const enDe = await direct('en-de', text);
    const deepl = await api(app, '/v2/translate', { text, source_lang: 'EN', target_lang: 'DE' });
    expect(deepl, JSON.stringify(deepl.body)).toMatchObject({ status: 200 });
    expect(deepl.body.translations[0].text).toBe(enDe);
    const libre = await api(app, '/translate', { q: text, source: 'en', target: 'de' });
    expect(libre).toEqual({ status: 200, body: { translatedText: enDe } });
    const frDe = await api(app, '/translate', { q: text, source: 'fr', target: 'de' });
    expect(frDe.status).toBe(200);
    expect(frDe.body.translatedText).not.toBe(enDe);
  });

  it("files go through the pair's model too", async () => {
    const app = router({ cuda_id: { de: '0', ko: '0' }, pairs });
    const made = await api(app, '/translate_file', { source: 'en', target: 'de' }, `${text}\n`);
    expect(made, JSON.stringify(made.body)).toMatchObject({ status: 200 });
    const file = await app.request(new URL(made.body.translatedFileUrl as string).pathname);
    expect((await file.text()).trim()).toBe(await direct('en-de', text));
  });

  it("DeepL's documents go through the pair's model too", async () => {
    const app = router({ cuda_id: { de: '0', ko: '0' }, pairs });
    const made = await api(app, '/v2/document', { source_lang: 'EN', target_lang: 'DE' }, `${text}\n`);
    expect(made, JSON.stringify(made.body)).toMatchObject({ status: 200 });
    const handle = { document_key: made.body.document_key as string };
    await jobs.at(-1)!.settled(made.body.document_id as string);
    const result = await app.request(`/v2/document/${made.body.document_id}/result`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(handle).toString(),
    });
    expect((await result.text()).trim()).toBe(await direct('en-de', text));
  });

  it('a glossary for a pair no model serves is refused; one for a served pair goes on', async () => {
    const app = router({ cuda_id: { fr: '0', ko: '0' }, pairs });
    const glossary = (source_lang: string) => ({ name: 'g', source_lang, target_lang: 'DE', entries: 'a\tb' });
    const refused = { status: 400, body: { message: 'Unsupported glossary source and target language pair.' } };
    expect(await api(app, '/v2/glossaries', glossary('FR'))).toEqual(refused);
    const v3 = (source_lang: string) =>
      app.request('/v3/glossaries', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'g',
          dictionaries: [{ source_lang, target_lang: 'DE', entries: 'a\tb', entries_format: 'tsv' }],
        }),
      });
    const v3Fr = await v3('FR');
    expect({ status: v3Fr.status, body: await v3Fr.json() }).toEqual(refused);
    // Past the language check: this router keeps no glossaries.
    expect(await api(app, '/v2/glossaries', glossary('EN'))).toEqual({
      status: 503,
      body: { message: 'Glossaries are not available.' },
    });
    expect((await v3('EN')).status).toBe(503);
  });

  it('an unserved pair is refused in each API’s own shape and wording', async () => {
    const app = router({ cuda_id: { fr: '0', ko: '0' }, pairs });
    expect(await api(app, '/v2/translate', { text: french, source_lang: 'FR', target_lang: 'DE' })).toEqual({
      status: 400,
      body: { message: 'Unsupported source and target language pair: FR → DE.' },
    });
    expect(await api(app, '/v2/document', { source_lang: 'FR', target_lang: 'DE' }, french)).toEqual({
      status: 400,
      body: { message: 'Unsupported source and target language pair: FR → DE.' },
    });
    const refusal = { error: 'German (de) is not available as a target language from French (fr)' };
    expect(await api(app, '/translate', { q: french, source: 'fr', target: 'de' })).toEqual({
      status: 400,
      body: refusal,
    });
    expect(await api(app, '/translate_file', { source: 'fr', target: 'de' }, french)).toEqual({
      status: 400,
      body: refusal,
    });
  });

  it("auto-detected English to de reaches the pair's model; other text stays on the target's", async () => {
    const app = router({ cuda_id: { de: '0', ko: '0' }, pairs });
    const enDe = await direct('en-de', text);
    const native = await post(app, { src_lang: 'auto', src_text: text, tgt_lang: 'de' });
    expect(native, JSON.stringify(native.body)).toMatchObject({
      status: 200,
      model: 'en-de',
      body: { translated: enDe, detected_src_lang: 'en' },
    });
    expect(await post(app, { src_lang: 'auto', src_text: french, tgt_lang: 'de' })).toMatchObject({
      status: 200,
      model: 'de',
      body: { detected_src_lang: 'fr' },
    });
    // No pair writes ko: its model detects, as without pairs.
    expect((await post(app, { src_lang: 'auto', src_text: text, tgt_lang: 'ko' })).model).toBe('ko');
    const deepl = await api(app, '/v2/translate', { text, target_lang: 'DE' });
    expect(deepl.body.translations, JSON.stringify(deepl.body)).toEqual([
      { detected_source_language: 'EN', text: enDe },
    ]);
    const libre = await api(app, '/translate', { q: text, source: 'auto', target: 'de' });
    expect(libre.body, JSON.stringify(libre.body)).toMatchObject({
      translatedText: enDe,
      detectedLanguage: { language: 'en' },
    });
  });

  it('the language lists show what the pairs add', async () => {
    const app = router({ cuda_id: { ko: '0' }, pairs });
    const get = async (route: string) => (await app.request(route)).json();
    expect(await get('/languages')).toEqual([
      { code: 'en', name: 'English', targets: ['de', 'ko'] },
      { code: 'ko', name: 'Korean', targets: ['ko'] },
    ]);
    expect(await get('/v2/languages?type=source')).toEqual([
      { language: 'EN', name: 'English' },
      { language: 'KO', name: 'Korean' },
    ]);
    expect(await get('/v2/languages?type=target')).toEqual([
      { language: 'DE', name: 'German', supports_formality: false },
      { language: 'KO', name: 'Korean', supports_formality: false },
    ]);
    expect(await get('/v2/glossary-language-pairs')).toEqual({
      supported_languages: [
        { source_lang: 'en', target_lang: 'ko' },
        { source_lang: 'en', target_lang: 'de' },
      ],
    });
  });
});
