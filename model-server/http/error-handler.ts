/**
 * @module model-server/http/error-handler — the only place an error becomes HTTP, and the middleware every
 * port shares: `x-request-id` on every reply, the request body limit (413), token authorization (401), and
 * TorchServe's 404/405 answers.
 *
 * Bodies are TorchServe's `{code, type, message}`, with the catalogue code in `x-error-code` (common/errors.ts);
 * QUEUE_FULL carries `Retry-After`. An error that is not a
 * ServeError is logged with its stack and answered as a generic 500 — the client never sees internals.
 */
import { timingSafeEqual } from 'node:crypto';
import type { HttpBindings } from '@hono/node-server';
import type { Context, Hono, MiddlewareHandler } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { errorHeaders, ServeError, toServeError, type ErrorCode } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { requestIdFrom } from '../../common/request-id.js';

/** @hono/node-server's bindings when served by it (absent under `app.request()`), and our middleware's variables. */
export type AppEnv = { Bindings: Partial<HttpBindings>; Variables: { requestId: string } };

/** Refusals that shed load by design (logged at debug, not warn). */
const LOAD_SHEDDING = new Set<ErrorCode>(['QUEUE_FULL', 'OVERLOADED', 'NO_WORKER', 'SHUTTING_DOWN']);

export interface CommonOptions {
  log: Logger;
  /** Largest request body, bytes (MAX_REQUEST_SIZE); over it → 413. */
  maxBodyBytes: number;
  /** When set, requests must carry `Authorization: Bearer <token>` (except paths in `publicPaths`). */
  token?: string | undefined;
  /** Paths answered without a token (TorchServe leaves /ping and the API description open). */
  publicPaths?: readonly string[];
}

/** Install the shared middleware and the 404/error handlers on one port's app. Call before adding routes. */
export function installCommon(app: Hono<AppEnv>, options: CommonOptions): void {
  app.use('*', requestId());
  app.use('*', limitBody(options.maxBodyBytes));
  if (options.token !== undefined) app.use('*', requireToken(options.token, options.publicPaths ?? []));
  app.notFound((c) => errorResponse(c, new ServeError('RESOURCE_NOT_FOUND')));
  app.onError(createErrorHandler(options.log));
}

/**
 * 413 past `maxBytes`. A declared Content-Length is checked from the socket's own headers, and the handler then
 * reads the body through @hono/node-server's direct path, as the router does (router/app.ts `readBody`). Hono's
 * `bodyLimit` looks at `c.req.raw.body`, which makes @hono/node-server build a whole web `Request` (with an abort
 * listener and a finalizer) for every request: half the requests per second on a model server refusing load, and
 * garbage that stays until the finalizers run. A chunked body (or one under `app.request()`) goes through
 * `bodyLimit`, which counts it as it streams.
 */
function limitBody(maxBytes: number): MiddlewareHandler<AppEnv> {
  const tooLarge = () => new ServeError('PAYLOAD_TOO_LARGE', `Request body is larger than ${maxBytes} bytes.`);
  const limit = bodyLimit({
    maxSize: maxBytes,
    onError: () => {
      throw tooLarge();
    },
  });
  return async (c, next) => {
    const headers = c.env?.incoming?.headers;
    if (headers === undefined || headers['transfer-encoding'] !== undefined) return limit(c, next);
    // Without either header an HTTP/1.1 request has no body.
    if (Number(headers['content-length'] ?? 0) > maxBytes) throw tooLarge();
    return next();
  };
}

/** Answer `err` as TorchServe would; log it when it is not one of ours. */
export function createErrorHandler(log: Logger): (err: Error, c: Context<AppEnv>) => Response {
  return (err, c) => {
    const serveError = toServeError(err);
    if (!(err instanceof ServeError)) {
      log.error({ err, requestId: c.get('requestId'), path: c.req.path }, 'unhandled error');
    } else if (serveError.status >= 500) {
      // Overload answers are expected and can come by the thousand: not worth a warning each.
      const level = LOAD_SHEDDING.has(serveError.code) ? 'debug' : 'warn';
      log[level](
        { code: serveError.code, message: serveError.message, requestId: c.get('requestId') },
        'request failed',
      );
    }
    return errorResponse(c, serveError);
  };
}

/** Throw this from a route that exists for other methods. */
export function methodNotAllowed(): never {
  throw new ServeError('METHOD_NOT_ALLOWED');
}

function errorResponse(c: Context<AppEnv>, err: ServeError): Response {
  const headers = errorHeaders(err);
  const id = c.get('requestId');
  if (id) headers['x-request-id'] = id;
  return c.json(err.toBody(), err.status as 400, headers);
}

function requestId(): MiddlewareHandler<AppEnv> {
  return async (c, next) => {
    // The rule every hop shares, so nginx, router and model server logs carry one id.
    const id = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', id);
    await next();
    c.res.headers.set('x-request-id', id);
  };
}

function requireToken(token: string, publicPaths: readonly string[]): MiddlewareHandler<AppEnv> {
  const expected = Buffer.from(token);
  return async (c, next) => {
    if (publicPaths.includes(c.req.path) || (c.req.method === 'OPTIONS' && c.req.path === '/')) return next();
    const match = /^Bearer\s+(\S+)$/i.exec(c.req.header('authorization') ?? '');
    const given = Buffer.from(match?.[1] ?? '');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw new ServeError('UNAUTHORIZED');
    return next();
  };
}
