/**
 * @module router/keys/key-ring — the API keys of the public port, read from API_KEYS: one key file, or a folder of
 * them (`*.json`, read in name order). Keys are held at rest as SHA-256 hashes only; a request's key is hashed and
 * looked up. The files are looked at again at most once a second, on use, and read again when any changed (added,
 * removed, rewritten): keys are added, limited or revoked without a restart. A file that no longer parses leaves
 * the keys as they were, with a warning.
 *
 * A key file:
 * ```json
 * {"keys": [{"id": "team-a", "sha256": "<hex of the key>", "requests_per_second": 10,
 *            "characters_per_period": 100000, "period_s": 60, "character_quota": 5000000,
 *            "max_documents": 100, "max_glossaries": 100, "admin": false}]}
 * ```
 * `id` names the key in logs and usage (never the key itself); every limit is optional (absent: unlimited, but for
 * documents and glossaries, which default to their share of the server's: api-access.ts). An `admin` key may read
 * every key's use (`GET /metrics`, `/status.json`).
 * `scripts/api-key.ts` makes a key and prints its entry.
 */
import { createHash } from 'node:crypto';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { readJsonFile } from '../../common/atomic-file.js';
import type { Logger } from '../../common/logger.js';
import type { ApiKey, KeyCheck } from './api-access.js';

const positive = z.number().int().positive();
const entrySchema = z.object({
  id: z.string().regex(/^[\w.@:-]{1,64}$/, 'ids are 1-64 letters, digits or _ . @ : -'),
  sha256: z.string().regex(/^[0-9a-f]{64}$/, 'sha256 is the key hashed, 64 lowercase hex digits'),
  requests_per_second: positive.optional(),
  characters_per_period: positive.optional(),
  period_s: positive.optional(),
  character_quota: positive.optional(),
  admin: z.boolean().optional(),
  max_documents: positive.optional(),
  max_glossaries: positive.optional(),
});
const fileSchema = z.union([z.object({ keys: z.array(entrySchema) }), entrySchema]);

/** The SHA-256 a key is stored as (hex). */
export function hashKey(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** How long a look at the files is trusted before the next, ms. */
const RECHECK_MS = 1_000;

export class KeyRing {
  readonly #source: string;
  readonly #logger: Logger | undefined;
  #byHash = new Map<string, ApiKey>();
  #signature = '';
  #checkedAt = 0;

  /** @throws Error naming the file and entry when the keys cannot be read at start. */
  constructor(source: string, logger?: Logger) {
    this.#source = source;
    this.#logger = logger;
    this.#load(this.#currentSignature());
  }

  check(secret: string | undefined): KeyCheck {
    if (secret === undefined || secret === '') return { ok: false, reason: 'missing' };
    this.#refresh();
    const key = this.#byHash.get(hashKey(secret));
    return key === undefined ? { ok: false, reason: 'invalid' } : { ok: true, key };
  }

  /** The keys held, in file order. */
  keys(): ApiKey[] {
    this.#refresh();
    return [...this.#byHash.values()];
  }

  #files(): string[] {
    if (!statSync(this.#source).isDirectory()) return [this.#source];
    return readdirSync(this.#source)
      .filter((name) => name.endsWith('.json'))
      .sort()
      .map((name) => path.join(this.#source, name));
  }

  /** Names, sizes and modification times of the key files: what changes when a key is added, edited or removed. */
  #currentSignature(): string {
    return this.#files()
      .map((file) => {
        const stat = statSync(file);
        return `${file}:${stat.size}:${stat.mtimeMs}`;
      })
      .join('|');
  }

  #refresh(): void {
    const now = Date.now();
    if (now - this.#checkedAt < RECHECK_MS) return;
    this.#checkedAt = now;
    try {
      const signature = this.#currentSignature();
      if (signature !== this.#signature) this.#load(signature);
    } catch (err) {
      this.#logger?.warn(
        { source: this.#source, err: (err as Error).message },
        'API keys not reloaded; kept as they were',
      );
    }
  }

  #load(signature: string): void {
    const byHash = new Map<string, ApiKey>();
    const ids = new Set<string>();
    for (const file of this.#files()) {
      const json = readJsonFile(file);
      if (!json.ok) throw new Error(`API_KEYS ${file}: cannot read JSON (${json.error})`);
      const parsed = fileSchema.safeParse(json.value);
      if (!parsed.success)
        throw new Error(
          `API_KEYS ${file}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
        );
      for (const entry of 'keys' in parsed.data ? parsed.data.keys : [parsed.data]) {
        if (ids.has(entry.id)) throw new Error(`API_KEYS ${file}: key id "${entry.id}" is given twice`);
        ids.add(entry.id);
        byHash.set(entry.sha256, {
          id: entry.id,
          requestsPerSecond: entry.requests_per_second,
          charactersPerPeriod: entry.characters_per_period,
          periodS: entry.period_s ?? 60,
          characterQuota: entry.character_quota,
          admin: entry.admin ?? false,
          maxDocuments: entry.max_documents,
          maxGlossaries: entry.max_glossaries,
        });
      }
    }
    this.#byHash = byHash;
    this.#signature = signature;
    this.#checkedAt = Date.now();
  }
}
