/**
 * @module model-server/translation/glossary-store — glossaries (DeepL's: a name, a language pair, entries), kept on
 * disk by the model server so that they outlive it, one JSON file per glossary in GLOSSARY_DIR.
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

const glossaryFile = z.object({
  glossary_id: z.string().regex(ID),
  name: z.string(),
  source_lang: z.string(),
  target_lang: z.string(),
  creation_time: z.string(),
  entries: z.array(z.tuple([z.string(), z.string()])),
  owner: z.string().optional(),
});

export class GlossaryStore {
  readonly #dir: string;
  readonly #glossaries = new Map<string, Glossary>();

  constructor(dir: string, log?: Logger) {
    this.#dir = dir;
    if (!existsSync(dir)) return;
    for (const name of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
      try {
        const saved = glossaryFile.parse(JSON.parse(readFileSync(path.join(dir, name), 'utf8')));
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
    if (existing !== undefined) {
      if (sameContent(existing, glossary)) return existing;
      throw new ServeError('CONFLICT', `Glossary ${JSON.stringify(id)} already exists with other content.`);
    }
    if (this.#glossaries.size >= MAX_GLOSSARIES) {
      throw new ServeError('GLOSSARIES_FULL', `This server keeps at most ${MAX_GLOSSARIES} glossaries: delete one.`);
    }
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

  /** @throws ServeError GLOSSARY_NOT_FOUND */
  delete(id: string, owner?: string): void {
    this.get(id, owner);
    rmSync(this.#file(id), { force: true });
    this.#glossaries.delete(id);
  }

  #file(id: string): string {
    return path.join(this.#dir, `${id}.json`);
  }
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
