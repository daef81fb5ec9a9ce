/**
 * @module router/upstream/errors — what the router makes of a model server's failure: a transport error becomes
 * 502 (not reachable) or 504 (too slow), an error reply the catalogue entry its `x-error-code` names, and the codes
 * after which router/upstream/upstream.ts may send a request that reached no worker to another replica.
 */
import { errors as undiciErrors } from 'undici';
import { ERRORS, isErrorCode, ServeError, type ErrorCode } from '../../common/errors.js';

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

/** Transport failures before a connection existed: the request never reached the model server. */
export const NOT_CONNECTED_CODES = new Set(['ECONNREFUSED', 'UND_ERR_CONNECT_TIMEOUT', 'EHOSTUNREACH', 'ENETUNREACH']);

/**
 * Codes of an error answer after which another replica may take the request, provided the model server also
 * stated that no job of it reached a worker (`x-reached-worker: false`): admission refusals (queue bound, queue
 * budget, no worker, shutting down, unregistered while queued) and a model the host does not have (its language
 * list was stale). A request any of whose jobs reached a worker is never sent twice, whatever its code.
 */
export const RETRY_ELSEWHERE_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'QUEUE_FULL',
  'OVERLOADED',
  'NO_WORKER',
  'SHUTTING_DOWN',
  'MODEL_NOT_FOUND',
]);

/** Longest model-server message the router passes on; past it the catalogue's wording is used. */
const MAX_MESSAGE_CHARS = 1_024;

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

/**
 * The transport failure under an `UPSTREAM_UNAVAILABLE` (`ECONNREFUSED`, `ECONNRESET`, `UND_ERR_SOCKET` …): whether
 * the connection was refused or torn decides what the request's host is thought to be (retry.ts), and the log line
 * names it. Undefined for any other error, and for an answer that broke the error contract.
 */
export function transportCode(err: ServeError): string | undefined {
  if (err.code !== 'UPSTREAM_UNAVAILABLE') return undefined;
  const code = (err.cause as { code?: unknown } | undefined)?.code;
  return typeof code === 'string' ? code : undefined;
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
 * An error reply of the model server → a ServeError. The code comes from the `x-error-code` header (never from
 * the message text) and must be one whose status the reply has; a reply without one is not the model server's
 * error contract: a 3xx (a redirect the router never follows) or anything else then becomes `UPSTREAM_UNAVAILABLE`
 * 502, the model server's failure and not the client's. The model server's message is kept when it is TorchServe's
 * shape and short, else the catalogue's wording; `Retry-After` and `x-reached-worker` are kept.
 */
export function upstreamError(
  status: number,
  body: Uint8Array,
  headers: { code?: string | undefined; retryAfter?: string | undefined; reachedWorker?: string | undefined },
): ServeError {
  const code = headers.code?.trim();
  if (!isErrorCode(code) || ERRORS[code].status !== status) {
    return new ServeError(
      'UPSTREAM_UNAVAILABLE',
      status >= 300 && status < 400
        ? `Model server answered a redirect (${status}).`
        : `Model server answered ${status} without an error code.`,
    );
  }
  let message: string | undefined;
  try {
    const parsed = JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8')) as {
      message?: unknown;
    };
    if (typeof parsed?.message === 'string' && parsed.message.length <= MAX_MESSAGE_CHARS) message = parsed.message;
  } catch {
    // Not TorchServe's JSON shape: the catalogue's wording below.
  }
  const retryAfter = headers.retryAfter?.trim();
  const seconds = retryAfter !== undefined && /^\d{1,6}$/.test(retryAfter) ? Number(retryAfter) : undefined;
  const reached = headers.reachedWorker?.trim();
  return new ServeError(code, message, {
    retryAfterS: seconds,
    reachedWorker: reached === 'false' ? false : reached === 'true' ? true : undefined,
  });
}
