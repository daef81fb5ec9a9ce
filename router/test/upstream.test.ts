/**
 * The undici upstream against a model server with TOKEN_AUTH on (a real HTTP server demanding a bearer key):
 * the key is sent, and after a 401 (the model server restarted with new keys) it is read again and the request
 * sent once more.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, expect, it } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { Upstream } from '../upstream/upstream.js';

describe('Upstream with token authorization', () => {
  it('sends the key, and re-reads it once after a 401', async () => {
    let currentKey = 'k1';
    const seen: (string | undefined)[] = [];
    const server = createServer((req, res) => {
      seen.push(req.headers.authorization);
      req.resume().on('end', () => {
        if (req.headers.authorization !== `Bearer ${currentKey}`) {
          res.writeHead(401, { 'content-type': 'application/json', 'x-error-code': 'UNAUTHORIZED' });
          res.end(JSON.stringify({ code: 401, type: 'InvalidKeyException', message: 'Token Authorization failed.' }));
          return;
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"translated":"ok"}');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    let fileKey = 'k1';
    let cached: string | undefined;
    const reads: boolean[] = [];
    const upstream = new Upstream({
      url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
      connections: 2,
      timeoutMs: 5_000,
      // Reads "the key file" on first use and on refresh only, as router/main.ts does.
      authorization: (refresh) => {
        reads.push(refresh);
        if (refresh || cached === undefined) cached = fileKey;
        return `Bearer ${cached}`;
      },
    });
    const request = { tgtLang: 'ko', body: { src_lang: 'en', src_text: 'hi' }, requestId: 'r1' };
    try {
      expect(Buffer.from((await upstream.translate(request)).body).toString()).toBe('{"translated":"ok"}');
      // The model server restarts with a new key; the key file has it.
      currentKey = fileKey = 'k2';
      expect(Buffer.from((await upstream.translate(request)).body).toString()).toBe('{"translated":"ok"}');
      expect(seen).toEqual(['Bearer k1', 'Bearer k1', 'Bearer k2']);
      expect(reads).toEqual([false, false, true]);
      // A key that stays wrong is the client-visible 401, after one retry only.
      currentKey = 'k3';
      const err = await upstream.translate(request).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ServeError);
      expect((err as ServeError).toBody()).toEqual({
        code: 401,
        type: 'InvalidKeyException',
        message: 'Token Authorization failed.',
      });
      expect(seen).toHaveLength(5);
      expect(reads).toEqual([false, false, true, false, true]);
    } finally {
      await upstream.close();
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
