/**
 * DeepL's and LibreTranslate's APIs in-process (`app.request`) with the real upstream against the fake model server
 * (a real HTTP server that reverses each text): parameters read from forms and JSON, mapped to the router's request,
 * and every answer and error in the called API's shape. Keys off here; router/test/api-keys.test.ts has them on.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRouterApp } from '../app.js';
import { Upstream } from '../upstream/upstream.js';
import { startFakeModelServer, type FakeModelServer } from './fake-model-server.js';

const LANGUAGES = ['ko', 'en', 'de', 'pt', 'zh'];

let fake: FakeModelServer;
let upstream: Upstream;
let app: ReturnType<typeof createRouterApp>;

beforeAll(async () => {
  fake = await startFakeModelServer();
  upstream = new Upstream({ url: fake.url, connections: 4, timeoutMs: 10_000 });
  app = createRouterApp(
    { maxBodyBytes: 4096, languages: LANGUAGES, logBodies: false, maxRequestChars: 5000 },
    { upstream, logger: pino({ level: 'silent' }) },
  );
});
afterAll(async () => {
  await upstream.close();
  await fake.close();
});

/** A form POST; `fields` as pairs in order, or as a record (an array value repeats its field, in order). */
const form = (
  path: string,
  fields: [string, string][] | Record<string, string | string[]>,
  headers: Record<string, string> = {},
) =>
  app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
    body: new URLSearchParams(
      Array.isArray(fields) ? fields : Object.entries(fields).flatMap(([k, v]) => [v].flat().map((x) => [k, x])),
    ).toString(),
  });
const json = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
const last = () => fake.seen.at(-1)!;

