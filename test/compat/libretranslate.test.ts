/**
 * LibreTranslate's API as its own documentation shows it (the API examples of its README and docs: `/translate` with
 * a text, `auto`, an array, `format: html` and `alternatives`; `/detect`; `/languages`; `/translate_file`;
 * `/suggest`; `/frontend/settings`; `api_key` errors) and as a client from npm speaks it (`translate`'s libre
 * engine, pinned in the root package.json), against the whole stack with API keys on.
 *
 * Each example's answer is compared with the documented one field for field, and its words not at all: the
 * documented words are a real model's (`Hello!` → `¡Hola!`), the tiny model's are random tokens. An answer's shape,
 * types and everything but the model's words (markup kept, alternatives distinct, a detected language among those
 * served, a confidence from 0 to 100) must be LibreTranslate's.
 */
import { Translate } from 'translate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_LANGUAGES } from '../../model-server/tools/demo-model/index.js';
import { type KeyedStack, startKeyedStack } from '../../harness/keyed-stack.js';

const KEY = 'libretranslate-examples-key-0123456789';
let stack: KeyedStack;
let url: string;

beforeAll(async () => {
  stack = await startKeyedStack('examples', KEY);
  url = stack.url;
}, 600_000);

afterAll(() => stack?.stop());

const post = async (route: string, body: object) => {
  const res = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
};
const keyed = (body: object) => ({ ...body, api_key: KEY });
const served = new Set<string>([...DEMO_LANGUAGES, 'zh-Hans']);
/** LibreTranslate's detectedLanguage: a served code and a confidence from 0 to 100. */
const detected = expect.objectContaining({
  language: expect.toSatisfy((code: string) => served.has(code)),
  confidence: expect.toSatisfy((n: number) => typeof n === 'number' && n >= 0 && n <= 100),
});

describe("LibreTranslate's API documentation examples", () => {
  it('/translate: a text (documented {"translatedText": "¡Hola!"})', async () => {
    const { status, body } = await post('/translate', keyed({ q: 'Hello!', source: 'en', target: 'es' }));
    expect(status).toBe(200);
    expect(body).toEqual({ translatedText: expect.any(String) });
  });

  it('/translate: source auto (documented with detectedLanguage {"confidence": 83, "language": "it"})', async () => {
    const { status, body } = await post('/translate', keyed({ q: 'Ciao!', source: 'auto', target: 'en' }));
    expect(status).toBe(200);
    expect(body).toEqual({ translatedText: expect.any(String), detectedLanguage: detected });
  });

  it('/translate: q an array answers an array, in order, and detectedLanguage per text with auto', async () => {
    const { status, body } = await post(
      '/translate',
      keyed({ q: ['Hello world!', 'How are you today?'], source: 'auto', target: 'de' }),
    );
    expect(status).toBe(200);
    expect(body).toEqual({
      translatedText: [expect.any(String), expect.any(String)],
      detectedLanguage: [detected, detected],
    });
  });

  it('/translate: format html keeps the markup (documented <p class="green">¡Hola!</p>)', async () => {
    const { status, body } = await post(
      '/translate',
      keyed({ q: '<p class="green">Hello!</p>', source: 'en', target: 'es', format: 'html' }),
    );
    expect(status).toBe(200);
    expect(body).toEqual({ translatedText: expect.stringMatching(/^<p class="green">[^<>]+<\/p>$/) });
  });

  it('/translate: alternatives (documented {"alternatives": ["Salve", "Pronto"], "translatedText": "Ciao"})', async () => {
    const { status, body } = await post(
      '/translate',
      keyed({ q: 'Hello', source: 'en', target: 'it', format: 'text', alternatives: 3 }),
    );
    expect(status).toBe(200);
    expect(body).toEqual({ translatedText: expect.any(String), alternatives: expect.any(Array) });
    const alternatives = body.alternatives as string[];
    expect(alternatives.length).toBeGreaterThan(0);
    expect(alternatives.length).toBeLessThanOrEqual(3);
    expect(alternatives.every((a) => typeof a === 'string' && a !== body.translatedText)).toBe(true);
  });

  it('/detect (documented [{"confidence": 90.0, "language": "it"}])', async () => {
    const { status, body } = await post('/detect', keyed({ q: 'Ciao!' }));
    expect(status).toBe(200);
    expect(body).toEqual([detected]);
  });

  it('/languages (documented [{"code", "name", "targets"}])', async () => {
    const res = await fetch(`${url}/languages`);
    expect(res.status).toBe(200);
    const languages = (await res.json()) as { code: string; name: string; targets: string[] }[];
    expect(languages.map((l) => l.code).sort()).toEqual([...served].filter((c) => c !== 'zh').sort());
    for (const language of languages)
      expect(language).toEqual({ code: expect.any(String), name: expect.any(String), targets: expect.any(Array) });
    expect(languages.find((l) => l.code === 'en')?.name).toBe('English');
  });

  it('/translate_file (documented {"translatedFileUrl": "…"}) downloads the file with only its text changed', async () => {
    const form = new FormData();
    for (const [name, value] of Object.entries({ source: 'en', target: 'de', api_key: KEY })) form.append(name, value);
    form.append('file', new Blob(['<p>Hello world.</p>\n']), 'page.html');
    const res = await fetch(`${url}/translate_file`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const body = (await res.json()) as { translatedFileUrl: string };
    expect(Object.keys(body)).toEqual(['translatedFileUrl']);
    const download = await fetch(`${url}${new URL(body.translatedFileUrl).pathname}`);
    expect(download.status).toBe(200);
    expect(await download.text()).toMatch(/^<p>[^<>]+<\/p>\n$/);
  });

  it('/suggest: answered as LibreTranslate answers with suggestions off, its default', async () => {
    const suggestion = { q: 'Hello', s: 'Hallo', source: 'en', target: 'de' };
    expect(await post('/suggest', keyed(suggestion))).toEqual({
      status: 403,
      body: { error: 'Suggestions are disabled on this server.' },
    });
    const settings = (await (await fetch(`${url}/frontend/settings`)).json()) as Record<string, unknown>;
    expect(settings).toMatchObject({ suggestions: false, apiKeys: true, keyRequired: true, filesTranslation: true });
  });

  it('api_key: missing, wrong, and a target not served, in its words', async () => {
    expect(await post('/translate', { q: 'Hello!', source: 'en', target: 'es' })).toEqual({
      status: 400,
      body: { error: 'Please contact the server operator to get an API key' },
    });
    expect(await post('/translate', { q: 'Hello!', source: 'en', target: 'es', api_key: 'wrong' })).toEqual({
      status: 403,
      body: { error: 'Invalid API key' },
    });
    expect(await post('/translate', keyed({ q: 'Hello!', source: 'en', target: 'nl' }))).toEqual({
      status: 400,
      body: { error: 'nl is not supported' },
    });
  });
});

describe("the translate package's libre engine", () => {
  // `url` is the library's option for a self-hosted server; its type declarations leave it out.
  const libre = (key: string) =>
    Translate({ engine: 'libre', key, url: `${url}/translate` } as Parameters<typeof Translate>[0]);

  it('translates (its own full-request tests: to Japanese, to Spanish, a custom URL)', async () => {
    for (const to of ['ja', 'es'])
      expect(await libre(KEY)('Hello world', { from: 'en', to })).toEqual(expect.stringMatching(/\S/));
  });

  it('a valid key is required (its own test), and its error is LibreTranslate’s message', async () => {
    await expect(libre('abc')('Hello world', { from: 'en', to: 'ru' })).rejects.toThrow('Invalid API key');
  });
});
