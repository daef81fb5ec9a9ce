/**
 * @module router/apis/deepl-glossaries — DeepL's glossary API (`/v2/glossaries`, `/v2/glossary-language-pairs`)
 * over the model servers' glossaries (router/glossaries.ts), and the glossary a translation names. With keys on,
 * every call counts against its key's requests per second (a call that translates nothing), and a key keeps at most
 * its `maxGlossaries` (DeepL's 456 past them), so that no key takes every slot of a model server.
 */
import type { Context, Hono } from 'hono';
import type { RouterEnv } from '../router-env.js';
import { AUTO_LANGUAGE } from '../translate-request.js';
import { type ApiKey, DEFAULT_MAX_GLOSSARIES } from '../keys/api-access.js';
import type { GlossaryClient } from '../glossaries.js';
import type { DeepLLanguages } from './deepl-languages.js';
import { admit, answer, authorize, DeepLError, requestParams, unsupported } from './deepl-dialect.js';
import { type ApiContext, param, type Params } from './translate-texts.js';

/** DeepL's glossary API over the model servers' glossaries, each scoped to the key that made it. */
export function mountGlossaries(app: Hono<RouterEnv>, context: ApiContext, languages: DeepLLanguages): void {
  const client = () => glossaryClient(context);
  const notFound = () => new DeepLError(404, 'Glossary not found');
  const caller = glossaryCaller(context);

  app.post('/v2/glossaries', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const key = await caller(c, params);
      const field = (name: string) => {
        const value = param(params, name);
        if (value === undefined || value === '') throw new DeepLError(400, `Parameter '${name}' not specified.`);
        return value;
      };
      const [name, source, target, entries] = ['name', 'source_lang', 'target_lang', 'entries'].map(field);
      const format = param(params, 'entries_format') ?? 'tsv';
      if (format !== 'tsv' && format !== 'csv') throw unsupported('entries_format');
      const { source: sourceLang, target: targetLang } = glossaryPair(languages, source!, target!);
      if (key !== undefined) await checkGlossaryRoom(context, key);
      const info = await client().create(
        { name: name!, source_lang: sourceLang, target_lang: targetLang, entries: entries!, entries_format: format },
        key?.id,
      );
      const headers = { 'content-type': 'application/json', 'x-request-id': c.get('requestId') };
      return new Response(JSON.stringify(info), { status: 201, headers });
    }),
  );
  app.get('/v2/glossaries', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      return { glossaries: await client().list(owner) };
    }),
  );
  app.get('/v2/glossaries/:id', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      return (await client().info(c.req.param('id'), owner)) ?? Promise.reject(notFound());
    }),
  );
  app.get('/v2/glossaries/:id/entries', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      const accept = c.req.header('accept');
      if (accept !== undefined && !/text\/tab-separated-values|\*\/\*/.test(accept)) {
        throw new DeepLError(415, 'Unsupported Media Type');
      }
      const tsv = await client().entries(c.req.param('id'), owner);
      if (tsv === undefined) throw notFound();
      return new Response(tsv, {
        status: 200,
        headers: { 'content-type': 'text/tab-separated-values; charset=utf-8', 'x-request-id': c.get('requestId') },
      });
    }),
  );
  app.delete('/v2/glossaries/:id', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      if (!(await client().delete(c.req.param('id'), owner))) throw notFound();
      return new Response(null, { status: 204, headers: { 'x-request-id': c.get('requestId') } });
    }),
  );
  app.get('/v2/glossary-language-pairs', (c) =>
    answer(context, c, async () => {
      await caller(c, await requestParams(c, context));
      const routes = context.routes;
      const sources = routes?.sources ?? context.languages;
      return {
        supported_languages: sources.flatMap((s) =>
          (routes?.targetsFrom(s) ?? context.languages)
            .filter((t) => t !== s)
            .map((t) => ({ source_lang: s, target_lang: t })),
        ),
      };
    }),
  );
}

/**
 * A glossary's language pair as served codes. @throws DeepLError 400 for a language not served, one language twice,
 * or a pair no model translates
 */
