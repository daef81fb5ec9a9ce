/**
 * @module front/builtin-proxy — the front when nginx is not installed: an http-proxy server that behaves as
 * `nginx/nginx.conf` does. Same routes (everything to the router, nothing else), same body limit (413), same
 * JSON error bodies (front/error-pages.ts), same request-id rule (common/request-id.ts), keep-alive to the router.
 *
 * The body is read whole before it is forwarded (it is at most ROUTER_MAX_BODY_BYTES): the limit is enforced
 * here, exactly, and a request whose connection to the router fails before any answer can be sent once more.
 * When is that right? A translation has no side effects, so sending it twice costs work, never a wrong answer
 * (nginx: `proxy_next_upstream error non_idempotent`). The failures that are resent:
 * - connection refused: it never left;
 * - a reset on a reused keep-alive connection: the router instance behind it closed the connection as it was
 *   reused (an idle timeout, or the instance was killed) — Node's documented case for a retry;
 * - a reset on a new connection: the cluster master handed it to an instance that was dying;
 * - a killed instance's in-flight requests look the same from here, and are sent again too: the dead instance's
 *   own request to the model server was closed with it, so the model server drops that copy.
 * The resend goes on a new connection, never another pooled one: a router instance that died leaves several
 * pooled connections dead at once, and a resend on one of those would fail again. It is sent once only, so a
 * request that itself kills router instances kills at most two.
 *
 * A client that goes away before its answer is complete cancels its request at the router: the connection to
 * the router is destroyed, which the router sees as its client's disconnect.
 */
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import httpProxy from 'http-proxy';
import type { ServeError } from '../common/errors.js';
import type { Logger } from '../common/logger.js';
import { requestIdFrom } from '../common/request-id.js';
import { ERROR_CODE_HEADER } from '../common/errors.js';
import { errorBodyText, frontErrors } from './error-pages.js';

export interface BuiltinProxyConfig {
  /** The router's base URL, e.g. `http://127.0.0.1:8888`. */
  routerUrl: string;
  maxBodyBytes: number;
  /** Longest wait for the router's reply, in ms (nginx: proxy_read_timeout, the seed's 86400 s). */
  timeoutMs: number;
}

export interface BuiltinProxy {
  /** Not listening yet; `main.ts` listens. */
  server: http.Server;
  /** Drops the idle keep-alive connections to the router (after the server has closed). */
  close(): void;
}

/** Connection failures before any answer, after which the request is sent once more (see above). */
const RESEND = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE']);
/** Idle keep-alive sockets to the router close after 60 s from our side, before the router's 75 s. */
const AGENT_IDLE_MS = 60_000;
/** Client-side keep-alive, as nginx's keepalive_timeout. */
const CLIENT_KEEP_ALIVE_MS = 75_000;
/** After a refusal, how long the rest of a body may take between two reads, and in all (nginx's lingering_*). */
const LINGER_IDLE_MS = 5_000;
const LINGER_MAX_MS = 30_000;
/**
 * X-Forwarded-* as nginx sends them: the client's X-Forwarded-For is kept and the client's address appended
 * (`$proxy_add_x_forwarded_for`); the others are the front's alone (nginx sets `$scheme`, `$http_host`), so a client's
 * own X-Forwarded-Host, -Proto or -Port never reaches the router. http-proxy (`xfwd`) fills those it finds unset.
 */
const forwardedOf = (req: IncomingMessage): Attempt['forwarded'] => ({
  'x-forwarded-for': req.headers['x-forwarded-for'],
  'x-forwarded-port': undefined,
  'x-forwarded-proto': undefined,
  'x-forwarded-host': undefined,
});

interface Attempt {
  body: Buffer;
  tries: number;
  timedOut: boolean;
  /** The client closed its connection before its answer was complete: nothing more is sent for it. */
  clientGone: boolean;
  /** The X-Forwarded-* headers each try starts from (`forwardedOf`): http-proxy appends to them in place. */
  forwarded: Record<string, string | string[] | undefined>;
}

