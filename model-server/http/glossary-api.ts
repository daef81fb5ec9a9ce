/**
 * @module model-server/http/glossary-api — glossaries on the inference port, in DeepL's shapes (the router's
 * DeepL API passes them through): `POST /glossaries` (a new id), `PUT /glossaries/{id}` (the router writes one id
 * to every model server), `GET /glossaries`, `GET /glossaries/{id}`, `GET /glossaries/{id}/entries` (TSV),
 * `DELETE /glossaries/{id}`; DeepL's v3 multilingual glossaries under `/multilingual-glossaries` (`PUT {id}`, `GET`,
 * `GET {id}`, `GET {id}/entries?source_lang&target_lang`, `PATCH {id}` a new name and dictionaries merged in,
 * `PUT {id}/dictionaries` one replaced, `DELETE {id}/dictionaries?source_lang&target_lang`, `DELETE {id}`), where a
 * v2 glossary shows as one dictionary. A request's `x-glossary-owner` (the router's API key id) scopes all of them:
 * a glossary is seen and used only with the owner it was made with.
 */
import type { Context, Hono } from 'hono';
import { ServeError } from '../../common/errors.js';
import { LANGUAGE_CODE } from '../../common/translation-contract.js';
import { formatGlossaryTsv, glossaryEntries, parseGlossaryEntries } from '../text/glossary.js';
import type { AppEnv } from './error-handler.js';
import type {
  Glossary,
  GlossaryDictionary,
  GlossaryStore,
  MultilingualGlossary,
} from '../translation/glossary-store.js';

/** A glossary as DeepL describes one. */
export function glossaryInfo(glossary: Glossary) {
  return {
    glossary_id: glossary.id,
    name: glossary.name,
    ready: true,
    source_lang: glossary.sourceLang,
    target_lang: glossary.targetLang,
    creation_time: glossary.creationTime,
    entry_count: glossary.entries.size,
  };
}

/** A multilingual glossary as DeepL's v3 describes one. */
export function multilingualInfo(glossary: MultilingualGlossary) {
  return {
    glossary_id: glossary.id,
    name: glossary.name,
    dictionaries: glossary.dictionaries.map(dictionaryInfo),
    creation_time: glossary.creationTime,
  };
}

const dictionaryInfo = (d: GlossaryDictionary) => ({
  source_lang: d.sourceLang,
  target_lang: d.targetLang,
  entry_count: d.entries.size,
});

export function installGlossaries(app: Hono<AppEnv>, store: GlossaryStore): void {
  const owner = (c: Context<AppEnv>) => c.req.header('x-glossary-owner');
  const create = async (c: Context<AppEnv>, id: string | undefined) => {
    const fields = await glossaryFields(c);
    const who = owner(c);
    const glossary = store.put({ ...fields, ...(id === undefined ? {} : { id }), ...(who ? { owner: who } : {}) });
    return c.json(glossaryInfo(glossary), 201);
  };
  app.post('/glossaries', (c) => create(c, undefined));
  app.put('/glossaries/:id', (c) => create(c, c.req.param('id')));
  app.get('/glossaries', (c) => c.json({ glossaries: store.list(owner(c)).map(glossaryInfo) }));
  app.get('/glossaries/:id', (c) => c.json(glossaryInfo(store.get(c.req.param('id'), owner(c)))));
  app.get('/glossaries/:id/entries', (c) =>
    c.body(formatGlossaryTsv(store.get(c.req.param('id'), owner(c)).entries), 200, {
      'content-type': 'text/tab-separated-values; charset=utf-8',
    }),
  );
  app.delete('/glossaries/:id', (c) => {
    store.delete(c.req.param('id'), owner(c));
    return c.body(null, 204);
  });
  installMultilingual(app, store, owner);
}

