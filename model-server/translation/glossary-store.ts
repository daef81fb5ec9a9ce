/**
 * @module model-server/translation/glossary-store — glossaries, kept on disk by the model server so that they outlive
 * it, one JSON file per glossary in GLOSSARY_DIR: DeepL's v2 glossaries (a name, one language pair, entries), which
 * never change, and its v3 multilingual ones (a name and dictionaries, one per language pair), which do. Both share
 * one id space, one owner rule and one limit; the v3 view shows a v2 glossary as one dictionary.
 *
 * Each file is written atomically (common/atomic-file.ts) and read back at start; a file that does not parse or
 * has a bad shape is skipped with a warning, never half-loaded. Every router reaches the same model servers, and
 * the router gives a new glossary one id on every model server it writes to, so all of them answer for it.
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { writeFileAtomic } from '../../common/atomic-file.js';
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { glossaryEntries, type GlossaryEntries } from '../text/glossary.js';

/** Glossaries one model server keeps; past it a new one is refused until one is deleted. */
export const MAX_GLOSSARIES = 1_000;

export interface Glossary {
  id: string;
  name: string;
  sourceLang: string;
  targetLang: string;
  /** ISO 8601. */
  creationTime: string;
  entries: GlossaryEntries;
  /** Who may see and use it (the router's API key id); undefined: requests that name no owner. */
  owner?: string;
}

const ID = /^[A-Za-z0-9-]{1,64}$/;

/** One language pair's entries in a multilingual glossary. */
export interface GlossaryDictionary {
  sourceLang: string;
  targetLang: string;
  entries: GlossaryEntries;
}

/** DeepL's v3 glossary: dictionaries, at most one per language pair (none at all is allowed, as DeepL). */
export interface MultilingualGlossary {
  id: string;
  name: string;
  creationTime: string;
  dictionaries: readonly GlossaryDictionary[];
  owner?: string;
}

const glossaryFile = z.object({
  glossary_id: z.string().regex(ID),
  name: z.string(),
  source_lang: z.string(),
  target_lang: z.string(),
  creation_time: z.string(),
  entries: z.array(z.tuple([z.string(), z.string()])),
  owner: z.string().optional(),
});

const multilingualFile = z.object({
  glossary_id: z.string().regex(ID),
  name: z.string(),
  creation_time: z.string(),
  dictionaries: z.array(
    z.object({
      source_lang: z.string(),
      target_lang: z.string(),
      entries: z.array(z.tuple([z.string(), z.string()])),
    }),
  ),
  owner: z.string().optional(),
});

export class GlossaryStore {
  readonly #dir: string;
  readonly #glossaries = new Map<string, Glossary>();
  readonly #multilingual = new Map<string, MultilingualGlossary>();

