/**
 * Drop-in end to end: the official DeepL client (`deepl-node`, its `serverUrl` option) and a LibreTranslate client
 * from npm (`translate`, its `libre` engine and `url`), unchanged, against the whole stack — tiny generated model,
 * model server, router, and each front (nginx, skipped saying so only where it is not installed; and the built-in
 * proxy) — with API keys on (a folder of key files) and two router instances sharing one usage store. What they
 * get back, values and errors, must be what they would get from the real services.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as deepl from 'deepl-node';
import { Translate } from 'translate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll } from '../../harness/process-registry.js';
import { findNginx } from '../../front/nginx.js';
import { hashKey } from '../../router/keys/key-ring.js';
import { until } from '../../harness/polling.js';
import { startStackWithFronts, type StackWithFronts } from '../../harness/stack.js';

const nginx = findNginx(process.env);
if (!nginx)
  console.warn('dropin.test: nginx is not installed; the nginx front is NOT tested here (apt-get install nginx-light)');
const FRONTS = nginx ? (['nginx', 'builtin'] as const) : (['builtin'] as const);

let stack: StackWithFronts;
const keysDir = mkdtempSync(path.join(tmpdir(), 'mt-dropin-keys-'));
/** The keys, each front its own quota key (a quota, once used up, stays used up). */
const KEYS = {
  main: 'main-key-0123456789:fx',
  rate: 'rate-key-0123456789',
  'quota-nginx': 'quota-nginx-key-0123456789',
  'quota-builtin': 'quota-builtin-key-0123456789',
};

beforeAll(async () => {
  mkdirSync(keysDir, { recursive: true });
  const limits: Record<string, object> = {
    rate: { requests_per_second: 1 },
    'quota-nginx': { character_quota: 20 },
    'quota-builtin': { character_quota: 20 },
  };
  const keys = Object.entries(KEYS).map(([id, secret]) => ({ id, sha256: hashKey(secret), ...limits[id] }));
  writeFileSync(path.join(keysDir, 'keys.json'), JSON.stringify({ keys }));
  stack = await startStackWithFronts(
    {
      languages: ['en', 'de', 'ko'],
      handler: 'translation',
      demoModel: 'tiny',
      routers: 2,
      // info: the router's request lines, which must name the key id and never the key.
      env: { API_KEYS: keysDir, LOG_LEVEL: 'info', PUBLIC_URL: PUBLIC_URL },
      register: { batchSize: 8, maxBatchDelayMs: 5, workers: 1 },
    },
    FRONTS,
  );
});

afterAll(async () => {
  await stack?.stop();
  await stopAll();
  rmSync(keysDir, { recursive: true, force: true });
});

/**
 * The first error of bursts of three concurrent calls, burst after burst (at most 10): the limit is 1 request per
 * second and admission happens on arrival, so a burst puts two calls in one second however long translating takes.
 */
async function firstRefusal(call: (i: number) => Promise<unknown>): Promise<unknown> {
  for (let burst = 0; burst < 10; burst++) {
    const results = await Promise.allSettled([0, 1, 2].map((j) => call(burst * 3 + j)));
    const refused = results.find((r) => r.status === 'rejected');
    if (refused !== undefined) return refused.reason;
  }
  return undefined;
}

/** Where the download URLs point (PUBLIC_URL): any front serves their path. */
const PUBLIC_URL = 'https://mt.example';
/** The document keys of the download URLs handed out, which no log may hold. */
const downloadKeys: string[] = [];

const ENGLISH = 'The weather is very nice today, and we are going to the park together.';