function installMultilingual(
  app: Hono<AppEnv>,
  store: GlossaryStore,
  owner: (c: Context<AppEnv>) => string | undefined,
): void {
  const base = '/multilingual-glossaries';
  /** The language pair a query names (both or neither), lower case. */
  const pairOf = (c: Context<AppEnv>) => {
    const [source, target] = [c.req.query('source_lang'), c.req.query('target_lang')].map((v) => v?.toLowerCase());
    if ((source === undefined) !== (target === undefined))
      throw new ServeError('BAD_REQUEST', 'Give source_lang and target_lang together.');
    return source === undefined ? undefined : { source, target: target! };
  };
  const samePair = (d: GlossaryDictionary, pair: { source: string; target: string }) =>
    d.sourceLang === pair.source && d.targetLang === pair.target;

  app.put(`${base}/:id`, async (c) => {
    const body = await jsonObject(c);
    if (typeof body.name !== 'string' || body.name.trim() === '')
      throw new ServeError('BAD_REQUEST', 'name must be a string.');
    if (!Array.isArray(body.dictionaries)) throw new ServeError('BAD_REQUEST', 'dictionaries must be an array.');
    const who = owner(c);
    const glossary = store.putMultilingual({
      id: c.req.param('id'),
      name: body.name.trim(),
      dictionaries: body.dictionaries.map(dictionaryOf),
      ...(who ? { owner: who } : {}),
    });
    return c.json(multilingualInfo(glossary), 201);
  });
  app.get(base, (c) => c.json({ glossaries: store.listMultilingual(owner(c)).map(multilingualInfo) }));
  app.get(`${base}/:id`, (c) => c.json(multilingualInfo(store.getMultilingual(c.req.param('id'), owner(c)))));
  app.get(`${base}/:id/entries`, (c) => {
    const pair = pairOf(c);
    const { dictionaries } = store.getMultilingual(c.req.param('id'), owner(c));
    const found = dictionaries.filter((d) => pair === undefined || samePair(d, pair));
    if (pair !== undefined && found.length === 0) throw noDictionary(pair);
    return c.json({
      dictionaries: found.map((d) => ({
        source_lang: d.sourceLang,
        target_lang: d.targetLang,
        entries: formatGlossaryTsv(d.entries),
        entries_format: 'tsv',
      })),
    });
  });
  app.patch(`${base}/:id`, async (c) => {
    const body = await jsonObject(c);
    if (body.name !== undefined && (typeof body.name !== 'string' || body.name.trim() === ''))
      throw new ServeError('BAD_REQUEST', 'name must be a string.');
    if (body.dictionaries !== undefined && !Array.isArray(body.dictionaries))
      throw new ServeError('BAD_REQUEST', 'dictionaries must be an array.');
    const merged = ((body.dictionaries ?? []) as unknown[]).map(dictionaryOf);
    const glossary = store.updateMultilingual(c.req.param('id'), owner(c), (old) => ({
      name: typeof body.name === 'string' ? body.name.trim() : old.name,
      // DeepL's PATCH merges: a pair's new entries are added, a source term given again takes its new target.
      dictionaries: merged.reduce(
        (dictionaries, change) => {
          const at = dictionaries.findIndex(
            (d) => d.sourceLang === change.sourceLang && d.targetLang === change.targetLang,
          );
          if (at < 0) return [...dictionaries, change];
          const entries = glossaryEntries([...new Map([...dictionaries[at]!.entries, ...change.entries])]);
          return dictionaries.map((d, i) => (i === at ? { ...d, entries } : d));
        },
        [...old.dictionaries],
      ),
    }));
    return c.json(multilingualInfo(glossary));
  });
  app.put(`${base}/:id/dictionaries`, async (c) => {
    const replacement = dictionaryOf(await jsonObject(c));
    store.updateMultilingual(c.req.param('id'), owner(c), (old) => ({
      name: old.name,
      dictionaries: [
        ...old.dictionaries.filter(
          (d) => d.sourceLang !== replacement.sourceLang || d.targetLang !== replacement.targetLang,
        ),
        replacement,
      ],
    }));
    return c.json(dictionaryInfo(replacement));
  });
  app.delete(`${base}/:id/dictionaries`, (c) => {
    const pair = pairOf(c);
    if (pair === undefined) throw new ServeError('BAD_REQUEST', 'Give source_lang and target_lang.');
    store.updateMultilingual(c.req.param('id'), owner(c), (old) => {
      if (!old.dictionaries.some((d) => samePair(d, pair))) throw noDictionary(pair);
      return { name: old.name, dictionaries: old.dictionaries.filter((d) => !samePair(d, pair)) };
    });
    return c.body(null, 204);
  });
  app.delete(`${base}/:id`, (c) => {
    store.delete(c.req.param('id'), owner(c));
    return c.body(null, 204);
  });
}

/** DeepL's answer for a pair the glossary has no dictionary for (a 404, GlossaryNotFoundError in deepl-node). */
const noDictionary = (pair: { source: string; target: string }) =>
  new ServeError('GLOSSARY_NOT_FOUND', `No dictionary found for language pair ${pair.source}-${pair.target}.`);

async function jsonObject(c: Context<AppEnv>): Promise<Record<string, unknown>> {
  const body = (await c.req.json().catch(() => {
    throw new ServeError('INVALID_JSON');
  })) as unknown;
  if (body === null || typeof body !== 'object' || Array.isArray(body))
    throw new ServeError('BAD_REQUEST', 'The body must be a JSON object.');
  return body as Record<string, unknown>;
}

/** A dictionary `{source_lang, target_lang, entries, entries_format}`, checked. */
function dictionaryOf(value: unknown): GlossaryDictionary {
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new ServeError('BAD_REQUEST', 'A dictionary is an object {source_lang, target_lang, entries}.');
  const {
    source_lang: source,
    target_lang: target,
    entries,
    entries_format: format = 'tsv',
  } = value as Record<string, unknown>;
  const [sourceLang, targetLang] = [languageOf('source_lang', source), languageOf('target_lang', target)];
  if (typeof entries !== 'string') throw new ServeError('BAD_REQUEST', 'entries must be a string (TSV or CSV).');
  if (format !== 'tsv' && format !== 'csv') throw new ServeError('BAD_REQUEST', 'entries_format must be tsv or csv.');
  return { sourceLang, targetLang, entries: parseGlossaryEntries(entries, format) };
}

async function glossaryFields(c: Context<AppEnv>) {
  const body = (await c.req.json().catch(() => {
    throw new ServeError('INVALID_JSON');
  })) as Record<string, unknown>;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ServeError('BAD_REQUEST', 'A glossary is a JSON object {name, source_lang, target_lang, entries}.');
  }
  const { name, source_lang: source, target_lang: target, entries, entries_format: format = 'tsv' } = body;
  if (typeof name !== 'string' || name.trim() === '') throw new ServeError('BAD_REQUEST', 'name must be a string.');
  return {
    name: name.trim(),
    ...dictionaryOf({ source_lang: source, target_lang: target, entries, entries_format: format }),
  };
}

function languageOf(field: string, value: unknown): string {
  if (typeof value !== 'string' || !LANGUAGE_CODE.test(value.toLowerCase()))
    throw new ServeError('BAD_REQUEST', `${field} must be a language code such as "en".`);
  return value.toLowerCase();
}
