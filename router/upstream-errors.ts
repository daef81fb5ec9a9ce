/**
 * @module router/upstream-errors — what the router makes of a model server's failure: a transport error becomes
 * 502 (not reachable) or 504 (too slow), an error reply the catalogue entry it names, and the codes that say a
 * request never reached a worker (so router/upstream.ts may send it to another replica).
 */
import { errors as undiciErrors } from 'undici';
import { ERRORS, ServeError, type ErrorCode } from '../common/errors.js';

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
 * The model server's refusals at admission (queue bound, queue budget, no worker, shutting down, unregistered
 * while queued): the request never reached a worker, so another replica may take it. All are 503
 * ServiceUnavailableException on the wire (as PREDICTION_FAILED, which did reach a worker), and the wire body
 * carries no code: `upstreamError` tells them apart by the model server's messages below.
 */
export const REFUSAL_CODES: ReadonlySet<ErrorCode> = new Set<ErrorCode>([
  'QUEUE_FULL',
  'OVERLOADED',
  'NO_WORKER',
  'SHUTTING_DOWN',
]);
const REFUSAL_MESSAGES: readonly [ErrorCode, RegExp][] = [
  ['QUEUE_FULL', /^Job queue (of model .* )?is full/],
  ['OVERLOADED', /^Model .* is overloaded/],
  ['NO_WORKER', /^No worker is available|was unregistered before this job ran/],
  ['SHUTTING_DOWN', /^Server is shutting down/],
];

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);

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
    (status === 503 && message !== undefined
      ? REFUSAL_MESSAGES.find(([, pattern]) => pattern.test(message!))?.[0]
      : undefined) ??
    sameKind[0]?.[0] ??
    entries.find(([, e]) => e.status === status)?.[0] ??
    (status >= 500 ? 'INTERNAL' : 'BAD_REQUEST');
  const seconds = retryAfter !== undefined && /^\d+$/.test(retryAfter.trim()) ? Number(retryAfter) : undefined;
  return new ServeError(code, message ?? `Model server answered ${status}.`, { retryAfterS: seconds });
}
