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
  /** May read every key's use (`GET /metrics`, `apiKeys` in `/status.json`). Default false. */
  admin?: boolean | undefined;
  /** Documents kept for the key at once (translating or waiting to be fetched); undefined: `DEFAULT_MAX_DOCUMENTS`. */
  maxDocuments?: number | undefined;
  /** Glossaries the key may keep; undefined: `DEFAULT_MAX_GLOSSARIES`. */
  maxGlossaries?: number | undefined;
}

/**
 * A key's share of the documents a router keeps (1,000 by default): enough for a client's batch, too few for one key
 * to take every slot.
 */
export const DEFAULT_MAX_DOCUMENTS = 100;
/** A key's share of the glossaries a model server keeps (1,000). */
export const DEFAULT_MAX_GLOSSARIES = 100;

export type KeyCheck = { ok: true; key: ApiKey } | { ok: false; reason: 'missing' | 'invalid' };

/** Why a request was refused: `rate` and `characters` pass with time (`retryAfterS`), `quota` does not. */
export type Refusal =
  { reason: 'rate' | 'characters'; retryAfterS: number; limit: number } | { reason: 'quota'; limit: number };

/**
 * What an admitted request was counted as: its characters and the characters period they went into, so that a
 * request that ends untranslated can be given them back (`refund`).
 */
export interface Charge {
  characters: number;
  /** The characters period's index (ms since the epoch / periodS / 1000, floored, on the store's clock). */
  period: number;
}

export type Admission = { ok: true; charge: Charge } | ({ ok: false } & Refusal);

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
  /**
   * Counts one request against the key's limits, or refuses it without counting it. `characters`: the characters a
   * translation (a text or a file) is billed, refused once the quota is used up even when it has none; null: a call
   * that translates nothing (glossaries, detection), counted against the requests per second only.
   */
  admit(key: ApiKey, characters: number | null): Promise<Admission>;
  /**
   * Gives back what an admitted request was counted, when it was not translated after all (refused by the model
   * server, failed, timed out): the characters, from the quota and, while it lasts, from their period. The request
   * stays counted against the requests per second.
   */
  refund(key: ApiKey, charge: Charge): Promise<void>;
  usage(key: ApiKey): Promise<KeyUsage>;
  /** Every key's limits and use, counted across all router instances: one read of the usage store. */
  report(): Promise<KeyReport[]>;
}