  constructor(dir: string, log?: Logger) {
    this.#dir = dir;
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
      try {
        const json: unknown = JSON.parse(readFileSync(path.join(dir, name), 'utf8'));
        const multilingual = multilingualFile.safeParse(json);
        if (multilingual.success) {
          const saved = multilingual.data;
          this.#multilingual.set(saved.glossary_id, {
            id: saved.glossary_id,
            name: saved.name,
            creationTime: saved.creation_time,
            dictionaries: saved.dictionaries.map((d) => ({
              sourceLang: d.source_lang,
              targetLang: d.target_lang,
              entries: glossaryEntries(d.entries),
            })),
            ...(saved.owner === undefined ? {} : { owner: saved.owner }),
          });
          continue;
        }
        const saved = glossaryFile.parse(json);
        this.#glossaries.set(saved.glossary_id, {
          id: saved.glossary_id,
          name: saved.name,
          sourceLang: saved.source_lang,
          targetLang: saved.target_lang,
          creationTime: saved.creation_time,
          entries: glossaryEntries(saved.entries),
          ...(saved.owner === undefined ? {} : { owner: saved.owner }),
        });
      } catch (err) {
        log?.warn({ file: name, err: (err as Error).message }, 'glossary file skipped: not a saved glossary');
      }
    }
  }

  /** The owner's glossaries, oldest first. */
  list(owner?: string): Glossary[] {
    return [...this.#glossaries.values()]
      .filter((g) => g.owner === owner)
      .sort((a, b) => a.creationTime.localeCompare(b.creationTime));
  }

  /** The glossary when it exists for this owner (another owner's is as good as absent). */
  find(id: string, owner?: string): Glossary | undefined {
    const glossary = this.#glossaries.get(id);
    return glossary?.owner === owner ? glossary : undefined;
  }

  /** @throws ServeError GLOSSARY_NOT_FOUND */
  get(id: string, owner?: string): Glossary {
    const glossary = this.find(id, owner);
    if (glossary === undefined) throw new ServeError('GLOSSARY_NOT_FOUND', `Glossary ${JSON.stringify(id)} not found.`);
    return glossary;
  }

  /**
   * Keep a glossary under `id` (a new id when undefined); the same id with the same content again is a no-op, so
   * a router may repeat a write that timed out.
   * @throws ServeError BAD_REQUEST (bad id), CONFLICT (the id holds another glossary), INSUFFICIENT_STORAGE (full)
   */
  put(fields: Omit<Glossary, 'id' | 'creationTime'> & { id?: string; creationTime?: string }): Glossary {
    const id = fields.id ?? randomUUID();
    if (!ID.test(id)) throw new ServeError('BAD_REQUEST', 'A glossary id is 1-64 letters, digits and dashes.');
    const glossary: Glossary = { ...fields, id, creationTime: fields.creationTime ?? new Date().toISOString() };
    const existing = this.#glossaries.get(id);
    if (existing !== undefined && sameContent(existing, glossary)) return existing;
    if (existing !== undefined || this.#multilingual.has(id))
      throw new ServeError('CONFLICT', `Glossary ${JSON.stringify(id)} already exists with other content.`);
    this.#checkRoom(id);
    const saved = {
      glossary_id: id,
      name: glossary.name,
      source_lang: glossary.sourceLang,
      target_lang: glossary.targetLang,
      creation_time: glossary.creationTime,
      entries: [...glossary.entries],
      ...(glossary.owner === undefined ? {} : { owner: glossary.owner }),
    };
    writeFileAtomic(this.#file(id), `${JSON.stringify(saved)}\n`);
    this.#glossaries.set(id, glossary);
    return glossary;
  }

  /** Delete a glossary of either kind. @throws ServeError GLOSSARY_NOT_FOUND */
  delete(id: string, owner?: string): void {
    this.getMultilingual(id, owner);
    rmSync(this.#file(id), { force: true });
    this.#glossaries.delete(id);
    this.#multilingual.delete(id);
  }

  /** The owner's glossaries of both kinds as multilingual ones (a v2 glossary as one dictionary), oldest first. */
  listMultilingual(owner?: string): MultilingualGlossary[] {
    return [...this.#multilingual.values(), ...this.#glossaries.values()]
      .filter((g) => g.owner === owner)
      .map((g) => ('dictionaries' in g ? g : asMultilingual(g)))
      .sort((a, b) => a.creationTime.localeCompare(b.creationTime) || a.id.localeCompare(b.id));
  }

  /** A glossary of either kind as a multilingual one. @throws ServeError GLOSSARY_NOT_FOUND */
  getMultilingual(id: string, owner?: string): MultilingualGlossary {
    const multilingual = this.#multilingual.get(id);
    if (multilingual !== undefined && multilingual.owner === owner) return multilingual;
    const glossary = this.find(id, owner);
    if (glossary !== undefined) return asMultilingual(glossary);
    throw new ServeError('GLOSSARY_NOT_FOUND', `Glossary ${JSON.stringify(id)} not found.`);
  }

  /**
   * Keep a multilingual glossary under `id`; the same content again is a no-op (a router repeating a write).
   * @throws ServeError BAD_REQUEST (bad id, two dictionaries for one pair), CONFLICT, GLOSSARIES_FULL
   */
  putMultilingual(
    fields: Omit<MultilingualGlossary, 'creationTime'> & { creationTime?: string },
  ): MultilingualGlossary {
    if (!ID.test(fields.id)) throw new ServeError('BAD_REQUEST', 'A glossary id is 1-64 letters, digits and dashes.');
    const glossary = { ...fields, creationTime: fields.creationTime ?? new Date().toISOString() };
    checkPairs(glossary.dictionaries);
    const existing = this.#multilingual.get(fields.id);
    if (existing !== undefined && sameMultilingual(existing, glossary)) return existing;
    if (existing !== undefined || this.#glossaries.has(fields.id))
      throw new ServeError('CONFLICT', `Glossary ${JSON.stringify(fields.id)} already exists with other content.`);
    this.#checkRoom(fields.id);
    return this.#saveMultilingual(glossary);
  }

  /**
   * Change a multilingual glossary: `change` gets it and returns its new name and dictionaries. A v2 glossary does
   * not change (as DeepL's v2 API has it). @throws ServeError GLOSSARY_NOT_FOUND, BAD_REQUEST
   */
  updateMultilingual(
    id: string,
    owner: string | undefined,
    change: (glossary: MultilingualGlossary) => Pick<MultilingualGlossary, 'name' | 'dictionaries'>,
  ): MultilingualGlossary {
    const glossary = this.getMultilingual(id, owner);
    if (!this.#multilingual.has(id))
      throw new ServeError(
        'BAD_REQUEST',
        `Glossary ${JSON.stringify(id)} was made with /v2/glossaries: it does not change.`,
      );
    const changed = { ...glossary, ...change(glossary) };
    checkPairs(changed.dictionaries);
    return this.#saveMultilingual(changed);
  }

  #saveMultilingual(glossary: MultilingualGlossary): MultilingualGlossary {
    const saved = {
      glossary_id: glossary.id,
      name: glossary.name,
      creation_time: glossary.creationTime,
      dictionaries: glossary.dictionaries.map((d) => ({
        source_lang: d.sourceLang,
        target_lang: d.targetLang,
        entries: [...d.entries],
      })),
      ...(glossary.owner === undefined ? {} : { owner: glossary.owner }),
    };
    writeFileAtomic(this.#file(glossary.id), `${JSON.stringify(saved)}\n`);
    this.#multilingual.set(glossary.id, glossary);
    return glossary;
  }

  /** @throws ServeError GLOSSARIES_FULL when a new glossary `id` would pass MAX_GLOSSARIES */
  #checkRoom(id: string): void {
    if (this.#glossaries.has(id) || this.#multilingual.has(id)) return;
    if (this.#glossaries.size + this.#multilingual.size >= MAX_GLOSSARIES) {
      throw new ServeError('GLOSSARIES_FULL', `This server keeps at most ${MAX_GLOSSARIES} glossaries: delete one.`);
    }
  }

  #file(id: string): string {
    return path.join(this.#dir, `${id}.json`);
  }
}

/** A v2 glossary as a multilingual one: its pair as the one dictionary. */
function asMultilingual(glossary: Glossary): MultilingualGlossary {
  const { id, name, creationTime, sourceLang, targetLang, entries, owner } = glossary;
  return {
    id,
    name,
    creationTime,
    dictionaries: [{ sourceLang, targetLang, entries }],
    ...(owner === undefined ? {} : { owner }),
  };
}

/** @throws ServeError BAD_REQUEST when two dictionaries are for one language pair */
function checkPairs(dictionaries: readonly GlossaryDictionary[]): void {
  const pairs = new Set<string>();
  for (const { sourceLang, targetLang } of dictionaries) {
    const pair = `${sourceLang}-${targetLang}`;
    if (pairs.has(pair)) throw new ServeError('BAD_REQUEST', `Two dictionaries are for the language pair ${pair}.`);
    pairs.add(pair);
  }
}

function sameMultilingual(a: MultilingualGlossary, b: MultilingualGlossary): boolean {
  const content = (g: MultilingualGlossary) =>
    JSON.stringify([g.owner, g.name, g.dictionaries.map((d) => [d.sourceLang, d.targetLang, [...d.entries]])]);
  return content(a) === content(b);
}

function sameContent(a: Glossary, b: Glossary): boolean {
  return (
    a.owner === b.owner &&
    a.name === b.name &&
    a.sourceLang === b.sourceLang &&
    a.targetLang === b.targetLang &&
    JSON.stringify([...a.entries]) === JSON.stringify([...b.entries])
  );
}