export function glossaryPair(languages: DeepLLanguages, source: string, target: string) {
  const [sourceLang, targetLang] = [languages.sourceOf(source), languages.targetOf(target)];
  if (
    sourceLang === undefined ||
    targetLang === undefined ||
    sourceLang === targetLang ||
    !languages.serves(sourceLang, targetLang)
  )
    throw new DeepLError(400, 'Unsupported glossary source and target language pair.');
  return { source: sourceLang, target: targetLang };
}

/** The model servers' glossaries. @throws DeepLError 503 when the router has none */
export function glossaryClient(context: ApiContext): GlossaryClient {
  if (context.glossaries === undefined) throw new DeepLError(503, 'Glossaries are not available.');
  return context.glossaries;
}

/** The key of a glossary call, counted as one request (undefined: keys off). */
export const glossaryCaller =
  (context: ApiContext) =>
  async (c: Context<RouterEnv>, params: Params): Promise<ApiKey | undefined> => {
    const key = authorize(c, params, context);
    if (key !== undefined) await admit(context, key, null);
    return key;
  };

/**
 * @throws DeepLError 456 when the key keeps its `maxGlossaries` already, v2 and v3 together (counted across the
 *   model servers as they list them: two creations at once may both pass the last slot)
 */
export async function checkGlossaryRoom(context: ApiContext, key: ApiKey): Promise<void> {
  const most = key.maxGlossaries ?? DEFAULT_MAX_GLOSSARIES;
  if ((await glossaryClient(context).listMultilingual(key.id)).length >= most)
    throw new DeepLError(456, `Quota Exceeded: this key keeps ${most} glossaries, the most it may.`);
}

/**
 * A translation's languages (`target_lang`, and `source_lang` or `auto` when absent) and the entries of the glossary
 * it names (`glossary_id`), as `/v2/translate` and `/v2/document` read them.
 * @throws DeepLError 400 (a language missing or not served, a glossary without source_lang or for another pair),
 *   404 (no such glossary)
 */
export async function translationPair(
  context: ApiContext,
  params: Params,
  languages: DeepLLanguages,
  key: ApiKey | undefined,
): Promise<{ srcLang: string; tgtLang: string; glossary: Record<string, string> | undefined }> {
  const target = param(params, 'target_lang');
  if (target === undefined) throw new DeepLError(400, "Parameter 'target_lang' not specified.");
  const tgtLang = languages.targetOf(target);
  if (tgtLang === undefined) throw unsupported('target_lang');
  const source = param(params, 'source_lang');
  const srcLang = source === undefined || source === '' ? AUTO_LANGUAGE : languages.sourceOf(source);
  if (srcLang === undefined) throw unsupported('source_lang');
  if (!languages.serves(srcLang, tgtLang))
    throw new DeepLError(
      400,
      `Unsupported source and target language pair: ${srcLang.toUpperCase()} → ${tgtLang.toUpperCase()}.`,
    );
  const glossary = await glossaryFor(context, param(params, 'glossary_id'), srcLang, tgtLang, key);
  return { srcLang, tgtLang, glossary };
}

/**
 * The entries of the glossary a translation names (v2 or v3) for its language pair (DeepL needs source_lang with
 * a glossary). @throws DeepLError 400 (no source_lang, another pair), 404 (no such glossary)
 */
async function glossaryFor(
  context: ApiContext,
  id: string | undefined,
  srcLang: string,
  tgtLang: string,
  key: ApiKey | undefined,
): Promise<Record<string, string> | undefined> {
  if (id === undefined) return undefined;
  if (srcLang === AUTO_LANGUAGE) throw new DeepLError(400, "Use of a glossary requires the 'source_lang' parameter.");
  // A v2 glossary is one dictionary; a v3 one has one per pair.
  const entries = await glossaryClient(context).resolvePair(id, key?.id, srcLang, tgtLang);
  if (entries === undefined) throw new DeepLError(404, 'Glossary not found');
  if (entries === null)
    throw new DeepLError(400, `No dictionary found for language pair ${srcLang}-${tgtLang} in glossary ${id}.`);
  return entries;
}
