/**
 * @module router/upstream — the router's client for the model server's inference API: one lane per target
 * language (an undici Pool of keep-alive connections behind a bounded `Gate`), and the one place where a
 * transport failure or an upstream error reply becomes a typed `ServeError`.
 *
 * Why lanes: the model server keeps one queue per language, and a language served by its own engine answers in
 * its own time. A pool shared by every language would be one FIFO in front of those queues: a flood of `en`
 * would hold every connection and `ko` would wait behind it here. With a lane per language a flood fills its
 * own lane only, and every other language always has connections of its own.
 *
 * ```
 *  translate(en) ─▶ gate(en): ≤ connections in flight ─▶ Pool(en): one request per connection ─▶ :9999/predictions/en
 *                   ≤ queue waiting, FIFO                (pipelining 1: closing a connection cancels exactly one job)
 *                   else 503 QUEUE_FULL + Retry-After at once
 * ```
 * Per router process at most `languages × (connections + queue)` requests are held, so memory stays bounded
 * whatever the number of clients; the rest is refused in microseconds.
 *
 * Failure map (what a client of the router sees):
 * - the language's lane is full → `QUEUE_FULL` 503 + `Retry-After`, from the router itself;
 * - connection refused / reset / closed, connect timeout → `UPSTREAM_UNAVAILABLE` 502, at once: no retries,
 *   so a stopped model server is reported in milliseconds, not after a back-off;
 * - no reply headers (or body) within `timeoutMs` → `REQUEST_TIMEOUT` 504;
 * - an error reply from the model server (`{code, type, message}`) → the catalogue entry with that status and
 *   type, its message kept, `Retry-After` kept (queue full → 503 + Retry-After reaches the client).
 *
 * A request's `signal` (the client went away) aborts it wherever it is: waiting in the lane, or in flight, where
 * undici destroys its connection, which the model server sees as the client's disconnect.
 */
import { Client, Pool, errors as undiciErrors } from 'undici';
import { ERRORS, ServeError, type ErrorCode } from '../common/errors.js';
import { Gate, GateRefusedError, type GateStats } from './gate.js';

/** What the router sends for one request (the model name is the target language, as in the seed). */
export interface TranslateRequest {
  tgtLang: string;
  body: { src_lang: string; src_text: string | string[]; split?: 'sentences' | 'none' };
  requestId: string;
  /** The client's Cache-Control, passed on: `no-cache` makes the model server skip its translation cache. */
  cacheControl?: string | undefined;
  /** Aborts the upstream request (the client went away). */
  signal?: AbortSignal;
}

/** A successful model-server reply, passed through untouched. */
export interface TranslateReply {
  /** The raw JSON body (`{"translated": …}`). */
  body: Uint8Array<ArrayBuffer>;
  /** The model server's identification headers (`x-model-name`, `x-worker-id`, `x-device`, …) that it sent. */
  headers: Record<string, string>;
}

/** The slice of the router the app depends on; `Upstream` is the real one, tests may pass another server. */
export interface UpstreamClient {
  translate(request: TranslateRequest): Promise<TranslateReply>;
  /** Model server `/ping`: true when it answers 200 within `timeoutMs`. Never throws. */
  ping(timeoutMs: number): Promise<boolean>;
}

export interface UpstreamOptions {
  /** Model server inference base URL, e.g. `http://127.0.0.1:9999`. */
  url: string;
  /**
   * Connections per target language (per router process): the most requests of one language in flight to the
   * model server at once. Each carries one request at a time, so closing it cancels exactly that request.
   */
  connections: number;
  /**
   * Requests of one language that may wait for one of its connections; past it the router answers 503 with
   * `Retry-After` at once. Default `4 × connections`.
   */
  queue?: number;
  /** Longest wait for the reply headers, and between body chunks, in ms (→ 504). */
  timeoutMs: number;
  /** Longest wait for a TCP connect, in ms (→ 502). Loopback connects in microseconds; default 1000. */
  connectTimeoutMs?: number;
  /**
   * The `Authorization` header for the model server when it has TOKEN_AUTH on; `refresh` asks for a fresh read
   * (the model server writes new keys at each start). Called with `refresh` after a 401, and the request is sent
   * once more.
   */
  authorization?: (refresh: boolean) => string | undefined;
}

