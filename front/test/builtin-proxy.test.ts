/**
 * The built-in front in-process on port 0, against a fake router that is a real HTTP server: what only the
 * built-in proxy does itself (its limit on streamed bodies and its lingering close after a 413, the one resend
 * after a reset on a reused keep-alive connection, cancelling the router's request when the client goes away, its
 * timeout, malformed requests).
 */
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import http from 'node:http';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createBuiltinProxy, type BuiltinProxy } from '../builtin-proxy.js';
import { errorBodyText, frontErrors } from '../error-pages.js';
import { abandonThroughFront, startFakeRouter, type FakeRouter } from './fake-router.js';

const MAX = 2048;
const logger = pino({ level: 'silent' });
let router: FakeRouter;

async function startProxy(timeoutMs = 10_000): Promise<{ proxy: BuiltinProxy; port: number; stop(): Promise<void> }> {
  const proxy = createBuiltinProxy(
    { routerUrl: `http://127.0.0.1:${router.port}`, maxBodyBytes: MAX, timeoutMs },
    { logger },
  );
  await new Promise<void>((resolve) => proxy.server.listen(0, '127.0.0.1', resolve));
  return {
    proxy,
    port: (proxy.server.address() as AddressInfo).port,
    stop: () =>
      new Promise<void>((resolve) => {
        proxy.server.closeAllConnections();
        proxy.server.close(() => resolve());
        proxy.close();
      }),
  };
}

let front: Awaited<ReturnType<typeof startProxy>>;
beforeAll(async () => {
  router = await startFakeRouter();
  front = await startProxy();
});
afterAll(async () => {
  await front.stop();
  await router.close();
});

interface Reply {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function send(port: number, path: string, body: string | Buffer[] | undefined, agent?: http.Agent): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: '127.0.0.1', port, path, method: body === undefined ? 'GET' : 'POST', agent },
      (res) => {
        let text = '';
        res.on('data', (d: Buffer) => (text += d.toString()));
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
      },
    );
    req.on('error', reject);
    if (Array.isArray(body)) {
      for (const chunk of body) req.write(chunk); // no Content-Length: chunked
      req.end();
    } else req.end(body);
  });
}

