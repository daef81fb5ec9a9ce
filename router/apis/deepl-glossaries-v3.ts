/**
 * @module router/apis/deepl-glossaries-v3 — DeepL's v3 multilingual glossaries (`/v3/glossaries`: what deepl-node's
 * `DeepLClient.createMultilingualGlossary` and its kin call) over the model servers' glossaries
 * (router/glossaries.ts): a glossary holds dictionaries, one per language pair, and its name and dictionaries
 * change. v2 glossaries show here as one dictionary; either kind's id goes in `/v2/translate` and `/v2/document`
 * (./deepl-glossaries.ts `translationPair`). Calls count as v2's do: one request each, and a key keeps at most its
 * `maxGlossaries` of both kinds together.
 */
import type { Context, Hono } from 'hono';
import type { RouterEnv } from '../router-env.js';
import type { DictionaryFields, DictionaryInfo, MultilingualGlossaryInfo } from '../glossaries.js';
import type { DeepLLanguages } from './deepl-languages.js';
import { answer, DeepLError, requestParams, unsupported } from './deepl-dialect.js';
import { checkGlossaryRoom, glossaryCaller, glossaryClient, glossaryPair } from './deepl-glossaries.js';
import { type ApiContext, param, type Params } from './translate-texts.js';

const FIELD = /^dictionaries\[(\d+)\]\.(source_lang|target_lang|entries|entries_format)$/;

/** DeepL's v3 glossary routes. */
export function mountMultilingualGlossaries(
  app: Hono<RouterEnv>,
  context: ApiContext,
  languages: DeepLLanguages,
): void {
  const client = () => glossaryClient(context);
  const caller = glossaryCaller(context);
  const json = (c: Context<RouterEnv>, value: unknown, status: 200 | 201) =>
    new Response(JSON.stringify(value), {
      status,
      headers: { 'content-type': 'application/json', 'x-request-id': c.get('requestId') },
    });
  const noContent = (c: Context<RouterEnv>) =>
    new Response(null, { status: 204, headers: { 'x-request-id': c.get('requestId') } });
  /** A dictionary's languages as the model servers keep them (served codes; a regional target is its language). */
  const pairOf = (params: Params) => {
    const [source, target] = ['source_lang', 'target_lang'].map((name) => {
      const value = param(params, name);
      if (value === undefined || value === '') throw new DeepLError(400, `Parameter '${name}' not specified.`);
      return value;
    });
    return glossaryPair(languages, source!, target!);
  };

  app.post('/v3/glossaries', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const key = await caller(c, params);
      const name = param(params, 'name');
      if (name === undefined || name.trim() === '') throw new DeepLError(400, "Parameter 'name' not specified.");
      const dictionaries = dictionariesOf(params, languages);
      if (key !== undefined) await checkGlossaryRoom(context, key);
      return json(c, await client().createMultilingual({ name, dictionaries }, key?.id), 201);
    }),
  );
  app.get('/v3/glossaries', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      return { glossaries: await client().listMultilingual(owner) };
    }),
  );
  app.get('/v3/glossaries/:id', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      return (await client().multilingualInfo(c.req.param('id'), owner)) ?? Promise.reject(notFound());
    }),
  );
  app.get('/v3/glossaries/:id/entries', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const owner = (await caller(c, params))?.id;
      const { source, target } = pairOf(params);
      const dictionaries = await client().dictionaryEntries(c.req.param('id'), owner, { source, target });
      if (dictionaries === undefined) throw notFound();
      return { dictionaries: dictionaries.map((d) => ({ ...d, entries_format: 'tsv' })) };
    }),
  );
  app.patch('/v3/glossaries/:id', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const owner = (await caller(c, params))?.id;
      const name = param(params, 'name');
      const dictionaries = dictionariesOf(params, languages);
      if (name === undefined && dictionaries.length === 0)
        throw new DeepLError(400, "Parameter 'name' or 'dictionaries' not specified.");
      if (name !== undefined && name.trim() === '') throw new DeepLError(400, "Value for 'name' not supported.");
      const body = { ...(name === undefined ? {} : { name }), ...(dictionaries.length === 0 ? {} : { dictionaries }) };
      const changed = await client().changeMultilingual(c.req.param('id'), owner, { method: 'PATCH', body });
      return JSON.parse(changed) as MultilingualGlossaryInfo;
    }),
  );
  app.put('/v3/glossaries/:id/dictionaries', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const owner = (await caller(c, params))?.id;
      const dictionary = dictionaryOf((name) => param(params, name), languages);
      const path = '/dictionaries';
      const changed = await client().changeMultilingual(c.req.param('id'), owner, {
        method: 'PUT',
        path,
        body: dictionary,
      });
      return JSON.parse(changed) as DictionaryInfo;
    }),
  );
  app.delete('/v3/glossaries/:id/dictionaries', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const owner = (await caller(c, params))?.id;
      const { source, target } = pairOf(params);
      const path = `/dictionaries?${new URLSearchParams({ source_lang: source, target_lang: target })}`;
      await client().changeMultilingual(c.req.param('id'), owner, { method: 'DELETE', path });
      return noContent(c);
    }),
  );
  app.delete('/v3/glossaries/:id', (c) =>
    answer(context, c, async () => {
      const owner = (await caller(c, await requestParams(c, context)))?.id;
      if (!(await client().delete(c.req.param('id'), owner))) throw notFound();
      return noContent(c);
    }),
  );
}

const notFound = () => new DeepLError(404, 'Glossary not found');

/** One dictionary's fields, read by `field(name)`. @throws DeepLError 400 naming what is missing or refused */
function dictionaryOf(
  field: (name: string) => string | undefined,
  languages: DeepLLanguages,
  where = '',
): DictionaryFields {
  const required = (name: string) => {
    const value = field(name);
    if (value === undefined || value === '') throw new DeepLError(400, `Parameter '${where}${name}' not specified.`);
    return value;
  };
  const { source, target } = glossaryPair(languages, required('source_lang'), required('target_lang'));
  const entries = required('entries');
  const format = field('entries_format') ?? 'tsv';
  if (format !== 'tsv' && format !== 'csv') throw unsupported(`${where}entries_format`);
  return { source_lang: source, target_lang: target, entries, entries_format: format };
}

/**
 * The dictionaries a create or a PATCH sends: form fields `dictionaries[i].source_lang` … (deepl-node's way), or a
 * JSON body's `dictionaries` array of objects.
 */
function dictionariesOf(params: Params, languages: DeepLLanguages): DictionaryFields[] {
  const byIndex = new Map<number, Map<string, string>>();
  for (const [name, values] of params) {
    const match = FIELD.exec(name);
    if (match === null) continue;
    const fields = byIndex.get(Number(match[1])) ?? new Map<string, string>();
    fields.set(match[2]!, String(values[0]));
    byIndex.set(Number(match[1]), fields);
  }
  const fromForm = [...byIndex.entries()]
    .sort(([a], [b]) => a - b)
    .map(([i, fields]) => dictionaryOf((name) => fields.get(name), languages, `dictionaries[${i}].`));
  const fromJson = (params.get('dictionaries') ?? []).map((value, i) => {
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      throw new DeepLError(400, `Value for 'dictionaries[${i}]' not supported.`);
    const fields = value as Record<string, unknown>;
    const field = (name: string) => (fields[name] === undefined ? undefined : String(fields[name]));
    return dictionaryOf(field, languages, `dictionaries[${i}].`);
  });
  return [...fromForm, ...fromJson];
}