describe('DeepL /v2/translate', () => {
  it('translates repeated form texts into a regional target, the source given', async () => {
    const res = await form('/v2/translate', {
      text: ['Hello', 'World'],
      source_lang: 'EN',
      target_lang: 'PT-BR',
      show_billed_characters: '1',
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/json');
    expect(await res.json()).toEqual({
      translations: [
        { detected_source_language: 'EN', text: 'pt:olleH', billed_characters: 5 },
        { detected_source_language: 'EN', text: 'pt:dlroW', billed_characters: 5 },
      ],
    });
    expect(last().path).toBe('/predictions/pt');
    expect(last().body).toEqual({ src_lang: 'en', src_text: ['Hello', 'World'] });
  });

  it('takes JSON with a text array; no source_lang asks the model server to detect; split_sentences=0 → split none', async () => {
    const res = await json('/v2/translate', { text: ['Hallo', '  '], target_lang: 'en-us', split_sentences: '0' });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { translations: { text: string }[] };
    expect(body.translations.map((t) => t.text)).toEqual(['en:ollaH', '  ']);
    // DeepL's clients always get a source language: a best guess, however short the text.
    expect(last().body).toEqual({ src_lang: 'auto', src_text: ['Hallo'], split: 'none', detect: 'guess' });
  });

  it.each([
    [[['target_lang', 'DE']], 400, "Parameter 'text' not specified."],
    [[['text', 'x']], 400, "Parameter 'target_lang' not specified."],
    [
      [
        ['text', 'x'],
        ['target_lang', 'ZH-HANT'],
      ],
      400,
      "Value for 'target_lang' not supported.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['source_lang', 'EN-GB'],
      ],
      400,
      "Value for 'source_lang' not supported.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['split_sentences', '2'],
      ],
      400,
      "Value for 'split_sentences' not supported.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['tag_handling', 'markdown'],
      ],
      400,
      "Value for 'tag_handling' not supported.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['glossary_id', 'g'],
      ],
      400,
      "Use of a glossary requires the 'source_lang' parameter.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['formality', 'more'],
      ],
      400,
      "'formality' is not supported for given 'target_lang'.",
    ],
    [
      [
        ['text', 'x'],
        ['target_lang', 'DE'],
        ['auth_key', 'k'],
      ],
      403,
      "Legacy authentication method 'form body' is no longer supported. Please update to header-based authentication.",
    ],
  ] as [string[][], number, string][])('%j → %i %s', async (fields, status, message) => {
    const res = await form('/v2/translate', fields as [string, string][]);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ message });
  });

  it('passes tag_handling on as the format, with ignore_tags (the XML tag lists not for HTML)', async () => {
    const res = await form('/v2/translate', {
      text: '<p>Hi <code>x</code></p>',
      source_lang: 'EN',
      target_lang: 'DE',
      tag_handling: 'html',
      ignore_tags: 'code, pre',
      // DeepL reads these for XML only.
      non_splitting_tags: 'b',
      outline_detection: '0',
    });
    expect(res.status).toBe(200);
    expect(last().body).toEqual({
      src_lang: 'en',
      src_text: ['<p>Hi <code>x</code></p>'],
      format: 'html',
      ignore_tags: ['code', 'pre'],
    });
  });

  it('accepts what DeepL accepts and ignores: formality prefer_less, context, preserve_formatting', async () => {
    const res = await json('/v2/translate', {
      text: 'Hi',
      source_lang: 'en',
      target_lang: 'KO',
      formality: 'prefer_less',
      context: 'greeting',
      preserve_formatting: true,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ translations: [{ detected_source_language: 'EN', text: 'ko:iH' }] });
  });

  it('takes XML as a fragment: text outside a root, several roots; the tag lists from a JSON array or commas', async () => {
    const text = '<p>This is a <b>short</b> sentence.</p> <ignore>x</ignore> This is another sentence.';
    const res = await json('/v2/translate', {
      text: [text],
      source_lang: 'EN',
      target_lang: 'DE',
      tag_handling: 'xml',
      ignore_tags: ['ignore', 'raw,code'],
      non_splitting_tags: ['b'],
      splitting_tags: 'p,par',
      outline_detection: false,
    });
    expect(res.status).toBe(200);
    expect(last().body).toEqual({
      src_lang: 'en',
      src_text: [text],
      format: 'xml',
      ignore_tags: ['ignore', 'raw', 'code'],
      fragment: true,
      non_splitting_tags: ['b'],
      splitting_tags: ['p', 'par'],
      outline_detection: false,
    });
  });

  it('echoes model_type_used when model_type is sent, and refuses a model type DeepL does not have', async () => {
    const used = async (modelType: string) => {
      const res = await form('/v2/translate', {
        text: 'Hi',
        source_lang: 'EN',
        target_lang: 'DE',
        model_type: modelType,
      });
      return [res.status, await res.json()];
    };
    const translation = (model_type_used: string) => ({
      translations: [{ detected_source_language: 'EN', text: 'de:iH', model_type_used }],
    });
    expect(await used('quality_optimized')).toEqual([200, translation('quality_optimized')]);
    expect(await used('prefer_quality_optimized')).toEqual([200, translation('quality_optimized')]);
    expect(await used('latency_optimized')).toEqual([200, translation('latency_optimized')]);
    expect(await used('fastest')).toEqual([400, { message: "Value for 'model_type' not supported." }]);
    const none = await form('/v2/translate', { text: 'Hi', source_lang: 'EN', target_lang: 'DE' });
    expect(await none.json()).toEqual({ translations: [{ detected_source_language: 'EN', text: 'de:iH' }] });
  });

  it('answers a text already in the target language as it is, given or detected, as DeepL does', async () => {
    const seen = fake.seen.length;
    const given = await form('/v2/translate', { text: ['Hallo', 'Welt'], source_lang: 'DE', target_lang: 'DE' });
    expect(await given.json()).toEqual({
      translations: [
        { detected_source_language: 'DE', text: 'Hallo' },
        { detected_source_language: 'DE', text: 'Welt' },
      ],
    });
    expect(fake.seen.length).toBe(seen);
    const detected = await json('/v2/translate', { text: ['!lang de Hallo'], target_lang: 'DE' });
    expect(await detected.json()).toEqual({
      translations: [{ detected_source_language: 'DE', text: '!lang de Hallo' }],
    });
    const other = await json('/v2/translate', { text: ['!lang en Hello'], target_lang: 'DE' });
    expect(await other.json()).toEqual({
      translations: [{ detected_source_language: 'EN', text: 'de:olleH ne gnal!' }],
    });
  });

  it("answers the model server's refusal under load as DeepL's 429 with Retry-After", async () => {
    const res = await form('/v2/translate', { text: '!status 503 7', source_lang: 'EN', target_lang: 'DE' });
    expect(res.status).toBe(429);
    expect(res.headers.get('retry-after')).toBe('7');
    expect(((await res.json()) as { message: string }).message).toMatch(/^Too many requests/);
  });

  it('answers a body past the limit with 413 and a GET with 405, in its shape', async () => {
    const big = await form('/v2/translate', { text: 'x'.repeat(5000), target_lang: 'DE' });
    expect(big.status).toBe(413);
    expect(await big.json()).toEqual({ message: 'Request body is larger than 4096 bytes.' });
    const get = await app.request('/v2/translate');
    expect(get.status).toBe(405);
    expect(await get.json()).toEqual({ message: 'Method Not Allowed' });
  });
});

describe('DeepL /v2/languages and /v2/usage', () => {
  it('lists the served sources, and the targets with their regional variants', async () => {
    const source = await app.request('/v2/languages');
    expect(await source.json()).toEqual([
      { language: 'DE', name: 'German' },
      { language: 'EN', name: 'English' },
      { language: 'KO', name: 'Korean' },
      { language: 'PT', name: 'Portuguese' },
      { language: 'ZH', name: 'Chinese' },
    ]);
    const target = await form('/v2/languages', [['type', 'target']]);
    expect(((await target.json()) as { language: string }[]).map((l) => l.language)).toEqual([
      'DE',
      'EN-GB',
      'EN-US',
      'KO',
      'PT-BR',
      'PT-PT',
      'ZH',
      'ZH-HANS',
    ]);
    expect((await app.request('/v2/languages?type=both')).status).toBe(400);
  });

  it('answers usage without keys as nothing counted and no limit', async () => {
    const res = await app.request('/v2/usage', { headers: { authorization: 'DeepL-Auth-Key anything' } });
    expect(await res.json()).toEqual({ character_count: 0, character_limit: 1_000_000_000_000 });
  });
});

