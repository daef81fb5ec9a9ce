/**
 * @module front/test/fake-router — a real HTTP server on port 0 standing in for the router behind a front:
 * it answers every request with what it received (method, path, headers, body, which connection), so tests
 * see exactly what the front forwarded. Paths steer it: `/slow/{ms}` answers late, `/reset-reused` resets the
 * connection once when a request arrives on a reused keep-alive connection, `/reset-every-reused` resets every
 * request that arrives on a reused connection (a router instance that died with all its pooled connections),
 * `/hold` never answers and records the request id in `abandoned` when its connection closes.
 */
import { createServer, request, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { until } from '../../harness/polling.js';

export interface Received {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The front's source port: the same value means the same keep-alive connection. */
  connection: number;
}

export interface FakeRouter {
  port: number;
  received: Received[];
  /** x-request-id of `/hold` requests whose connection closed before an answer. */
  abandoned: string[];
  close(): Promise<void>;
}

export async function startFakeRouter(port = 0): Promise<FakeRouter> {
  const received: Received[] = [];
  const abandoned: string[] = [];
  const requestsOnSocket = new WeakMap<Socket, number>();
  let resetDone = false;
  const server: Server = createServer((req, res) => {
    const count = (requestsOnSocket.get(req.socket) ?? 0) + 1;
    requestsOnSocket.set(req.socket, count);
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = req.url ?? '';
      if (path === '/reset-reused' && count > 1 && !resetDone) {
        resetDone = true;
        req.socket.destroy();
        return;
      }
      if (path === '/reset-every-reused' && count > 1) {
        req.socket.destroy();
        return;
      }
      const entry: Received = {
        method: req.method!,
        path,
        headers: req.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        connection: req.socket.remotePort!,
      };
      received.push(entry);
      const answer = () =>
        res
          .writeHead(200, { 'content-type': 'application/json', 'x-request-id': String(req.headers['x-request-id']) })
          .end(JSON.stringify(entry));
      if (path === '/hold') {
        res.once('close', () => abandoned.push(String(req.headers['x-request-id'])));
        return;
      }
      const slow = /^\/slow\/(\d+)$/.exec(path);
      if (slow) setTimeout(answer, Number(slow[1]));
      else answer();
    });
  });
  server.keepAliveTimeout = 75_000;
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    received,
    abandoned,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/**
 * Sends a request the router holds (`/hold`) through the front on `port`, closes the client once the router has
 * it, and resolves with the ms from that close until the router saw the request abandoned.
 */
export async function abandonThroughFront(port: number, router: FakeRouter, id: string): Promise<number> {
  const req = request({ host: '127.0.0.1', port, path: '/hold', method: 'POST', headers: { 'x-request-id': id } });
  req.on('error', () => undefined);
  req.end('{}');
  const received = () => router.received.some((r) => r.headers['x-request-id'] === id);
  await until('the router to receive the request', received, 5_000, 5);
  const closedAt = performance.now();
  req.destroy();
  await until('the router to see it abandoned', () => router.abandoned.includes(id), 5_000, 5);
  return performance.now() - closedAt;
}