/** Headers of the model server's reply that the router passes on to its client. */
export const PASSTHROUGH_HEADERS = [
  'x-model-name',
  'x-model-version',
  'x-worker-id',
  'x-device',
  'x-device-fallback',
  'x-cache',
] as const;

/** undici / Node error codes that mean "the model server is not there (any more)". */
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_DESTROYED',
  'UND_ERR_CONNECT_TIMEOUT',
]);

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/** Seconds a client refused by a full lane is asked to wait: a lane drains in about one model-server batch. */
const LANE_RETRY_AFTER_S = 1;

interface Lane {
  gate: Gate;
  pool: Pool;
}

/** The real client: a lane (gate + undici Pool) per target language. `close()` lets in-flight requests finish. */
export class Upstream implements UpstreamClient {
  readonly #url: string;
  readonly #connections: number;
  readonly #queue: number;
  readonly #timeoutMs: number;
  readonly #connectTimeoutMs: number;
  readonly #authorization: UpstreamOptions['authorization'];
  /** Created on a language's first request; languages are validated before they get here. */
  readonly #lanes = new Map<string, Lane>();
  /** `/ping` has its own connection, so a health check never waits behind translations. */
  readonly #control: Client;
  #closed = false;

  constructor(options: UpstreamOptions) {
    this.#url = options.url;
    this.#connections = options.connections;
    this.#queue = options.queue ?? 4 * options.connections;
    this.#timeoutMs = options.timeoutMs;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 1_000;
    this.#authorization = options.authorization;
    // Validates both bounds now rather than on the first request.
    void new Gate(this.#connections, this.#queue);
    this.#control = new Client(options.url, { connect: { timeout: this.#connectTimeoutMs } });
  }

  /** Each lane's gate: in flight, waiting, refused so far. */
  get stats(): Record<string, GateStats> {
    return Object.fromEntries([...this.#lanes].map(([lang, lane]) => [lang, lane.gate.stats]));
  }

  #lane(tgtLang: string): Lane {
    let lane = this.#lanes.get(tgtLang);
    if (lane === undefined) {
      if (this.#closed) throw new ServeError('SHUTTING_DOWN', 'Router is shutting down.');
      lane = {
        gate: new Gate(this.#connections, this.#queue),
        pool: new Pool(this.#url, {
          connections: this.#connections,
          pipelining: 1,
          connect: { timeout: this.#connectTimeoutMs },
          headersTimeout: this.#timeoutMs,
          bodyTimeout: this.#timeoutMs,
        }),
      };
      this.#lanes.set(tgtLang, lane);
    }
    return lane;
  }

  async translate(request: TranslateRequest): Promise<TranslateReply> {
    const lane = this.#lane(request.tgtLang);
    let release;
    try {
      const entered = lane.gate.enter(request.signal);
      release = typeof entered === 'function' ? entered : await entered;
    } catch (err) {
      if (!(err instanceof GateRefusedError)) throw err;
      if (err.reason === 'aborted') throw request.signal?.reason ?? err;
      throw new ServeError(
        'QUEUE_FULL',
        `Router queue of model ${request.tgtLang} is full (${this.#connections} in flight, ${this.#queue} waiting), retry later.`,
        { retryAfterS: LANE_RETRY_AFTER_S },
      );
    }
    try {
      return await this.#exchange(lane.pool, request);
    } finally {
      release();
    }
  }

  async #exchange(pool: Pool, request: TranslateRequest): Promise<TranslateReply> {
    const json = JSON.stringify(request.body);
    let response = await this.#send(pool, request, json, false);
    if (response.statusCode === 401 && this.#authorization) {
      await response.body.dump();
      response = await this.#send(pool, request, json, true);
    }
    let body: Uint8Array<ArrayBuffer>;
    try {
      body = new Uint8Array(await response.body.arrayBuffer());
    } catch (err) {
      throw transportError(err, this.#timeoutMs);
    }
    if (response.statusCode !== 200) {
      throw upstreamError(response.statusCode, Buffer.from(body), header(response.headers['retry-after']));
    }
    const headers: Record<string, string> = {};
    for (const name of PASSTHROUGH_HEADERS) {
      const value = header(response.headers[name]);
      if (value !== undefined) headers[name] = value;
    }
    return { body, headers };
  }

  async #send(pool: Pool, request: TranslateRequest, body: string, refreshKey: boolean) {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': request.requestId };
    if (request.cacheControl !== undefined) headers['cache-control'] = request.cacheControl;
    const authorization = this.#authorization?.(refreshKey);
    if (authorization !== undefined) headers.authorization = authorization;
    try {
      return await pool.request({
        method: 'POST',
        path: `/predictions/${encodeURIComponent(request.tgtLang)}`,
        headers,
        body,
        signal: request.signal,
      });
    } catch (err) {
      throw transportError(err, this.#timeoutMs);
    }
  }

  async ping(timeoutMs: number): Promise<boolean> {
    try {
      const response = await this.#control.request({
        method: 'GET',
        path: '/ping',
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      });
      await response.body.dump();
      return response.statusCode === 200;
    } catch {
      return false;
    }
  }

  /** Stops new requests, waits for in-flight ones, then closes the connections. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const dispatchers = [this.#control, ...[...this.#lanes.values()].map((l) => l.pool)];
    await Promise.all(dispatchers.map((d) => (d.closed || d.destroyed ? undefined : d.close())));
  }
}

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** A thrown transport error → 502 (not reachable) or 504 (too slow); anything else is rethrown as is. */
export function transportError(err: unknown, timeoutMs: number): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && TIMEOUT_CODES.has(code)) {
    return new ServeError('REQUEST_TIMEOUT', `Model server did not answer within ${timeoutMs / 1000} s.`, {
      cause: err,
    });
  }
  if (
    (typeof code === 'string' && UNAVAILABLE_CODES.has(code)) ||
    err instanceof undiciErrors.SocketError ||
    err instanceof undiciErrors.ConnectTimeoutError
  ) {
    return new ServeError('UPSTREAM_UNAVAILABLE', undefined, { cause: err });
  }
  return err;
}

/**
 * An error reply of the model server → the catalogue code with the same status and TorchServe type (the
 * model server builds its replies from the same catalogue). Several codes share a status and type (the 503s:
 * queue full, no worker, prediction failed, shutting down); the default message picks among them, else the
 * first. The client sees the model server's own message either way; the code only names it in our logs.
 */
export function upstreamError(status: number, body: Buffer, retryAfter: string | undefined): ServeError {
  let type: string | undefined;
  let message: string | undefined;
  try {
    const parsed = JSON.parse(body.toString('utf8')) as { type?: unknown; message?: unknown };
    if (typeof parsed?.type === 'string') type = parsed.type;
    if (typeof parsed?.message === 'string') message = parsed.message;
  } catch {
    // Not TorchServe's JSON shape: keep the status, describe it generically below.
  }
  const entries = Object.entries(ERRORS) as [ErrorCode, (typeof ERRORS)[ErrorCode]][];
  const sameKind = entries.filter(([, e]) => e.status === status && (type === undefined || e.type === type));
  const code =
    sameKind.find(([, e]) => e.message === message)?.[0] ??
    sameKind[0]?.[0] ??
    entries.find(([, e]) => e.status === status)?.[0] ??
    (status >= 500 ? 'INTERNAL' : 'BAD_REQUEST');
  const seconds = retryAfter !== undefined && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) : undefined;
  return new ServeError(code, message ?? `Model server answered ${status}.`, { retryAfterS: seconds });
}