describe('LibreTranslate', () => {
  it('translates a string and an array, with detectedLanguage for auto, asking for alternatives', async () => {
    const one = await json('/translate', { q: 'Hello', source: 'en', target: 'de' });
    expect(await one.json()).toEqual({ translatedText: 'de:olleH' });
    const many = await json('/translate', {
      q: ['Guten Tag, wie geht es dir?', 'x'],
      source: 'auto',
      target: 'zh-Hans',
      alternatives: 2,
    });
    const body = (await many.json()) as Record<string, unknown>;
    expect(body.translatedText).toEqual(['zh:?rid se theg eiw ,gaT netuG', 'zh:x']);
    expect(body.alternatives).toEqual([[], []]);
    expect(Array.isArray(body.detectedLanguage)).toBe(true);
    expect(last().body).toEqual({
      src_lang: 'auto',
      src_text: ['Guten Tag, wie geht es dir?', 'x'],
      detect: 'guess',
      format: 'text',
      alternatives: 2,
    });
  });

  it('passes format html on; alternatives past the limit are its 400', async () => {
    const res = await json('/translate', {
      q: '<p>Hi</p>',
      source: 'en',
      target: 'de',
      format: 'html',
      alternatives: 3,
    });
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ translatedText: 'de:>p/<iH>p<', alternatives: [] });
    expect(last().body).toEqual({ src_lang: 'en', src_text: ['<p>Hi</p>'], format: 'html' });
    const tooMany = await json('/translate', { q: 'x', source: 'en', target: 'de', alternatives: 9 });
    expect(tooMany.status).toBe(400);
    expect(await tooMany.json()).toEqual({ error: 'Invalid request: alternatives parameter must be <= 8' });
  });

  it('takes a form body', async () => {
    const res = await form('/translate', { q: 'Hi', source: 'en', target: 'ko' });
    expect(await res.json()).toEqual({ translatedText: 'ko:iH' });
  });

  it('reads a body whose type is text/json as a form, as LibreTranslate does, not as a 500', async () => {
    const res = await form('/translate', { q: 'Hi', source: 'en', target: 'ko' }, { 'content-type': 'text/json' });
    expect([res.status, await res.json()]).toEqual([200, { translatedText: 'ko:iH' }]);
    const batch = await form(
      '/translate',
      { q: ['Hi', 'Yo'], source: 'en', target: 'ko' },
      { 'content-type': 'text/json' },
    );
    expect(await batch.json()).toEqual({ translatedText: ['ko:iH', 'ko:oY'] });
  });

  it.each([
    [{ source: 'en', target: 'de' }, 400, 'Invalid request: missing q parameter'],
    [{ q: 'x', target: 'de' }, 400, 'Invalid request: missing source parameter'],
    [{ q: 'x', source: 'en' }, 400, 'Invalid request: missing target parameter'],
    [{ q: 'x', source: 'en', target: 'xx' }, 400, 'xx is not supported'],
    [{ q: 'x', source: 'en', target: 'de', format: 'markdown' }, 400, 'markdown format is not supported'],
    [
      { q: 'x', source: 'en', target: 'de', alternatives: 'a' },
      400,
      'Invalid request: alternatives parameter is not a number',
    ],
  ])('%j → %i %s', async (body, status, error) => {
    const res = await json('/translate', body);
    expect(res.status).toBe(status);
    expect(await res.json()).toEqual({ error });
  });

  it('lists languages, detects, and tells the frontend its settings', async () => {
    const languages = (await (await app.request('/languages')).json()) as { code: string; targets: string[] }[];
    expect(languages.map((l) => l.code)).toEqual(['de', 'en', 'ko', 'pt', 'zh-Hans']);
    expect(languages[0]!.targets).toEqual(['de', 'en', 'ko', 'pt', 'zh-Hans']);
    const detect = await json('/detect', { q: 'Das ist ein ganz normaler deutscher Satz über das Wetter.' });
    const [guess] = (await detect.json()) as { language: string; confidence: number }[];
    expect(guess!.language).toBe('de');
    expect(guess!.confidence).toBeGreaterThan(50);
    // Nothing to tell by: English at confidence 0 where it is served, else the first language served, as listed.
    expect(await (await json('/detect', { q: '12345 !!!' })).json()).toEqual([{ confidence: 0, language: 'en' }]);
    const withoutEnglish = createRouterApp(
      { maxBodyBytes: 4096, languages: ['zh', 'ko'], logBodies: false },
      { upstream, logger: pino({ level: 'silent' }) },
    );
    const fallback = await withoutEnglish.request('/detect', {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q: '12345 !!!' }),
    });
    expect(await fallback.json()).toEqual([{ confidence: 0, language: 'ko' }]);
    const settings = (await (await app.request('/frontend/settings')).json()) as Record<string, unknown>;
    expect(settings).toMatchObject({ charLimit: 5000, apiKeys: false, keyRequired: false });
  });
});
