/**
 * @module router/app — the router's HTTP surface (the seed's Flask "classifier"): validate a translation
 * request, route it on `tgt_lang` to the model server, answer its JSON. Built by `createRouterApp`, which
 * never listens (`main.ts` does); `onError` is the only place an error becomes HTTP.
 *
 * Routes: `POST /` translate · `GET /health` router + model server liveness · `GET /status` the status page and
 * `GET /status.json` its figures (router/status.ts), when a status source is given · `/documents` files
 * (router/native-documents.ts) · DeepL's `/v2/…` and LibreTranslate's `/translate`, `/languages`, `/detect`,
 * `/frontend/settings` (router/apis/, with API keys from router/keys/). With keys on, `POST /` and `/documents` need
 * a key too (`Authorization: Bearer <key>`), counted against it, unless `nativeApiOpen`; the keys' use by key id
 * (`GET /metrics`, `apiKeys` in `/status.json`) is answered to an admin key only. Anything else: TorchServe's 404/405
 * JSON.
 */
import { Hono, type Context } from 'hono';
import type { SetupConfig } from '../common/config/setup-config.js';
import { errorHeaders, ServeError, toServeError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { requestIdFrom } from '../common/request-id.js';
import { decodeUtf8, parseJsonBody } from '../common/strict-utf8.js';
import { createRequestParser } from '../common/translation-contract.js';
import { acceptsContentType } from './translate-request.js';
import { createLanguageRoutes } from './language-routes.js';
import { mountDeepL } from './apis/deepl.js';
import { mountLibreTranslate } from './apis/libretranslate.js';
import { mountNativeDocuments } from './native-documents.js';
import type { ApiAccess } from './keys/api-access.js';
import { keyMetricsText, statusWithKeys } from './keys/key-metrics.js';
import { admitKey, billedOnSuccess, isAdmin, requireKey } from './keys/request-key.js';
import { characterCount } from './apis/translate-texts.js';
import type { RouterEnv } from './router-env.js';
import { STATUS_PAGE_HTML } from './status-page.js';
import type { StatusReader } from './status.js';
import { transportCode } from './upstream/errors.js';
import type { UpstreamClient } from './upstream/upstream.js';
import { type GlossaryClient, nativeGlossary } from './glossaries.js';
import type { DocumentJobs } from './apis/documents.js';

export interface RouterAppConfig {
  /** Largest accepted request body in bytes (→ 413). */
  maxBodyBytes: number;
  /** Languages served by the default model (setup_config.json's `cuda_id`). */
  languages: readonly string[];
  /**
   * setup_config.json, when it gives pairs models of their own: every API takes their languages too, and sends each
   * request to its pair's store entry when there is one (./language-routes.ts). Absent: every request goes to its
   * target's entry.
   */
  routes?: SetupConfig;
  /** Put request texts in the log line (off by default: texts can be personal data). */
  logBodies: boolean;
  /** How long `/health` waits for the model server's `/ping`, in ms. Default 1000. */
  healthTimeoutMs?: number;
  /** The model server's MAX_REQUEST_CHARS, which LibreTranslate's clients are told as their character limit. */
  maxRequestChars?: number;
  /** NATIVE_API_OPEN: with keys on, `POST /` takes requests without a key, uncounted. Default false. */
  nativeApiOpen?: boolean;
  /**
   * PUBLIC_URL: the base URL clients reach the public port at, for the download URLs handed out. Default: the
   * request's own origin (in-process tests); `main.ts` always gives it.
   */
  publicUrl?: string;
}

export interface RouterAppDeps {
  upstream: UpstreamClient;
  logger: Logger;
  /** The model server's status document, for `/status.json`; absent: no status routes. */
  status?: StatusReader;
  /** API keys of the DeepL and LibreTranslate APIs (router/keys/); absent: keys off. */
  access?: ApiAccess;
  /** The model servers' glossaries (router/glossaries.ts); absent: `glossary_id` goes to the model server as is. */
  glossaries?: GlossaryClient;
  /** Document translation of the DeepL and LibreTranslate APIs (router/apis/documents.ts); absent: unavailable. */
  documents?: DocumentJobs;
}

type Env = RouterEnv;

export function createRouterApp(config: RouterAppConfig, deps: RouterAppDeps): Hono<Env> {
  const { upstream, logger } = deps;
  const healthTimeoutMs = config.healthTimeoutMs ?? 1_000;
  const app = new Hono<Env>();

  const routes = createLanguageRoutes(config.languages, config.routes);
  const parseTranslateRequest = createRequestParser(routes.targets);
  const tooLarge = () =>
    new ServeError('PAYLOAD_TOO_LARGE', `Request body is larger than ${config.maxBodyBytes} bytes.`);

  // Request id and the one log line per request. Registered first, so it wraps everything else. Every response
  // is built with its x-request-id already in it: touching `c.res.headers` here would turn @hono/node-server's
  // cached response into a full web Response on every request.
  app.use('*', async (c, next) => {
    const startedAt = performance.now();
    const requestId = requestIdFrom(requestHeader(c, 'x-request-id'));
    c.set('requestId', requestId);
    await next();
    // c.get, not c.var: hono builds a fresh object from every variable on each c.var access. A field that is
    // undefined is left out of the line (pino writes none).
    const upstreamHeaders = c.get('upstreamHeaders') ?? {};
    const line = {
      reqId: requestId,
      method: c.req.method,
      path: loggedPath(c.req.path),
      status: c.res.status,
      ms: Math.round((performance.now() - startedAt) * 10) / 10,
      tgt_lang: c.get('tgtLang'),
      texts: c.get('texts'),
      error: c.get('errorCode'),
      cause: c.get('errorCause'),
      key: c.get('keyId'),
      model: upstreamHeaders['x-model-name'],
      modelServer: upstreamHeaders['x-model-server'],
      worker: upstreamHeaders['x-worker-id'],
      device: upstreamHeaders['x-device'],
      src_text: config.logBodies ? c.get('srcText') : undefined,
      clientClosed: c.req.raw.signal.aborted || undefined,
    };
    logger.info(line, 'request');
  });

  app.onError((err, c) => {
    const error = toServeError(err);
    // A client that went away aborts its upstream request; nobody reads this answer, and it is no bug.
    const clientClosed = c.req.raw.signal.aborted;
    if (!clientClosed && !(err instanceof ServeError))
      logger.error({ reqId: c.get('requestId'), err }, 'unhandled error');
    c.set('errorCode', clientClosed ? 'CLIENT_CLOSED' : error.code);
    c.set('errorCause', transportCode(error));
    c.header('x-request-id', c.get('requestId'));
    return c.json(error.toBody(), error.status as 400, errorHeaders(error));
  });

  app.notFound(() => {
    throw new ServeError('RESOURCE_NOT_FOUND');
  });

  const nativeKeys = config.nativeApiOpen === true ? undefined : deps.access;
  app.post('/', async (c) => {
    // The size first, as nginx and the front do: an oversized body is a 413 whatever its content type.
    const bytes = await readBody(c, config.maxBodyBytes, tooLarge);
    const key = nativeKeys === undefined ? undefined : requireKey(nativeKeys, requestHeader(c, 'authorization'));
    if (key !== undefined) c.set('keyId', key.id);
    const contentType = requestHeader(c, 'content-type');
    if (!acceptsContentType(contentType)) {
      throw new ServeError(
        'UNSUPPORTED_MEDIA_TYPE',
        `Content-Type ${contentType!.split(';')[0]!.trim()} is not accepted; send the JSON body as application/json.`,
      );
    }
    const input = parseTranslateRequest(parseJson(bytes));
    c.set('tgtLang', input.tgt_lang);
    c.set('texts', Array.isArray(input.src_text) ? input.src_text.length : 1);
    if (config.logBodies) c.set('srcText', input.src_text);
    const requestId = c.get('requestId');
    const { tgt_lang: tgtLang, ...body } = input;
    if (body.glossary_id !== undefined && deps.glossaries !== undefined) {
      // Sent inline, so that whichever model server serves the language applies it (router/glossaries.ts).
      body.glossary = await nativeGlossary(deps.glossaries, body.glossary_id, key?.id, body.src_lang, tgtLang);
      delete body.glossary_id;
    }
    const entry = routes.entryFor(body.src_lang, tgtLang, body.src_text);
    if (entry === undefined) throw routes.unserved(body.src_lang, tgtLang);
    const translate = () =>
      upstream.translate({
        tgtLang: entry,
        body,
        requestId,
        cacheControl: requestHeader(c, 'cache-control'),
        signal: c.req.raw.signal,
      });
    const charged = key &&
      nativeKeys && {
        access: nativeKeys,
        key,
        charge: await admitKey(nativeKeys, key, characterCount([body.src_text].flat())),
      };
    const reply = await billedOnSuccess(charged, translate, logger);
    c.set('upstreamHeaders', reply.headers);
    // A byte body and a plain header object: @hono/node-server writes this straight to the socket.
    return new Response(reply.body, {
      status: 200,
      headers: { 'content-type': 'application/json', 'x-request-id': requestId, ...reply.headers },
    });
  });

  // DeepL's and LibreTranslate's APIs (router/apis/), through the same translation path as `POST /`.
  const apiContext = {
    languages: config.languages,
    routes,
    upstream,
    readBody: (c: Context<Env>) => readBody(c, config.maxBodyBytes, tooLarge),
    access: deps.access,
    logger,
    maxRequestChars: config.maxRequestChars,
    publicUrl: config.publicUrl,
    glossaries: deps.glossaries,
    documents: deps.documents,
  };
  mountDeepL(app, apiContext);
  mountLibreTranslate(app, apiContext);
  mountNativeDocuments(app, { api: apiContext, routes, keys: nativeKeys, glossaries: deps.glossaries });

  app.get('/health', async (c) => {
    c.header('x-request-id', c.get('requestId'));
    const upstreamHealthy = await upstream.ping(healthTimeoutMs);
    return c.json(
      { status: upstreamHealthy ? 'Healthy' : 'Unhealthy', modelServer: upstreamHealthy ? 'Healthy' : 'Unreachable' },
      upstreamHealthy ? 200 : 503,
    );
  });

  const { status, access } = deps;
  if (access !== undefined) {
    app.get('/metrics', async (c) => {
      if (!isAdmin(access, requestHeader(c, 'authorization')))
        throw new ServeError(
          'UNAUTHORIZED',
          "The API keys' use is shown to an admin key: Authorization: Bearer <key>.",
        );
      const text = keyMetricsText(await access.report());
      return c.text(text, 200, { 'content-type': 'text/plain; version=0.0.4', 'x-request-id': c.get('requestId') });
    });
  }
  if (status !== undefined) {
    app.get('/status', (c) =>
      c.html(STATUS_PAGE_HTML, 200, { 'x-request-id': c.get('requestId'), 'cache-control': 'no-cache' }),
    );
    app.get('/status.json', async (c) => {
      const document = await status.read();
      // Every key's id and use, to an admin key only: the page is public.
      const admin = access !== undefined && isAdmin(access, requestHeader(c, 'authorization'));
      const body = admin ? statusWithKeys(document, await access.report()) : document;
      return new Response(body, {
        status: 200,
        headers: {
          'content-type': 'application/json',
          'cache-control': 'no-store',
          'x-request-id': c.get('requestId'),
        },
      });
    });
  }

  for (const path of ['/', '/health', ...(status === undefined ? [] : ['/status', '/status.json'])]) {
    app.all(path, () => {
      throw new ServeError('METHOD_NOT_ALLOWED');
    });
  }

  return app;
}

/**
 * A request header (lower-case name). Node's own parsed headers when @hono/node-server serves the request: asking
 * `c.req` builds a web `Headers` copy of every header first, which costs the router more than its routing does.
 */
function requestHeader(c: Context<Env>, name: string): string | undefined {
  const incoming = c.env?.incoming;
  if (incoming === undefined) return c.req.header(name);
  const value = incoming.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/**
 * The body, at most `maxBytes` of it. A declared Content-Length is checked before anything is read (the usual
 * case: nginx and the built-in front always send one), and the body is then read whole in one go (through
 * @hono/node-server's direct path, not a web stream); a chunked body is counted as it streams and refused as soon
 * as it passes the limit.
 */
async function readBody(c: Context<Env>, maxBytes: number, tooLarge: () => ServeError): Promise<Uint8Array> {
  const declared = requestHeader(c, 'content-length');
  if (declared !== undefined && requestHeader(c, 'transfer-encoding') === undefined) {
    if (Number(declared) > maxBytes) throw tooLarge();
    return new Uint8Array(await c.req.arrayBuffer());
  }
  return readCapped(c.req.raw.body, maxBytes, tooLarge);
}

/** A request's path as logged: a download URL's key (LibreTranslate's, its only credential) left out. */
function loggedPath(path: string): string {
  return path.replace(/^(\/download_file\/[^/.]+\.)[^/.]+/, '$1redacted');
}

/** Strict UTF-8, then JSON; each failure is the client's 400 with what went wrong. */
function parseJson(bytes: Uint8Array): unknown {
  const text = decodeUtf8(bytes);
  if (text.trim() === '') {
    throw new ServeError(
      'INVALID_JSON',
      'Request body is empty; expected a JSON object {"src_lang", "src_text", "tgt_lang"}.',
    );
  }
  return parseJsonBody(text);
}

async function readCapped(
  body: ReadableStream<Uint8Array> | null,
  maxBytes: number,
  tooLarge: () => ServeError,
): Promise<Uint8Array> {
  if (body === null) return new Uint8Array(0);
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > maxBytes) {
      void reader.cancel();
      throw tooLarge();
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, size);
}
