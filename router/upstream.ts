/**
 * @module router/upstream — the router's client for the model server's inference API: one undici Pool of
 * keep-alive connections, and the one place where a transport failure or an upstream error reply becomes a
 * typed `ServeError`.
 *
 * Failure map (what a client of the router sees):
 * - connection refused / reset / closed, connect timeout → `UPSTREAM_UNAVAILABLE` 502, at once: no retries,
 *   so a stopped model server is reported in milliseconds, not after a back-off;
 * - no reply headers (or body) within `timeoutMs` → `REQUEST_TIMEOUT` 504;
 * - an error reply from the model server (`{code, type, message}`) → the catalogue entry with that status and
 *   type, its message kept, `Retry-After` kept (queue full → 503 + Retry-After reaches the client).
 */
import { Pool, errors as undiciErrors } from 'undici';
import { ERRORS, ServeError, type ErrorCode } from '../common/errors.js';

/** What the router sends for one request (the model name is the target language, as in the seed). */
export interface TranslateRequest {
  tgtLang: string;
  body: { src_lang: string; src_text: string | string[] };
  requestId: string;
  /** Aborts the upstream request (the client went away). */
  signal?: AbortSignal;
}

/** A successful model-server reply, passed through untouched. */
export interface TranslateReply {
  /** The raw JSON body (`{"translated": …}`). */
  body: ArrayBuffer;
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
  /** Keep-alive connections kept to the model server (per router process). */
  connections: number;
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

/** The real client: an undici Pool to the model server. `close()` lets in-flight requests finish. */
export class Upstream implements UpstreamClient {
  readonly #pool: Pool;
  readonly #timeoutMs: number;
  readonly #authorization: UpstreamOptions['authorization'];

  constructor(options: UpstreamOptions) {
    this.#timeoutMs = options.timeoutMs;
    this.#authorization = options.authorization;
    this.#pool = new Pool(options.url, {
      connections: options.connections,
      pipelining: 1,
      connect: { timeout: options.connectTimeoutMs ?? 1_000 },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    });
  }

  async translate(request: TranslateRequest): Promise<TranslateReply> {
    const json = JSON.stringify(request.body);
    let response = await this.#send(request, json, false);
    if (response.statusCode === 401 && this.#authorization) {
      await response.body.dump();
      response = await this.#send(request, json, true);
    }
    let body: ArrayBuffer;
    try {
      body = await response.body.arrayBuffer();
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

  async #send(request: TranslateRequest, body: string, refreshKey: boolean) {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': request.requestId };
    const authorization = this.#authorization?.(refreshKey);
    if (authorization !== undefined) headers.authorization = authorization;
    try {
      return await this.#pool.request({
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
      const response = await this.#pool.request({
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
    if (!this.#pool.closed && !this.#pool.destroyed) await this.#pool.close();
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
