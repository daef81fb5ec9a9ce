/**
 * Drop-in end to end: the official DeepL client (`deepl-node`, its `serverUrl` option) and a LibreTranslate client
 * from npm (`translate`, its `libre` engine and `url`), unchanged, against the whole stack — tiny generated model,
 * model server, router, and each front (nginx, skipped saying so only where it is not installed; and the built-in
 * proxy). What they get back, values and errors, must be what they would get from the real services.
 */
import * as deepl from 'deepl-node';
import { Translate } from 'translate';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll, type ManagedProcess } from '../../bench/lib/processes.js';
import { findNginx } from '../../front/nginx.js';
import { startFront, startStack, type Stack } from '../support/stack.js';

const nginx = findNginx(process.env);
if (!nginx)
  console.warn('dropin.test: nginx is not installed; the nginx front is NOT tested here (apt-get install nginx-light)');
const FRONTS = nginx ? (['nginx', 'builtin'] as const) : (['builtin'] as const);

let stack: Stack;
const fronts: Record<string, { proc: ManagedProcess; url: string }> = {};

beforeAll(async () => {
  stack = await startStack({
    languages: ['en', 'de', 'ko'],
    handler: 'translation',
    demoModel: 'tiny',
    register: { batchSize: 8, maxBatchDelayMs: 5, workers: 1 },
  });
  for (const kind of FRONTS) {
    const front = await startFront({
      dir: stack.dir,
      env: stack.env,
      routerUrl: stack.routerUrls[0]!,
      kind,
      name: kind,
    });
    fronts[kind] = { proc: front.proc, url: front.url };
  }
});

afterAll(async () => {
  await Promise.all(Object.values(fronts).map(({ proc }) => proc.stop()));
  await stack?.stop();
  await stopAll();
});

const ENGLISH = 'The weather is very nice today, and we are going to the park together.';

describe.each(FRONTS)('through the %s front', (kind) => {
  const url = () => fronts[kind]!.url;
  // maxRetries 0: a refusal reaches the test as the client's error at once instead of after its back-off.
  const translator = () => new deepl.Translator('any-key:fx', { serverUrl: url(), maxRetries: 0 });

  it('deepl-node translates one text, many texts, and detects the source', async () => {
    const one = await translator().translateText('Hello world.', 'en', 'de');
    expect(typeof one.text).toBe('string');
    expect(one.detectedSourceLang).toBe('en');
    const many = await translator().translateText(['Good morning.', 'Good night.'], 'en', 'en-GB');
    expect(many.map((r) => r.detectedSourceLang)).toEqual(['en', 'en']);
    expect(many.map((r) => typeof r.text)).toEqual(['string', 'string']);
    const auto = await translator().translateText(ENGLISH, null, 'ko');
    expect(auto.detectedSourceLang).toBe('en');
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
    expect(usage.anyLimitReached()).toBe(false);
  });

  it("deepl-node gets DeepL's own error class for a value DeepL refuses", async () => {
    const refused = translator().translateText('Hello.', 'en', 'de', { tagHandling: 'html' });
    await expect(refused).rejects.toThrow(deepl.DeepLError);
    await expect(refused).rejects.toThrow("Bad request, message: Value for 'tag_handling' not supported.");
  });

  it('the LibreTranslate client translates, and gets its error for a language not served', async () => {
    // `url` is the library's option for a self-hosted server; its type declarations leave it out.
    const options = { engine: 'libre', url: `${url()}/translate` } as Parameters<typeof Translate>[0];
    const libre = Translate(options);
    expect(typeof (await libre(`Good evening from ${kind}.`, { from: 'en', to: 'de' }))).toBe('string');
    await expect(libre(`Good evening from ${kind}.`, { from: 'en', to: 'fr' })).rejects.toThrow('fr is not supported');
  });
});
