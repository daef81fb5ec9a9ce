/**
 * @module model-server/translation/translation-cache — answers for sentences translated before, kept in the model
 * server: the policy (what a key is, what may be stored, what a request may ask) over a ByteLru.
 *
 * Why here and per sentence: the model server is the one process every router instance sends to, so one cache
 * serves them all (a cache in the router would be one per pm2 instance, each cold, each holding its own copy), and
 * translation-plan.ts cuts every text into sentences there, so a sentence repeated inside a new document is found
 * too. A hit never becomes a job: it takes no queue slot, no engine row, no decoder step.
 *
 * Key: the model's identity — its folder, the fingerprint of its files (model-fingerprint.ts), the weights' dtype
 * its engine reports — the decoding settings (beam width, token cap), src_lang, tgt_lang, the sentence, the
 * glossary terms it is held to and the alternatives it asks for. Any of these changes the output; nothing else
 * does (a batch's other rows never change a row: engine.md). The value is the worker's answer for that sentence as
 * it came, so a response built from hits is the fresh response, byte for byte. Only successful answers are stored. Keys and values are stored as copies that own their bytes, so the
 * byte bound is a bound on the heap (`ownedString`).
 *
 * A request's `Cache-Control` may ask: `no-cache` (or `max-age=0`): no lookup, the fresh answers are stored;
 * `no-store`: no lookup and nothing stored.
 */
import { createHash } from 'node:crypto';
import { ByteLru } from './byte-lru.js';
import type { ModelFingerprints } from '../wlm/model-fingerprint.js';
import { dtypeOf, type ModelEntry } from '../wlm/registry.js';
import type { PlannedSentence, SentenceAnswers } from './translation-plan.js';

/** What makes two engines answer a sentence the same. */
export interface ModelIdentity {
  modelDir: string;
  /** model-fingerprint.ts */
  fingerprint: string;
  /** The weights' type the engine loaded (`fp32`, `fp16`, …). */
  dtype: string;
  numBeams: number;
  maxNewTokens: number;
  minNewTokens: number;
}

/** What a request's Cache-Control lets the cache do. */
export type CacheMode = 'use' | 'refresh' | 'skip';

/**
 * Estimated heap cost of one entry beyond its strings, bytes: the Map slot, the record, and the headers of the key
 * string and of the value object and its string. Counted with the strings at 2 bytes per UTF-16 unit (V8 keeps
 * Latin-1 text at 1), so the bound errs on the side of less memory.
 */
export const ENTRY_OVERHEAD_BYTES = 160;

export interface CacheLookup {
  /** The stored answers, by sentence id. */
  found: Map<string, unknown>;
  /** The sentences that must run, in plan order. */
  missing: PlannedSentence[];
  /** Hits and misses counted (0 and 0 when the request skipped the lookup). */
  hits: number;
  misses: number;
  /** Store the missing sentences' answers found in `answers` (by id); a no-op when the mode forbids it. */
  store(answers: SentenceAnswers): void;
}

export class TranslationCache {
  readonly #lru: ByteLru<unknown>;
  readonly #fingerprints: ModelFingerprints | undefined;

  /**
   * @param maxBytes CACHE_MAX_BYTES; 0 turns the cache off.
   * @param fingerprints the model folders' fingerprints, for `lookupFor`.
   */
  constructor(maxBytes: number, fingerprints?: ModelFingerprints) {
    this.#lru = new ByteLru(maxBytes);
    this.#fingerprints = fingerprints;
  }

  get enabled(): boolean {
    return this.#lru.maxBytes > 0;
  }

  get maxBytes(): number {
    return this.#lru.maxBytes;
  }

  /** Bytes the entries are estimated to take (≤ maxBytes). */
  get bytes(): number {
    return this.#lru.bytes;
  }

  get entries(): number {
    return this.#lru.size;
  }

