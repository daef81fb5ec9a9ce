/**
 * @module router/test/fake-model-server — a real HTTP server on port 0 that answers like the model server's
 * inference API, for router tests: `POST /predictions/{lang}` translates by reversing each text (so order
 * and routing are visible), and texts starting with a directive make it misbehave on purpose.
 *
 * Directives (the first text of the request): `!status <code> [retry-after]` answers that TorchServe error,
 * `!slow <ms>` answers after a delay, `!reset` destroys the socket, `!garbage` answers a non-JSON 500.
 * Hostile ones: `!huge <bytes>` a 200 of that many bytes (not JSON), `!huge-declared <bytes>` a Content-Length of
 * that many and nothing sent, `!drip <ms>` a JSON 200 sent one byte every `ms`, `!redirect` a 302, `!html` a 200
 * text/html page, `!badjson` a 200 application/json that does not parse. `!lang <code>` translates and, for
 * `src_lang: "auto"`, answers every text detected as `<code>`. `bodies` records how each hostile
 * answer ended: 'finished' (all sent) or 'closed' (the router closed the connection first).
 *
 * Options, as the model server's limits and load would answer: `maxChars` refuses a request of more characters
 * with 413 (MAX_REQUEST_CHARS), `refuseFirst` refuses that many first requests with 503 + Retry-After: 1.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ERRORS, type ErrorCode } from '../../common/errors.js';

export interface SeenRequest {
  path: string;
  headers: IncomingMessage['headers'];
  body: unknown;
}

export interface FakeModelServer {
  url: string;
  port: number;
  seen: SeenRequest[];
  bodies: ('finished' | 'closed')[];
  close(): Promise<void>;
}

/** Status → the catalogue code the fake names in `x-error-code`, as the model server does. */
const CODES: Record<number, ErrorCode> = {
  400: 'BAD_REQUEST',
  404: 'MODEL_NOT_FOUND',
  500: 'INTERNAL',
  503: 'QUEUE_FULL',
  504: 'REQUEST_TIMEOUT',
};

export interface FakeModelServerOptions {
  maxChars?: number;
  refuseFirst?: number;
}

export async function startFakeModelServer(options: FakeModelServerOptions = {}): Promise<FakeModelServer> {
  let refusals = options.refuseFirst ?? 0;
  const seen: SeenRequest[] = [];
  const bodies: FakeModelServer['bodies'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method === 'GET' && req.url === '/ping') {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"Healthy"}');
        return;
      }
      const match = /^\/predictions\/([^/]+)$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !match) {
        res.writeHead(404).end();
        return;
      }
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        src_lang: string;
        src_text: string | string[];
      };
      seen.push({ path: req.url!, headers: req.headers, body });
      const texts = Array.isArray(body.src_text) ? body.src_text : [body.src_text];
      const refuse = (status: 413 | 503, code: ErrorCode, headers: Record<string, string> = {}) =>
        res
          .writeHead(status, { 'content-type': 'application/json', 'x-error-code': code, ...headers })
          .end(JSON.stringify({ code: status, type: ERRORS[code].type, message: `fake ${status}` }));
      if (refusals > 0) {
        refusals -= 1;
        return refuse(503, 'QUEUE_FULL', { 'retry-after': '1' });
      }
      if (options.maxChars !== undefined && texts.reduce((n, t) => n + t.length, 0) > options.maxChars)
        return refuse(413, 'PAYLOAD_TOO_LARGE');
      const [directive, a, b] = texts[0]!.split(' ');
      const answer = (detected?: string) => {
        const translated = texts.map((t) => `${match[1]}:${[...t].reverse().join('')}`);
        const detection =
          detected === undefined || body.src_lang !== 'auto'
            ? {}
            : { detected_src_lang: Array.isArray(body.src_text) ? texts.map(() => detected) : detected };
        res
          .writeHead(200, {
            'content-type': 'application/json',
            'x-model-name': match[1]!,
            'x-worker-id': 'w-0',
            'x-device': 'cpu',
            'x-device-fallback': 'no CUDA provider',
            'x-internal-only': 'must not pass',
          })
          .end(JSON.stringify({ translated: Array.isArray(body.src_text) ? translated : translated[0], ...detection }));
      };
      switch (directive) {
        case '!status': {
          const code = Number(a);
          const errorCode = CODES[code] ?? 'INTERNAL';
          const headers: Record<string, string> = { 'content-type': 'application/json', 'x-error-code': errorCode };
          if (b) headers['retry-after'] = b;
          res
            .writeHead(code, headers)
            .end(JSON.stringify({ code, type: ERRORS[errorCode].type, message: `fake ${code}` }));
          return;
        }
        case '!slow':
          setTimeout(answer, Number(a));
          return;
        case '!lang':
          answer(a);
          return;
        case '!reset':
          req.socket.destroy();
          return;
        case '!garbage':
          res.writeHead(500, { 'content-type': 'text/html' }).end('<h1>oops</h1>');
          return;
        case '!huge': {
          // Written chunk by chunk as the socket drains, so a reader that stops reading stops it.
          let left = Number(a);
          res.on('close', () => bodies.push(res.writableFinished ? 'finished' : 'closed'));
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          const chunk = Buffer.alloc(64 * 1024, 'x');
          const pump = () => {
            while (left > 0) {
              const part = chunk.subarray(0, Math.min(chunk.length, left));
              left -= part.length;
              if (!res.write(part)) return void res.once('drain', pump);
            }
            res.end();
          };
          pump();
          return;
        }
        case '!huge-declared':
          res.on('close', () => bodies.push(res.writableFinished ? 'finished' : 'closed'));
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': a }).flushHeaders();
          return;
        case '!drip': {
          const text = JSON.stringify({ translated: 'slow but steady' });
          let at = 0;
          res.on('close', () => bodies.push(res.writableFinished ? 'finished' : 'closed'));
          res.writeHead(200, { 'content-type': 'application/json', 'content-length': String(text.length) });
          const timer = setInterval(() => {
            if (res.destroyed) return clearInterval(timer);
            res.write(text[at++]!);
            if (at === text.length) {
              clearInterval(timer);
              res.end();
            }
          }, Number(a));
          return;
        }
        case '!redirect':
          res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end();
          return;
        case '!html':
          res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>hello</h1>');
          return;
        case '!badjson':
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"translated": ');
          return;
        default:
          answer();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    bodies,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
