/**
 * @module front/builtin-proxy — the front when nginx is not installed: an http-proxy server that behaves as
 * `nginx/nginx.conf` does. Same routes (everything to the router, nothing else), same body limit (413), same
 * JSON error bodies (front/error-pages.ts), same request-id rule, keep-alive to the router.
 *
 * The body is read whole before it is forwarded (it is at most ROUTER_MAX_BODY_BYTES): the limit is enforced
 * here, exactly, and a request that meets a reset on a reused keep-alive connection (the router instance
 * behind it was closing it) can be sent once more — a translation has no side effects, like nginx's
 * `proxy_next_upstream error non_idempotent`.
 */
import { randomUUID } from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import httpProxy from 'http-proxy';
import type { ServeError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { errorBodyText, frontErrors } from './error-pages.js';

export interface BuiltinProxyConfig {
  /** The router's base URL, e.g. `http://127.0.0.1:8888`. */
  routerUrl: string;
  maxBodyBytes: number;
  /** Longest wait for the router's reply, in ms (nginx: proxy_read_timeout, the seed's 86400 s). */
  timeoutMs: number;
}

export interface BuiltinProxyDeps {
  logger: Logger;
}

export interface BuiltinProxy {
  /** Not listening yet; `main.ts` listens. */
  server: http.Server;
  /** Drops the idle keep-alive connections to the router (after the server has closed). */
  close(): void;
}

/** Same rule as the router and nginx's map. */
const REQUEST_ID = /^[\w.:@/+=-]{1,128}$/;
/** Errors that mean the router closed a connection as we reused it; the request may be sent again. */
const RETRYABLE = new Set(['ECONNRESET', 'EPIPE']);
/** Idle keep-alive sockets to the router close after 60 s from our side, before the router's 75 s. */
const AGENT_IDLE_MS = 60_000;
/** Client-side keep-alive, as nginx's keepalive_timeout. */
const CLIENT_KEEP_ALIVE_MS = 75_000;

interface Attempt {
  body: Buffer;
  tries: number;
  timedOut: boolean;
  reusedSocket: boolean;
  /** The client's own X-Forwarded-* headers: http-proxy appends to them in place, a resend starts over. */
  forwarded: Record<string, string | string[] | undefined>;
}

export function createBuiltinProxy(config: BuiltinProxyConfig, deps: BuiltinProxyDeps): BuiltinProxy {
  const errors = frontErrors(config.maxBodyBytes);
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 64, timeout: AGENT_IDLE_MS, scheduling: 'lifo' });
  const proxy = httpProxy.createProxyServer({ target: config.routerUrl, agent, xfwd: true });
  const attempts = new WeakMap<IncomingMessage, Attempt>();

  // http-proxy emits this once the request has its socket.
  proxy.on('proxyReq', (proxyReq, req) => {
    const attempt = attempts.get(req)!;
    attempt.reusedSocket = proxyReq.reusedSocket;
    proxyReq.setTimeout(config.timeoutMs, () => {
      attempt.timedOut = true;
      proxyReq.destroy();
    });
  });

  proxy.on('proxyRes', (_proxyRes, _req, res) => {
    (res as ServerResponse).setHeader('x-front', 'builtin');
  });

  const forward = (req: IncomingMessage, res: ServerResponse, attempt: Attempt) => {
    attempt.tries += 1;
    Object.assign(req.headers, attempt.forwarded);
    attempt.reusedSocket = false;
    proxy.web(req, res, { buffer: Readable.from([attempt.body]) }, (err: NodeJS.ErrnoException) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (attempt.timedOut) return sendError(res, errors[504]);
      if (attempt.tries === 1 && attempt.reusedSocket && RETRYABLE.has(err.code ?? '')) {
        forward(req, res, attempt);
        return;
      }
      deps.logger.warn({ err: err.message, code: err.code, reqId: req.headers['x-request-id'] }, 'router unavailable');
      sendError(res, errors[502]);
    });
  };

  const server = http.createServer((req, res) => {
    const incoming = req.headers['x-request-id'];
    const requestId = typeof incoming === 'string' && REQUEST_ID.test(incoming) ? incoming : randomUUID();
    req.headers['x-request-id'] = requestId;
    res.setHeader('x-request-id', requestId);
    const declared = Number(req.headers['content-length'] ?? 0);
    if (declared > config.maxBodyBytes) return refuse(req, res, errors[413]);
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > config.maxBodyBytes) return refuse(req, res, errors[413]);
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (res.headersSent || res.writableEnded) return;
      const forwarded = Object.fromEntries(
        ['x-forwarded-for', 'x-forwarded-port', 'x-forwarded-proto', 'x-forwarded-host'].map((h) => [
          h,
          req.headers[h],
        ]),
      );
      const attempt: Attempt = {
        body: Buffer.concat(chunks),
        tries: 0,
        timedOut: false,
        reusedSocket: false,
        forwarded,
      };
      attempts.set(req, attempt);
      // The body goes whole, with its exact length; the client's Expect: 100-continue was answered here.
      delete req.headers['transfer-encoding'];
      delete req.headers.expect;
      req.headers['content-length'] = String(attempt.body.length);
      forward(req, res, attempt);
    });
  });
  server.keepAliveTimeout = CLIENT_KEEP_ALIVE_MS;
  server.headersTimeout = CLIENT_KEEP_ALIVE_MS + 1_000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end(rawResponse(errors[400]));
    else socket.destroy();
  });

  return {
    server,
    close: () => {
      agent.destroy();
      proxy.close();
    },
  };
}

function sendError(res: ServerResponse, error: ServeError): void {
  const body = errorBodyText(error);
  res.writeHead(error.status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(body),
    'x-front': 'builtin',
  });
  res.end(body);
}

/** Answer now without reading the rest of the body, and close: the unread bytes cannot be skipped cheaply. */
function refuse(req: IncomingMessage, res: ServerResponse, error: ServeError): void {
  if (res.headersSent) return;
  req.pause();
  res.setHeader('connection', 'close');
  sendError(res, error);
}

function rawResponse(error: ServeError): string {
  const body = errorBodyText(error);
  return (
    `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `x-front: builtin\r\nConnection: close\r\n\r\n${body}`
  );
}