  /**
   * Look up every sentence of one request for model `tgtLang`. Without an identity (the model's fingerprint or its
   * engine's dtype not known yet) or with the cache off, everything runs and nothing is counted or stored.
   */
  lookup(
    identity: ModelIdentity | undefined,
    tgtLang: string,
    sentences: readonly PlannedSentence[],
    mode: CacheMode,
  ): CacheLookup {
    const found = new Map<string, unknown>();
    if (!this.enabled || identity === undefined || mode === 'skip') {
      return { found, missing: [...sentences], hits: 0, misses: 0, store: () => undefined };
    }
    const prefix = identityKey(identity, tgtLang);
    // Glossary terms, alternatives and an alignment change the answer: a sentence asking for any is its own entry.
    const keyOf = ({ item: b }: PlannedSentence) =>
      `${prefix}\u0000${b.srcLang}\u0000${b.text}` +
      (b.terms || b.alternatives ? `\u0000${JSON.stringify([b.terms ?? [], b.alternatives ?? 0])}` : '') +
      (b.align ? '\u0000align' : '');
    const missing = sentences.filter((sentence) => {
      const value = mode === 'use' ? this.#lru.get(keyOf(sentence)) : undefined;
      if (value !== undefined) found.set(sentence.id, value);
      return value === undefined;
    });
    const store = (answers: SentenceAnswers) => {
      for (const sentence of missing) {
        const value = answers.get(sentence.id);
        if (value === undefined) continue;
        // Copies, so that an entry keeps only its own bytes (ownedString).
        const key = ownedString(keyOf(sentence));
        this.#lru.set(key, structuredClone(value), entryBytes(key, value));
      }
    };
    const counted = mode === 'use';
    return { found, missing, hits: counted ? found.size : 0, misses: counted ? missing.length : 0, store };
  }

  /** `lookup` for the sentences of a request to a registered model, with its Cache-Control header. */
  lookupFor(entry: ModelEntry, sentences: readonly PlannedSentence[], cacheControl: string | undefined): CacheLookup {
    const fingerprint = this.#fingerprints?.get(entry.modelDir);
    const dtype = dtypeOf(entry);
    const { numBeams, maxNewTokens, minNewTokens = 0 } = entry.pool.spec.options;
    const identity =
      fingerprint === undefined || dtype === undefined
        ? undefined
        : { modelDir: entry.modelDir, fingerprint, dtype, numBeams, maxNewTokens, minNewTokens };
    return this.lookup(identity, entry.name, sentences, cacheModeOf(cacheControl));
  }
}

/** The Cache-Control directives of a request, as a mode. */
export function cacheModeOf(cacheControl: string | undefined): CacheMode {
  if (cacheControl === undefined) return 'use';
  const directives = cacheControl.toLowerCase().split(',').map(directive);
  if (directives.includes('no-store')) return 'skip';
  if (directives.includes('no-cache') || directives.includes('max-age=0')) return 'refresh';
  return 'use';
}

/** `max-age = 0` as `max-age=0`: split at the first `=`, each side trimmed (a client's header: one linear pass). */
function directive(text: string): string {
  const at = text.indexOf('=');
  return at < 0 ? text.trim() : `${text.slice(0, at).trim()}=${text.slice(at + 1).trim()}`;
}

/**
 * A flat copy of `text` that shares no memory with any other string. A key is built from a sentence that V8 keeps
 * as a slice of the whole request body (or as a concatenation pointing at it): stored as is, one short entry would
 * keep a megabyte body alive while the bound counts the sentence only. A value from a worker's message could keep
 * that message alive the same way, hence `structuredClone` for values, which copies every string.
 */
export function ownedString(text: string): string {
  return Buffer.from(text, 'utf8').toString('utf8');
}

function entryBytes(key: string, value: unknown): number {
  return 2 * (key.length + JSON.stringify(value).length) + ENTRY_OVERHEAD_BYTES;
}

/** The model and target part of every key, hashed: 16 characters instead of a folder path per entry. */
function identityKey(identity: ModelIdentity, tgtLang: string): string {
  const { modelDir, fingerprint, dtype, numBeams, maxNewTokens, minNewTokens } = identity;
  return createHash('sha256')
    .update(JSON.stringify([modelDir, fingerprint, dtype, numBeams, maxNewTokens, minNewTokens, tgtLang]))
    .digest('hex')
    .slice(0, 16);
}