export function createBuiltinProxy(config: BuiltinProxyConfig, deps: { logger: Logger }): BuiltinProxy {
  const errors = frontErrors(config.maxBodyBytes);
  const agent = new http.Agent({ keepAlive: true, maxFreeSockets: 64, timeout: AGENT_IDLE_MS, scheduling: 'lifo' });
  // No keep-alive: a resend always gets a connection of its own.
  const freshAgent = new http.Agent({ keepAlive: false });
  const proxy = httpProxy.createProxyServer({ target: config.routerUrl, agent, xfwd: true });
  const attempts = new WeakMap<IncomingMessage, Attempt>();

  // http-proxy emits this once the request has its socket.
  proxy.on('proxyReq', (proxyReq, req, res) => {
    const attempt = attempts.get(req)!;
    proxyReq.setTimeout(config.timeoutMs, () => {
      attempt.timedOut = true;
      proxyReq.destroy();
    });
    // http-proxy aborts on the request's 'aborted', which a request whose body was read whole never emits.
    res.once('close', () => {
      if (res.writableFinished) return;
      attempt.clientGone = true;
      proxyReq.destroy();
    });
  });

  proxy.on('proxyRes', (_proxyRes, _req, res) => {
    (res as ServerResponse).setHeader('x-front', 'builtin');
  });

  const forward = (req: IncomingMessage, res: ServerResponse, attempt: Attempt) => {
    attempt.tries += 1;
    Object.assign(req.headers, attempt.forwarded);
    const options = { buffer: Readable.from([attempt.body]), ...(attempt.tries > 1 ? { agent: freshAgent } : {}) };
    proxy.web(req, res, options, (err: NodeJS.ErrnoException) => {
      if (attempt.clientGone) return;
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (attempt.timedOut) return sendError(res, errors[504]);
      if (attempt.tries === 1 && RESEND.has(err.code ?? '')) {
        forward(req, res, attempt);
        return;
      }
      deps.logger.warn({ err: err.message, code: err.code, reqId: req.headers['x-request-id'] }, 'router unavailable');
      sendError(res, errors[502]);
    });
  };

  const server = http.createServer((req, res) => {
    const incoming = req.headers['x-request-id'];
    const requestId = requestIdFrom(typeof incoming === 'string' ? incoming : undefined);
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
      const attempt: Attempt = {
        body: Buffer.concat(chunks),
        tries: 0,
        timedOut: false,
        clientGone: false,
        forwarded: forwardedOf(req),
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
      freshAgent.destroy();
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
    [ERROR_CODE_HEADER]: error.code,
  });
  res.end(body);
}

/**
 * Answer now, then close as nginx does (its lingering close): a client still sending a body that will never be
 * accepted must be able to finish and read this answer. Closing at once, with its bytes still arriving, makes the
 * kernel answer them with a reset, and a client busy writing sees the reset (EPIPE, ECONNRESET) instead of the
 * 413. So the rest of the body is read and dropped, and the connection closed once it has all arrived (nothing
 * unread: a plain FIN), or when `LINGER_IDLE_MS` pass without a byte, or after `LINGER_MAX_MS` in all (nginx:
 * lingering_timeout 5 s, lingering_time 30 s).
 */
function refuse(req: IncomingMessage, res: ServerResponse, error: ServeError): void {
  if (res.headersSent) return;
  const socket = req.socket;
  const done = () => {
    clearTimeout(idle);
    clearTimeout(cap);
    socket.destroy();
  };
  const idle = setTimeout(done, LINGER_IDLE_MS);
  const cap = setTimeout(done, LINGER_MAX_MS);
  idle.unref();
  cap.unref();
  req.removeAllListeners('data');
  req.on('data', () => idle.refresh());
  req.resume();
  // Node ends a `Connection: close` answer with socket.destroySoon(), which half-closes the socket and so stops
  // its reading: the body would stay unread. The socket stays open instead until the body is in.
  const destroySoon = socket.destroySoon.bind(socket);
  socket.destroySoon = () => {
    if (req.complete) {
      clearTimeout(idle);
      clearTimeout(cap);
      return destroySoon();
    }
    req.once('end', done);
    socket.once('close', done);
  };
  res.setHeader('connection', 'close');
  sendError(res, error);
}

function rawResponse(error: ServeError): string {
  const body = errorBodyText(error);
  return (
    `HTTP/1.1 ${error.status} ${http.STATUS_CODES[error.status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `x-front: builtin\r\n${ERROR_CODE_HEADER}: ${error.code}\r\nConnection: close\r\n\r\n${body}`
  );
}
