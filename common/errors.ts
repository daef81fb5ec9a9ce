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

/**
 * The catalogue: code → HTTP status, TorchServe exception type, default message.
 * Types follow TorchServe's names where a client could depend on them (see shared/TORCHSERVE.md).
 */
export const ERRORS = {
  BAD_REQUEST: { status: 400, type: 'BadRequestException', message: 'Bad request.' },
  INVALID_JSON: { status: 400, type: 'BadRequestException', message: 'Request body is not valid JSON.' },
  UNKNOWN_LANGUAGE: { status: 400, type: 'BadRequestException', message: 'Unknown language code.' },
  UNAUTHORIZED: {
    status: 401,
    type: 'InvalidKeyException',
    message: 'Token Authorization failed. Token either incorrect, expired, or not provided correctly',
  },
  RESOURCE_NOT_FOUND: {
    status: 404,
    type: 'ResourceNotFoundException',
    message: 'Requested resource is not found, please refer to API document.',
  },
  MODEL_NOT_FOUND: { status: 404, type: 'ModelNotFoundException', message: 'Model not found.' },
  MODEL_VERSION_NOT_FOUND: {
    status: 404,
    type: 'ModelVersionNotFoundException',
    message: 'Model version not found.',
  },
  METHOD_NOT_ALLOWED: {
    status: 405,
    type: 'MethodNotAllowedException',
    message: 'Requested method is not allowed, please refer to API document.',
  },
  GLOSSARY_NOT_FOUND: { status: 404, type: 'ResourceNotFoundException', message: 'Glossary not found.' },
  CONFLICT: { status: 409, type: 'ConflictStatusException', message: 'Conflict.' },
  OVERLOADED: {
    status: 503,
    type: 'ServiceUnavailableException',
    message: 'Model is overloaded: the expected wait exceeds the queue budget, retry later.',
  },
  PAYLOAD_TOO_LARGE: { status: 413, type: 'RequestEntityTooLargeException', message: 'Request body is too large.' },
  UNSUPPORTED_MEDIA_TYPE: {
    status: 415,
    type: 'UnsupportedMediaTypeException',
    message: 'Content-Type must be application/json.',
  },
  INTERNAL: { status: 500, type: 'InternalServerException', message: 'Internal server error.' },
  WORKER_DIED: { status: 500, type: 'InternalServerException', message: 'Worker died.' },
  WORKER_START_FAILED: { status: 500, type: 'InternalServerException', message: 'Failed to start workers.' },
  UPSTREAM_UNAVAILABLE: { status: 502, type: 'BadGatewayException', message: 'Model server is unavailable.' },
  QUEUE_FULL: {
    status: 503,
    type: 'ServiceUnavailableException',
    message: 'Job queue is full, retry later.',
  },
  NO_WORKER: { status: 503, type: 'ServiceUnavailableException', message: 'No worker is available for the model.' },
  PREDICTION_FAILED: { status: 503, type: 'ServiceUnavailableException', message: 'Prediction failed' },
  SHUTTING_DOWN: { status: 503, type: 'ServiceUnavailableException', message: 'Server is shutting down.' },
  REQUEST_TIMEOUT: { status: 504, type: 'RequestTimeoutException', message: 'Request timed out.' },
  // nginx's non-standard 499: nobody reads it (the client is gone), but logs and metrics tell it from a failure.
  CLIENT_CLOSED: { status: 499, type: 'ClientClosedRequestException', message: 'Client closed the request.' },
  OUT_OF_MEMORY: { status: 507, type: 'InsufficientStorageException', message: 'Worker ran out of memory.' },
  GLOSSARIES_FULL: { status: 507, type: 'InsufficientStorageException', message: 'Glossary storage is full.' },
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
