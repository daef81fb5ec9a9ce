/**
 * @module router/test/fake-model-server — a real HTTP server on port 0 that answers like the model server's
 * inference API, for router tests: `POST /predictions/{lang}` translates by reversing each text (so order
 * and routing are visible), and texts starting with a directive make it misbehave on purpose.
 *
 * Directives (the first text of the request): `!status <code> [retry-after]` answers that TorchServe error,
 * `!slow <ms>` answers after a delay, `!reset` destroys the socket, `!garbage` answers a non-JSON 500.
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

export async function startFakeModelServer(): Promise<FakeModelServer> {
  const seen: SeenRequest[] = [];
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
      const [directive, a, b] = texts[0]!.split(' ');
      const answer = () => {
        const translated = texts.map((t) => `${match[1]}:${[...t].reverse().join('')}`);
        res
          .writeHead(200, {
            'content-type': 'application/json',
            'x-model-name': match[1]!,
            'x-worker-id': 'w-0',
            'x-device': 'cpu',
            'x-device-fallback': 'no CUDA provider',
            'x-internal-only': 'must not pass',
          })
          .end(JSON.stringify({ translated: Array.isArray(body.src_text) ? translated : translated[0] }));
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
        case '!reset':
          req.socket.destroy();
          return;
        case '!garbage':
          res.writeHead(500, { 'content-type': 'text/html' }).end('<h1>oops</h1>');
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
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
