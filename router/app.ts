/**
 * @module router/app — the router's HTTP surface (the seed's Flask "classifier"): validate a translation
 * request, route it on `tgt_lang` to the model server, answer its JSON. Built by `createRouterApp`, which
 * never listens (`main.ts` does); `onError` is the only place an error becomes HTTP.
 *
 * Routes: `POST /` translate · `GET /health` router + model server liveness. Anything else: TorchServe's
 * 404/405 JSON.
 */
import { randomUUID } from 'node:crypto';
import { Hono, type Context } from 'hono';
import { bodyLimit } from 'hono/body-limit';
import { ServeError, toServeError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { acceptsContentType, parseTranslateRequest } from './translate-request.js';
import type { UpstreamClient } from './upstream.js';

export interface RouterAppConfig {
  /** Largest accepted request body in bytes (→ 413). */
  maxBodyBytes: number;
  /** Languages served (keys of setup_config.json); `tgt_lang` must be one of them. */
  languages: readonly string[];
  /** Put request texts in the log line (off by default: texts can be personal data). */
  logBodies: boolean;
  /** How long `/health` waits for the model server's `/ping`, in ms. Default 1000. */
  healthTimeoutMs?: number;
}

export interface RouterAppDeps {
  upstream: UpstreamClient;
  logger: Logger;
}

type Env = {
  Variables: {
    requestId: string;
    tgtLang?: string;
    texts?: number;
    srcText?: string | string[];
    errorCode?: string;
  };
};

const LOG_KEYS = { 'x-model-name': 'model', 'x-worker-id': 'worker', 'x-device': 'device' } as const;

/** An incoming `x-request-id` we reuse: printable, no spaces, at most 128 characters. */
const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;

export function createRouterApp(config: RouterAppConfig, deps: RouterAppDeps): Hono<Env> {
  const { upstream, logger } = deps;
  const healthTimeoutMs = config.healthTimeoutMs ?? 1_000;
  const app = new Hono<Env>();

  // Request id and the one log line per request. Registered first, so it wraps everything else.
  app.use('*', async (c, next) => {
    const startedAt = performance.now();
    const incoming = c.req.header('x-request-id');
    const requestId = incoming !== undefined && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    c.set('requestId', requestId);
    await next();
    c.res.headers.set('x-request-id', requestId);
    const line: Record<string, unknown> = {
      reqId: requestId,
      method: c.req.method,
      path: c.req.path,
      status: c.res.status,
      ms: Math.round((performance.now() - startedAt) * 10) / 10,
    };
    if (c.var.tgtLang !== undefined) line.tgt_lang = c.var.tgtLang;
    if (c.var.texts !== undefined) line.texts = c.var.texts;
    if (c.var.errorCode !== undefined) line.error = c.var.errorCode;
    for (const name of ['x-model-name', 'x-worker-id', 'x-device'] as const) {
      const value = c.res.headers.get(name);
      if (value !== null) line[LOG_KEYS[name]] = value;
    }
    if (config.logBodies && c.var.srcText !== undefined) line.src_text = c.var.srcText;
    if (c.req.raw.signal.aborted) line.clientClosed = true;
    logger.info(line, 'request');
  });

  app.onError((err, c) => {
    const error = toServeError(err);
    // A client that went away aborts its upstream request; nobody reads this answer, and it is no bug.
    const clientClosed = c.req.raw.signal.aborted;
    if (!clientClosed && !(err instanceof ServeError)) logger.error({ reqId: c.var.requestId, err }, 'unhandled error');
    c.set('errorCode', clientClosed ? 'CLIENT_CLOSED' : error.code);
    if (error.retryAfterS !== undefined) c.header('retry-after', String(error.retryAfterS));
    return c.json(error.toBody(), error.status as 400);
  });

  app.notFound(() => {
    throw new ServeError('RESOURCE_NOT_FOUND');
  });

  app.post(
    '/',
    bodyLimit({
      maxSize: config.maxBodyBytes,
      onError: () => {
        throw new ServeError('PAYLOAD_TOO_LARGE', `Request body is larger than ${config.maxBodyBytes} bytes.`);
      },
    }),
    async (c) => {
      const contentType = c.req.header('content-type');
      if (!acceptsContentType(contentType)) {
        throw new ServeError(
          'UNSUPPORTED_MEDIA_TYPE',
          `Content-Type ${contentType!.split(';')[0]!.trim()} is not accepted; send the JSON body as application/json.`,
        );
      }
      const input = parseTranslateRequest(await readJson(c), config.languages);
      c.set('tgtLang', input.tgt_lang);
      c.set('texts', Array.isArray(input.src_text) ? input.src_text.length : 1);
      if (config.logBodies) c.set('srcText', input.src_text);
      const reply = await upstream.translate({
        tgtLang: input.tgt_lang,
        body: { src_lang: input.src_lang, src_text: input.src_text },
        requestId: c.var.requestId,
        signal: c.req.raw.signal,
      });
      return new Response(reply.body, {
        status: 200,
        headers: { 'content-type': 'application/json', ...reply.headers },
      });
    },
  );

  app.get('/health', async (c) => {
    const upstreamHealthy = await upstream.ping(healthTimeoutMs);
    return c.json(
      { status: upstreamHealthy ? 'Healthy' : 'Unhealthy', modelServer: upstreamHealthy ? 'Healthy' : 'Unreachable' },
      upstreamHealthy ? 200 : 503,
    );
  });

  for (const path of ['/', '/health']) {
    app.all(path, () => {
      throw new ServeError('METHOD_NOT_ALLOWED');
    });
  }

  return app;
}

/** Decodes the body strictly: invalid UTF-8 is the client's error, not text to translate with U+FFFD in it. */
const UTF8 = new TextDecoder('utf-8', { fatal: true });

async function readJson(c: Context<Env>): Promise<unknown> {
  let text: string;
  try {
    text = UTF8.decode(await c.req.arrayBuffer());
  } catch {
    throw new ServeError('BAD_REQUEST', 'Request body is not valid UTF-8.');
  }
  if (text.trim() === '') {
    throw new ServeError(
      'INVALID_JSON',
      'Request body is empty; expected a JSON object {"src_lang", "src_text", "tgt_lang"}.',
    );
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new ServeError('INVALID_JSON', `Request body is not valid JSON: ${(err as Error).message}`);
  }
}
