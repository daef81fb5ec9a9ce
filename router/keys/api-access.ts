/**
 * @module router/keys/api-access — what the compatible APIs ask of API keys: is this key known, may it translate
 * this many characters now, and what has it used. Keys off: the APIs get no `ApiAccess` at all.
 */

/** A key as the key file describes it; the key itself is never held, only its hash. */
export interface ApiKey {
  /** A name for the key, safe to log and to label metrics with. */
  id: string;
  /** Requests per second across every router instance; undefined: unlimited. */
  requestsPerSecond?: number | undefined;
  /** Characters per `periodS` across every router instance; undefined: unlimited. */
  charactersPerPeriod?: number | undefined;
  /** Length of the characters period in seconds. Default 60. */
  periodS: number;
  /** Characters in all (DeepL's `character_limit`); undefined: unlimited. */
  characterQuota?: number | undefined;
}

export type KeyCheck = { ok: true; key: ApiKey } | { ok: false; reason: 'missing' | 'invalid' };

/** Why a request was refused: `rate` and `characters` pass with time (`retryAfterS`), `quota` does not. */
export type Refusal =
  { reason: 'rate' | 'characters'; retryAfterS: number; limit: number } | { reason: 'quota'; limit: number };

export type Admission = { ok: true } | ({ ok: false } & Refusal);

export interface KeyUsage {
  /** Characters counted against the quota so far. */
  characters: number;
  requests: number;
}

/** One key's limits and use, for the status page and metrics (by id: never the key). */
export interface KeyReport extends KeyUsage {
  id: string;
  requestsPerSecond: number | null;
  charactersPerPeriod: number | null;
  periodS: number;
  characterQuota: number | null;
}

export interface ApiAccess {
  /** The key a request carries (undefined: it carries none). */
  check(secret: string | undefined): KeyCheck;
  /** Counts one request of `characters` against the key's limits, or refuses it without counting it. */
  admit(key: ApiKey, characters: number): Promise<Admission>;
  usage(key: ApiKey): Promise<KeyUsage>;
  /** Every key's limits and use, counted across all router instances. */
  report(): Promise<KeyReport[]>;
}
