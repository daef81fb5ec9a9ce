/**
 * @module router/upstream/exchange — one translation request to one model server and its whole answer: the request
 * built (request id, Cache-Control, the key, sent once more with a fresh key after a 401), one deadline for headers
 * and body, the answer read within its byte bound and turned into a reply or a `ServeError`.
 */
import type { Pool } from 'undici';
import { ERROR_CODE_HEADER, REACHED_WORKER_HEADER, ServeError } from '../../common/errors.js';
import type { ModelServers } from './model-servers.js';
import type { TranslateInput } from '../translate-request.js';
import { transportError, upstreamError } from './errors.js';
import { header, isJsonAnswer, readCapped } from './reply.js';

/** What the router sends for one request (the model name is the target language, as in the seed). */
export interface TranslateRequest {
  tgtLang: string;
  body: Omit<TranslateInput, 'tgt_lang'>;
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

/** Headers of the model server's reply that the router passes on to its client. */
export const PASSTHROUGH_HEADERS = [
  'x-model-name',
  'x-model-version',
  'x-worker-id',
  'x-device',
  'x-device-fallback',
  'x-cache',
] as const;

/** What an exchange is bounded and authorized by, and whom it tells what it heard (router/upstream/upstream.ts's options). */
export interface ExchangeOptions {
  timeoutMs: number;
  maxResponseBytes: number;
  authorization: ((refresh: boolean) => string | undefined) | undefined;
  /** Told of every HTTP answer (`heard`) and of every translation (`served`); absent for a `url` upstream. */
  servers: ModelServers | undefined;
}

/**
 * One request and its whole answer, within one deadline (`timeoutMs` from the send, not reset by each chunk of the
 * body), reading at most `maxResponseBytes`; a 200 must be JSON. What a model server sends otherwise is its failure:
 * 502, or 504 past the deadline.
 */
export async function exchange(
  origin: string,
  pool: Pool,
  request: TranslateRequest,
  options: ExchangeOptions,
): Promise<TranslateReply> {
  const json = JSON.stringify(request.body);
  // One controller for the client's abort and the deadline, both let go of when the exchange ends. Why not
  // AbortSignal.timeout and AbortSignal.any: the timer holds its signal for the whole timeout after the answer,
  // and each combined signal leaves weak references and a finalizer behind, garbage that piles up between
  // collections when a router answers thousands of requests a second (refusals under overload).
  const controller = new AbortController();
  const signal = controller.signal;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    controller.abort(new DOMException('The model server did not answer in time.', 'TimeoutError'));
  }, options.timeoutMs);
  const clientGone = () => controller.abort(request.signal!.reason);
  if (request.signal?.aborted) clientGone();
  else request.signal?.addEventListener('abort', clientGone, { once: true });
  try {
    const overDeadline = (err: unknown) =>
      timedOut && !request.signal?.aborted
        ? new ServeError('REQUEST_TIMEOUT', `Model server did not answer within ${options.timeoutMs / 1000} s.`, {
            cause: err,
          })
        : transportError(err, options.timeoutMs);
    // The POST; `refreshKey` asks for a fresh key (after a 401: the model server writes new keys at each start).
    const send = async (refreshKey: boolean) => {
      const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': request.requestId };
      if (request.cacheControl !== undefined) headers['cache-control'] = request.cacheControl;
      const authorization = options.authorization?.(refreshKey);
      if (authorization !== undefined) headers.authorization = authorization;
      const path = `/predictions/${encodeURIComponent(request.tgtLang)}`;
      try {
        return await pool.request({ method: 'POST', path, headers, body: json, signal });
      } catch (err) {
        // Told apart below: the deadline from the client's abort; an abort is rethrown as it is.
        if (signal.aborted) throw err;
        throw transportError(err, options.timeoutMs);
      }
    };
    let response;
    try {
      response = await send(false);
      options.servers?.heard(origin);
      if (response.statusCode === 401 && options.authorization) {
        await response.body.dump();
        response = await send(true);
      }
    } catch (err) {
      throw err instanceof ServeError ? err : overDeadline(err);
    }
    let body: Uint8Array<ArrayBuffer>;
    try {
      body = await readCapped(response.body, header(response.headers['content-length']), options.maxResponseBytes);
    } catch (err) {
      throw err instanceof ServeError ? err : overDeadline(err);
    }
    if (response.statusCode !== 200) {
      throw upstreamError(response.statusCode, body, {
        code: header(response.headers[ERROR_CODE_HEADER]),
        retryAfter: header(response.headers['retry-after']),
        reachedWorker: header(response.headers[REACHED_WORKER_HEADER]),
      });
    }
    if (!isJsonAnswer(header(response.headers['content-type']), body)) {
      throw new ServeError('UPSTREAM_UNAVAILABLE', 'Model server answered 200 with a body that is not JSON.');
    }
    options.servers?.served(origin, request.tgtLang);
    const headers: Record<string, string> = {};
    for (const name of PASSTHROUGH_HEADERS) {
      const value = header(response.headers[name]);
      if (value !== undefined) headers[name] = value;
    }
    // Which model server answered (worker ids repeat across hosts): for clients and the router's log line.
    headers['x-model-server'] = new URL(origin).host;
    return { body, headers };
  } finally {
    clearTimeout(timer);
    request.signal?.removeEventListener('abort', clientGone);
  }
}