describe('built-in front proxy', () => {
  it('forwards the body whole, with its length, and tags the reply', async () => {
    const chunks = [Buffer.from('{"src_lang":'), Buffer.from('"en","src_text":"hi","tgt_lang":"ko"}')];
    const reply = await send(front.port, '/', chunks);
    expect(reply.status).toBe(200);
    expect(reply.headers['x-front']).toBe('builtin');
    const seen = JSON.parse(reply.body) as { body: string; headers: http.IncomingHttpHeaders };
    expect(seen.body).toBe('{"src_lang":"en","src_text":"hi","tgt_lang":"ko"}');
    expect(seen.headers['content-length']).toBe(String(seen.body.length));
    expect(seen.headers['transfer-encoding']).toBeUndefined();
    expect(seen.headers['x-forwarded-for']).toBe('127.0.0.1');
  });

  it("sends its own X-Forwarded-Host and -Proto, never a client's, and appends to the client's X-Forwarded-For", async () => {
    const reply = await new Promise<Reply>((resolve, reject) => {
      const req = http.request(
        {
          host: '127.0.0.1',
          port: front.port,
          path: '/',
          method: 'POST',
          headers: {
            host: 'mt.example:7777',
            'x-forwarded-host': 'evil.example/steal?x=',
            'x-forwarded-proto': 'https',
            'x-forwarded-port': '1',
            'x-forwarded-for': '203.0.113.9',
          },
        },
        (res) => {
          let text = '';
          res.on('data', (d: Buffer) => (text += d.toString()));
          res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body: text }));
        },
      );
      req.on('error', reject);
      req.end('{}');
    });
    const { headers } = JSON.parse(reply.body) as { headers: http.IncomingHttpHeaders };
    expect(headers['x-forwarded-host']).toBe('mt.example:7777');
    expect(headers['x-forwarded-proto']).toBe('http');
    expect(headers['x-forwarded-port']).toBe('7777'); // http-proxy takes it from the Host received
    expect(headers['x-forwarded-for']).toBe('203.0.113.9,127.0.0.1');
  });

  it('answers 413 for a streamed body over the limit, without forwarding it', async () => {
    const before = router.received.length;
    const reply = await send(front.port, '/', [Buffer.alloc(1500, 'a'), Buffer.alloc(1500, 'b')]);
    expect(reply.status).toBe(413);
    expect(reply.headers['content-type']).toBe('application/json');
    expect(reply.body).toBe(errorBodyText(frontErrors(MAX)[413]));
    expect(router.received.length).toBe(before);
  });

  it('sends a request once more when the router resets a reused keep-alive connection', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    try {
      expect((await send(front.port, '/', '{}', agent)).status).toBe(200);
      const reply = await send(front.port, '/reset-reused', '{"n":1}', agent);
      expect(reply.status).toBe(200);
      expect(JSON.parse(reply.body)).toMatchObject({ path: '/reset-reused', body: '{"n":1}' });
      // The resend carries the client's address once, not once per attempt.
      expect((JSON.parse(reply.body) as { headers: http.IncomingHttpHeaders }).headers['x-forwarded-for']).toBe(
        '127.0.0.1',
      );
    } finally {
      agent.destroy();
    }
  });

  it('resends on a new connection when every pooled connection to the router died at once', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 3 });
    try {
      // Three pooled connections from the front to the router.
      await Promise.all([0, 1, 2].map(() => send(front.port, '/slow/50', '{}', agent)));
      for (let i = 0; i < 3; i++) {
        const reply = await send(front.port, '/reset-every-reused', `{"i":${i}}`, agent);
        expect(reply.status, reply.body).toBe(200);
        expect(JSON.parse(reply.body)).toMatchObject({ path: '/reset-every-reused', body: `{"i":${i}}` });
      }
    } finally {
      agent.destroy();
    }
  });

  it('a client that disconnects cancels its request at the router at once', async () => {
    for (let i = 0; i < 5; i++) {
      expect(await abandonThroughFront(front.port, router, `gone-${i}`)).toBeLessThan(1_000);
    }
  });

  it('delivers its 413 to a client that sends a large body whole before reading (lingering close), every time', async () => {
    const body = Buffer.alloc(5 << 20, 0x61);
    const expected = errorBodyText(frontErrors(MAX)[413]);
    for (const framing of ['content-length', 'chunked'] as const) {
      for (let i = 0; i < 25; i++) {
        const raw = await new Promise<string>((resolve, reject) => {
          const socket = connect(front.port, '127.0.0.1', () => {
            socket.write(
              framing === 'content-length'
                ? `POST / HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`
                : `POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n${body.length.toString(16)}\r\n`,
            );
            socket.write(body);
            if (framing === 'chunked') socket.write('\r\n0\r\n\r\n');
          });
          let text = '';
          socket.on('data', (d: Buffer) => (text += d.toString()));
          socket.on('error', (err) =>
            reject(new Error(`${framing} try ${i}: ${err.message} after ${JSON.stringify(text)}`)),
          );
          socket.on('close', () => resolve(text));
        });
        expect(raw).toMatch(/^HTTP\/1\.1 413 Payload Too Large\r\n/);
        expect(raw.endsWith(`\r\n\r\n${expected}`)).toBe(true);
      }
    }
  });

  it('answers 504 JSON when the router does not answer in time', async () => {
    const impatient = await startProxy(200);
    try {
      const reply = await send(impatient.port, '/slow/2000', '{}');
      expect(reply.status).toBe(504);
      expect(reply.body).toBe(errorBodyText(frontErrors(MAX)[504]));
    } finally {
      await impatient.stop();
    }
  });

  it('answers 400 JSON to a request it cannot parse', async () => {
    const raw = await new Promise<string>((resolve, reject) => {
      const socket = connect(front.port, '127.0.0.1', () => socket.write('NOT AN HTTP REQUEST\r\n\r\n'));
      let text = '';
      socket.on('data', (d: Buffer) => (text += d.toString()));
      socket.on('end', () => resolve(text));
      socket.on('error', reject);
    });
    expect(raw).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(raw.endsWith(`\r\n\r\n${errorBodyText(frontErrors(MAX)[400])}`)).toBe(true);
  });
});