describe.each(FRONTS)('through the %s front', (kind) => {
  const url = () => stack.fronts[kind]!.url;
  // maxRetries 0: a refusal reaches the test as the client's error at once instead of after its back-off.
  const translator = (key = KEYS.main, serverUrl = url()) => new deepl.Translator(key, { serverUrl, maxRetries: 0 });

  it('deepl-node translates one text, many texts, and detects the source', async () => {
    const one = await translator().translateText('Hello world.', 'en', 'de');
    expect(typeof one.text).toBe('string');
    expect(one.detectedSourceLang).toBe('en');
    const many = await translator().translateText(['Good morning.', 'Good night.'], 'en', 'en-GB');
    expect(many.map((r) => r.detectedSourceLang)).toEqual(['en', 'en']);
    expect(many.map((r) => typeof r.text)).toEqual(['string', 'string']);
    const auto = await translator().translateText(ENGLISH, null, 'ko');
    expect(auto.detectedSourceLang).toBe('en');
    // A single word, as in both services' own examples: a best guess (a word is often guessed wrong), not a refusal.
    expect((await translator().translateText('Hello', null, 'de')).detectedSourceLang).toMatch(/^[a-z]{2}$/);
    // Nothing to tell by: English, as LibreTranslate falls back (DeepL too names a language for any text).
    expect((await translator().translateText('2024', null, 'de')).detectedSourceLang).toBe('en');
    expect(auto.billedCharacters).toBe(ENGLISH.length);
  });

  it('deepl-node lists languages and reads usage', async () => {
    const sources = await translator().getSourceLanguages();
    expect(sources.map((l) => l.code)).toEqual(['de', 'en', 'ko']);
    const targets = await translator().getTargetLanguages();
    expect(targets.map((l) => l.code)).toEqual(['de', 'en-GB', 'en-US', 'ko']);
    expect(targets.every((l) => l.supportsFormality === false)).toBe(true);
    const usage = await translator().getUsage();
    expect(usage.character?.limit).toBe(1_000_000_000_000);
    expect(usage.character?.count).toBeGreaterThan(0);
    expect(usage.anyLimitReached()).toBe(false);
  });

  it("deepl-node gets DeepL's errors for a bad key, over quota (counted across router instances) and too fast", async () => {
    await expect(translator('not-a-key').translateText('Hello.', 'en', 'de')).rejects.toThrow(deepl.AuthorizationError);
    // 15 of the 20 characters through the front (router 0), then 10 more on router 1: the quota is the cluster's.
    const quotaKey = KEYS[`quota-${kind}`];
    await translator(quotaKey).translateText('Fifteen chars..', 'en', 'de');
    const direct = translator(quotaKey, stack.routerUrls[1]!);
    await expect(direct.translateText('Ten chars.', 'en', 'de')).rejects.toThrow(deepl.QuotaExceededError);
    const usage = await translator(quotaKey).getUsage();
    expect([usage.character?.count, usage.character?.limit, usage.anyLimitReached()]).toEqual([15, 20, false]);
    const refusal = await firstRefusal((i) => translator(KEYS.rate).translateText(`Fast ${kind} ${i}.`, 'en', 'de'));
    expect(refusal).toBeInstanceOf(deepl.TooManyRequestsError);
  });

  it("deepl-node gets DeepL's own error class for a value DeepL refuses", async () => {
    const refused = translator().translateText('Hello.', 'en', 'de', { formality: 'more' });
    await expect(refused).rejects.toThrow(deepl.DeepLError);
    await expect(refused).rejects.toThrow(
      "Bad request, message: 'formality' is not supported for given 'target_lang'.",
    );
  });

  it('deepl-node glossaries: made, listed, read back, used (the term appears), deleted; other keys see none', async () => {
    const t = translator();
    const entries = new deepl.GlossaryEntries({ entries: { fox: 'Fuchs', 'lazy dog': 'fauler Hund' } });
    const made = await t.createGlossary(`animals ${kind}`, 'en', 'de', entries);
    expect([made.name, made.sourceLang, made.targetLang, made.entryCount, made.ready]).toEqual([
      `animals ${kind}`,
      'en',
      'de',
      2,
      true,
    ]);
    expect((await t.listGlossaries()).map((g) => g.glossaryId)).toContain(made.glossaryId);
    expect((await t.getGlossaryEntries(made)).entries()).toEqual({ fox: 'Fuchs', 'lazy dog': 'fauler Hund' });
    const [withGlossary, without] = await Promise.all([
      t.translateText('The fox jumps over the lazy dog.', 'en', 'de', { glossary: made }),
      t.translateText('The fox jumps over the lazy dog.', 'en', 'de'),
    ]);
    expect(withGlossary.text).toContain('Fuchs');
    expect(withGlossary.text).toContain('fauler Hund');
    expect(without.text).not.toMatch(/Fuchs|fauler Hund/);
    // A glossary belongs to the key that made it.
    const other = translator(KEYS[`quota-${kind}`]);
    expect((await other.listGlossaries()).map((g) => g.glossaryId)).not.toContain(made.glossaryId);
    await expect(other.getGlossary(made.glossaryId)).rejects.toThrow(deepl.GlossaryNotFoundError);
    await t.deleteGlossary(made);
    await expect(t.getGlossary(made.glossaryId)).rejects.toThrow(deepl.GlossaryNotFoundError);
  });

  it('deepl-node translates HTML with tagHandling: the tags come back as they were', async () => {
    const html = await translator().translateText('<p>Hello <b>world</b>.</p>', 'en', 'de', { tagHandling: 'html' });
    expect(html.text).toMatch(/^<p>.*<b>.*<\/b>.*<\/p>$/s);
  });

  it('deepl-node translates a subtitle file and an HTML page (translateDocument): cues, timings and tags as they were', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), `mt-dropin-docs-${kind}-`));
    const srt =
      '1\n00:00:01,000 --> 00:00:02,500\nGood morning.\n\n2\n00:00:03,000 --> 00:00:04,000\n<i>How are you today?</i>\n';
    const html =
      '<!DOCTYPE html>\n<html><body><h1>Welcome</h1>\n<p>The weather is <b>very</b> nice.</p></body></html>\n';
    writeFileSync(path.join(dir, 'movie.srt'), srt);
    writeFileSync(path.join(dir, 'page.html'), html);
    const [subtitles, page] = await Promise.all([
      translator().translateDocument(path.join(dir, 'movie.srt'), path.join(dir, 'movie.de.srt'), 'en', 'de'),
      translator().translateDocument(path.join(dir, 'page.html'), path.join(dir, 'page.de.html'), null, 'de'),
    ]);
    expect([subtitles.status, subtitles.billedCharacters]).toEqual(['done', srt.length]);
    expect(page.status).toBe('done');
    const translated = readFileSync(path.join(dir, 'movie.de.srt'), 'utf8');
    // Numbering and timing lines untouched, one cue text each, the italics of a whole line kept.
    const lines = translated.split('\n');
    expect(lines.filter((_, i) => i % 4 !== 2)).toEqual(srt.split('\n').filter((_, i) => i % 4 !== 2));
    expect(lines[6]).toMatch(/^<i>.+<\/i>$/);
    const translatedPage = readFileSync(path.join(dir, 'page.de.html'), 'utf8');
    expect(translatedPage.replace(/>[^<]*</g, '><')).toBe(html.replace(/>[^<]*</g, '><'));
    rmSync(dir, { recursive: true, force: true });
  });

  it('a document uploaded through one router instance is answered by the other', async () => {
    const form = new FormData();
    form.append('target_lang', 'DE');
    form.append('file', new Blob(['Good evening, everyone.\n']), 'note.txt');
    const headers = { authorization: `DeepL-Auth-Key ${KEYS.main}` };
    const upload = await fetch(`${stack.routerUrls[0]}/v2/document`, { method: 'POST', body: form, headers });
    expect(upload.status).toBe(200);
    const { document_id: id, document_key: key } = (await upload.json()) as Record<string, string>;
    const body = new URLSearchParams({ document_key: key! });
    await until('the document to be translated', async () => {
      const res = await fetch(`${stack.routerUrls[1]}/v2/document/${id}`, { method: 'POST', body, headers });
      return ((await res.json()) as { status: string }).status === 'done';
    });
    const result = await fetch(`${stack.routerUrls[1]}/v2/document/${id}/result`, { method: 'POST', body, headers });
    expect(result.status).toBe(200);
    expect((await result.text()).endsWith('\n')).toBe(true);
  });

  it("LibreTranslate's /translate_file answers a URL on PUBLIC_URL whose path downloads the translated file", async () => {
    const form = new FormData();
    for (const [name, value] of Object.entries({ source: 'en', target: 'ko', api_key: KEYS.main }))
      form.append(name, value);
    form.append('file', new Blob(['WEBVTT\n\n00:01.000 --> 00:02.000\nHello there.\n']), 'clip.vtt');
    const res = await fetch(`${url()}/translate_file`, { method: 'POST', body: form });
    expect(res.status).toBe(200);
    const { translatedFileUrl } = (await res.json()) as { translatedFileUrl: string };
    expect(translatedFileUrl.startsWith(`${PUBLIC_URL}/download_file/`)).toBe(true);
    const { pathname } = new URL(translatedFileUrl);
    downloadKeys.push(pathname.split('.')[1]!);
    const download = await fetch(`${url()}${pathname}`);
    expect(download.status).toBe(200);
    expect(download.headers.get('content-type')).toBe('text/vtt; charset=utf-8');
    expect(await download.text()).toMatch(/^WEBVTT\n\n00:01\.000 --> 00:02\.000\n.+\n$/);
  });

  // `url` is the library's option for a self-hosted server; its type declarations leave it out.
  const libre = (key: string) =>
    Translate({ engine: 'libre', key, url: `${url()}/translate` } as Parameters<typeof Translate>[0]);

  it('the LibreTranslate client translates, and gets its error for a language not served', async () => {
    expect(typeof (await libre(KEYS.main)(`Good evening from ${kind}.`, { from: 'en', to: 'de' }))).toBe('string');
    // The client names no "auto"; LibreTranslate's own example does, with one word.
    const res = await fetch(`${url()}/translate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q: 'Hello!', source: 'auto', target: 'de', api_key: KEYS.main }),
    });
    expect(res.status).toBe(200);
    expect(((await res.json()) as { detectedLanguage: { language: string } }).detectedLanguage.language).toMatch(
      /^[a-z]{2}$/,
    );
    const notServed = libre(KEYS.main)(`Good evening from ${kind}.`, { from: 'en', to: 'fr' });
    await expect(notServed).rejects.toThrow('fr is not supported');
  });

  it("LibreTranslate's alternatives are the model's other translations, distinct from the first", async () => {
    const res = await fetch(`${url()}/translate`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ q: 'Good morning.', source: 'en', target: 'de', alternatives: 2, api_key: KEYS.main }),
    });
    const body = (await res.json()) as { translatedText: string; alternatives: unknown[] };
    expect(res.status).toBe(200);
    expect(body.alternatives.length).toBeGreaterThan(0);
    expect(body.alternatives.every((a) => typeof a === 'string' && a !== body.translatedText)).toBe(true);
  });

  it("the LibreTranslate client gets LibreTranslate's errors for a bad key and too fast", async () => {
    await expect(libre('not-a-key')(`Bad key ${kind}.`, { from: 'en', to: 'de' })).rejects.toThrow('Invalid API key');
    const refusal = await firstRefusal((i) => libre(KEYS.rate)(`Fast ${kind} ${i}.`, { from: 'en', to: 'de' }));
    expect(String(refusal)).toBe('Error: Slowdown: 1 per 1 second');
  });
});

describe('keys in the logs', () => {
  it('the router logs key ids and nginx the request, neither the key, even one sent in the query string', async () => {
    for (const { url } of Object.values(stack.fronts)) {
      const res = await fetch(`${url}/translate?api_key=${encodeURIComponent(KEYS.main)}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ q: 'A key in the query string.', source: 'en', target: 'de' }),
      });
      expect(res.status).toBe(200);
    }
    const logs = path.join(stack.dir, 'logs');
    const read = (file: string) => readFileSync(path.join(logs, file), 'utf8');
    await until('the routers to log a request line with its key id', () =>
      readdirSync(logs).some((file) => file.startsWith('router-') && read(file).includes('"key":"main"')),
    );
    if (nginx) await until('nginx to log the request', () => read('nginx-access.log').includes('api_key=redacted'));
    // Every file under the logs folder (the model server keeps its registrations in a folder there too).
    for (const file of readdirSync(logs, { recursive: true, encoding: 'utf8' }))
      if (statSync(path.join(logs, file)).isFile())
        for (const secret of [...Object.values(KEYS), ...downloadKeys]) expect(read(file)).not.toContain(secret);
  });
});
