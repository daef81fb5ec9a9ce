/**
 * @module router/status — where the router's `GET /status.json` comes from: the model server's status document
 * (`GET /status.json` on its metrics port, model-server/translation/status.ts), fetched on its own connection and
 * passed on as it came. The page (`GET /status`, router/status-page.ts) reaches only the router, through the
 * front, so no model server port is ever exposed or named to a browser.
 *
 * Many open pages poll at once: concurrent reads share one fetch, and a document is reused for `maxAgeMs`, so a
 * router instance asks the model server at most a few times a second whatever the number of viewers.
 */
import { Client } from 'undici';
import { ServeError } from '../common/errors.js';
import { header, readCapped } from './upstream/reply.js';

/** The slice of the router the app depends on for `/status.json`. */
export interface StatusReader {
  /** The status document's JSON bytes. @throws ServeError UPSTREAM_UNAVAILABLE when the model server does not answer. */
  read(): Promise<Uint8Array<ArrayBuffer>>;
}

export interface StatusSourceOptions {
  /**
   * Keep the cache's counters (per model hits, misses, ratio; the cache's bytes and entries) in the document the
   * router serves (CACHE_DISCLOSE). Off: removed, since they tell a stranger whether a sentence was translated
   * before; the model server's metrics port, for operators, keeps them.
   */
  cacheCounters?: boolean;
  /** Model server metrics base URL, e.g. `http://127.0.0.1:8082` (RouterConfig.statusUrl). */
  url: string;
  /** Longest wait for the document, ms (default 2 000). */
  timeoutMs?: number;
  /** How long a document is reused, ms (default 500: the page polls every 2 s). */
  maxAgeMs?: number;
}

export class StatusSource implements StatusReader {
  readonly #client: Client;
  readonly #timeoutMs: number;
  readonly #maxAgeMs: number;
  readonly #cacheCounters: boolean;
  #last: { at: number; body: Uint8Array<ArrayBuffer> } | undefined;
  #inFlight: Promise<Uint8Array<ArrayBuffer>> | undefined;

  constructor(options: StatusSourceOptions) {
    this.#timeoutMs = options.timeoutMs ?? 2_000;
    this.#maxAgeMs = options.maxAgeMs ?? 500;
    this.#cacheCounters = options.cacheCounters ?? false;
    this.#client = new Client(options.url, { connect: { timeout: this.#timeoutMs } });
  }

  read(): Promise<Uint8Array<ArrayBuffer>> {
    if (this.#last && performance.now() - this.#last.at < this.#maxAgeMs) return Promise.resolve(this.#last.body);
    this.#inFlight ??= this.#fetch().finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }

  async #fetch(): Promise<Uint8Array<ArrayBuffer>> {
    let status: number;
    let body: Uint8Array<ArrayBuffer>;
    try {
      const response = await this.#client.request({
        method: 'GET',
        path: '/status.json',
        headersTimeout: this.#timeoutMs,
        bodyTimeout: this.#timeoutMs,
        signal: AbortSignal.timeout(this.#timeoutMs),
      });
      status = response.statusCode;
      body = await readCapped(response.body, header(response.headers['content-length']), MAX_STATUS_BYTES);
    } catch (err) {
      if (err instanceof ServeError) throw err;
      throw new ServeError('UPSTREAM_UNAVAILABLE', 'Model server status is unavailable.', { cause: err });
    }
    if (status !== 200) {
      throw new ServeError('UPSTREAM_UNAVAILABLE', `Model server status answered ${status}.`);
    }
    // Parsed either way: what the router serves as JSON must be JSON.
    body = this.#cacheCounters ? (parseStatus(body), body) : withoutCacheCounters(body);
    this.#last = { at: performance.now(), body };
    return body;
  }

  async close(): Promise<void> {
    if (!this.#client.closed && !this.#client.destroyed) await this.#client.close();
  }
}

/** The status document without what tells whether a sentence was cached: per model counters, bytes, entries. */
function withoutCacheCounters(body: Uint8Array<ArrayBuffer>): Uint8Array<ArrayBuffer> {
  const doc = parseStatus(body);
  if (Array.isArray(doc.models)) {
    for (const model of doc.models as Record<string, unknown>[]) {
      delete model.cacheHits;
      delete model.cacheMisses;
      delete model.cacheHitRatio;
    }
  }
  if (doc.cache !== null && typeof doc.cache === 'object') {
    doc.cache = { enabled: (doc.cache as { enabled?: unknown }).enabled };
  }
  return new Uint8Array(Buffer.from(JSON.stringify(doc)));
}

/** The status document, parsed. @throws ServeError UPSTREAM_UNAVAILABLE when it is not a JSON object */
function parseStatus(body: Uint8Array<ArrayBuffer>): { models?: unknown; cache?: unknown } {
  try {
    const doc = JSON.parse(Buffer.from(body).toString('utf8')) as unknown;
    if (doc !== null && typeof doc === 'object' && !Array.isArray(doc)) return doc;
  } catch {
    // reported below
  }
  throw new ServeError('UPSTREAM_UNAVAILABLE', 'Model server status is not a JSON object.');
}

/** Largest status document read from the model server: a few KB per language and history point. */
const MAX_STATUS_BYTES = 8 * 1024 * 1024;
