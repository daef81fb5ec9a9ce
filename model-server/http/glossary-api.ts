/**
 * @module model-server/http/glossary-api — glossaries on the inference port, in DeepL's shapes (the router's
 * DeepL API passes them through): `POST /glossaries` (a new id), `PUT /glossaries/{id}` (the router writes one id
 * to every model server), `GET /glossaries`, `GET /glossaries/{id}`, `GET /glossaries/{id}/entries` (TSV),
 * `DELETE /glossaries/{id}`. A request's `x-glossary-owner` (the router's API key id) scopes all of them: a glossary
 * is seen and used only with the owner it was made with.
 */
import type { Context, Hono } from 'hono';
import { ServeError } from '../../common/errors.js';
import { LANGUAGE_CODE } from '../../common/translation-contract.js';
import { formatGlossaryTsv, parseGlossaryEntries } from '../text/glossary.js';
import type { AppEnv } from './error-handler.js';
import type { Glossary, GlossaryStore } from '../translation/glossary-store.js';

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
  for (const [field, value] of [
    ['source_lang', source],
    ['target_lang', target],
  ] as const) {
    if (typeof value !== 'string' || !LANGUAGE_CODE.test(value.toLowerCase())) {
      throw new ServeError('BAD_REQUEST', `${field} must be a language code such as "en".`);
    }
  }
  if (typeof entries !== 'string') throw new ServeError('BAD_REQUEST', 'entries must be a string (TSV or CSV).');
  if (format !== 'tsv' && format !== 'csv') throw new ServeError('BAD_REQUEST', 'entries_format must be tsv or csv.');
  return {
    name: name.trim(),
    sourceLang: (source as string).toLowerCase(),
    targetLang: (target as string).toLowerCase(),
    entries: parseGlossaryEntries(entries, format),
  };
}
