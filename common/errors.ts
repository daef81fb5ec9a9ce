/**
 * @module common/errors — the one error type of mt-serve and its catalogue.
 *
 * Every failure that can reach a client is a `ServeError` built from `ERRORS`. Each app's `onError`
 * (and nothing else) turns one into HTTP: TorchServe's body `{code: <status>, type, message}`.
 * Across the frontend↔worker boundary an error travels as `{code, message}` (see `toWire`); across HTTP hops
 * (model server → router → front) the code travels beside TorchServe's body in the `x-error-code` header, and an
 * inference answer states in `x-reached-worker` whether any job of the request reached a worker (`errorHeaders`).
 * Callers switch on `code`, never on message text.
 */

/** One entry of the catalogue, its literal status, type and message kept. */
function entry<const S extends number, const T extends string, const M extends string>(status: S, type: T, message: M) {
  return { status, type, message };
}

/**
 * The catalogue: code → HTTP status, TorchServe exception type, default message.
 * Types follow TorchServe's names where a client could depend on them (see shared/TORCHSERVE.md).
 */
export const ERRORS = {
  BAD_REQUEST: entry(400, 'BadRequestException', 'Bad request.'),
  INVALID_JSON: entry(400, 'BadRequestException', 'Request body is not valid JSON.'),
  UNKNOWN_LANGUAGE: entry(400, 'BadRequestException', 'Unknown language code.'),
  UNAUTHORIZED: entry(
    401,
    'InvalidKeyException',
    'Token Authorization failed. Token either incorrect, expired, or not provided correctly',
  ),
  KEY_QUOTA_EXCEEDED: entry(403, 'QuotaExceededException', "The API key's character quota is used up."),
  RESOURCE_NOT_FOUND: entry(
    404,
    'ResourceNotFoundException',
    'Requested resource is not found, please refer to API document.',
  ),
  MODEL_NOT_FOUND: entry(404, 'ModelNotFoundException', 'Model not found.'),
  MODEL_VERSION_NOT_FOUND: entry(404, 'ModelVersionNotFoundException', 'Model version not found.'),
  METHOD_NOT_ALLOWED: entry(
    405,
    'MethodNotAllowedException',
    'Requested method is not allowed, please refer to API document.',
  ),
  GLOSSARY_NOT_FOUND: entry(404, 'ResourceNotFoundException', 'Glossary not found.'),
  CONFLICT: entry(409, 'ConflictStatusException', 'Conflict.'),
  OVERLOADED: entry(
    503,
    'ServiceUnavailableException',
    'Model is overloaded: the expected wait exceeds the queue budget, retry later.',
  ),
  KEY_RATE_LIMITED: entry(429, 'TooManyRequestsException', 'Too many requests for this API key, retry later.'),
  PAYLOAD_TOO_LARGE: entry(413, 'RequestEntityTooLargeException', 'Request body is too large.'),
  UNSUPPORTED_MEDIA_TYPE: entry(415, 'UnsupportedMediaTypeException', 'Content-Type must be application/json.'),
  INTERNAL: entry(500, 'InternalServerException', 'Internal server error.'),
  WORKER_DIED: entry(500, 'InternalServerException', 'Worker died.'),
  WORKER_START_FAILED: entry(500, 'InternalServerException', 'Failed to start workers.'),
  UPSTREAM_UNAVAILABLE: entry(502, 'BadGatewayException', 'Model server is unavailable.'),
  QUEUE_FULL: entry(503, 'ServiceUnavailableException', 'Job queue is full, retry later.'),
  NO_WORKER: entry(503, 'ServiceUnavailableException', 'No worker is available for the model.'),
  PREDICTION_FAILED: entry(503, 'ServiceUnavailableException', 'Prediction failed'),
  SHUTTING_DOWN: entry(503, 'ServiceUnavailableException', 'Server is shutting down.'),
  REQUEST_TIMEOUT: entry(504, 'RequestTimeoutException', 'Request timed out.'),
  // nginx's non-standard 499: nobody reads it (the client is gone), but logs and metrics tell it from a failure.
  CLIENT_CLOSED: entry(499, 'ClientClosedRequestException', 'Client closed the request.'),
  OUT_OF_MEMORY: entry(507, 'InsufficientStorageException', 'Worker ran out of memory.'),
  GLOSSARIES_FULL: entry(507, 'InsufficientStorageException', 'Glossary storage is full.'),
} as const;

export type ErrorCode = keyof typeof ERRORS;

/** What an error looks like on the wire between processes: never a stack. */
export interface WireError {
  code: ErrorCode;
  message: string;
}

/** TorchServe's JSON error body. */
export interface ErrorBody {
  code: number;
  type: string;
  message: string;
}

/** Response header that carries an error answer's catalogue code on every HTTP hop. */
export const ERROR_CODE_HEADER = 'x-error-code';
/**
 * Response header of an inference error answer: `false` when no job of the request reached a worker (so another
 * replica may take the whole request), `true` when one did. Absent: unknown, which never allows a retry.
 */
export const REACHED_WORKER_HEADER = 'x-reached-worker';

export interface ServeErrorOptions {
  retryAfterS?: number | undefined;
  cause?: unknown;
  /** Whether any job of the request reached a worker; undefined when not known (REACHED_WORKER_HEADER). */
  reachedWorker?: boolean | undefined;
}

export class ServeError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly type: string;
  /** Seconds a client should wait before retrying (sent as `Retry-After`), when it makes sense. */
  readonly retryAfterS: number | undefined;
  /** ServeErrorOptions.reachedWorker. */
  readonly reachedWorker: boolean | undefined;

  constructor(code: ErrorCode, message?: string, options?: ServeErrorOptions) {
    const entry = ERRORS[code];
    super(message ?? entry.message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'ServeError';
    this.code = code;
    this.status = entry.status;
    this.type = entry.type;
    this.retryAfterS = options?.retryAfterS;
    this.reachedWorker = options?.reachedWorker;
  }

  /** The same error, stating whether any job of its request reached a worker. */
  withReach(reachedWorker: boolean): ServeError {
    return new ServeError(this.code, this.message, { retryAfterS: this.retryAfterS, cause: this, reachedWorker });
  }

  toBody(): ErrorBody {
    return { code: this.status, type: this.type, message: this.message };
  }

  toWire(): WireError {
    return { code: this.code, message: this.message };
  }

  static fromWire(wire: WireError): ServeError {
    return new ServeError(isErrorCode(wire.code) ? wire.code : 'INTERNAL', wire.message);
  }
}

/** The headers every HTTP error answer carries besides its body: the code, Retry-After, the reach when known. */
export function errorHeaders(err: ServeError): Record<string, string> {
  const headers: Record<string, string> = { [ERROR_CODE_HEADER]: err.code };
  if (err.retryAfterS !== undefined) headers['retry-after'] = String(err.retryAfterS);
  if (err.reachedWorker !== undefined) headers[REACHED_WORKER_HEADER] = String(err.reachedWorker);
  return headers;
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERRORS, value);
}

/**
 * Any thrown value as a ServeError: ServeErrors pass through, anything else becomes a generic 500
 * (the caller logs the original with its stack; the client never sees it).
 */
export function toServeError(err: unknown): ServeError {
  if (err instanceof ServeError) return err;
  return new ServeError('INTERNAL', undefined, { cause: err });
}
