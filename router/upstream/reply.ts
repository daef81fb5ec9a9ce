/**
 * @module router/upstream/reply — reading a model server's answer: the body within a byte bound, whether a 200 is
 * JSON, header values. Shared by translations (upstream-exchange.ts), status (status.ts) and glossaries.
 */
import { ServeError } from '../../common/errors.js';

/**
 * A model server's answer body, at most `maxBytes`: refused from its Content-Length before reading, or as soon as
 * the bytes read pass the bound (the connection is then closed). @throws ServeError UPSTREAM_UNAVAILABLE (502)
 */
export async function readCapped(
  body: AsyncIterable<Buffer> & { destroy(err?: Error): unknown },
  contentLength: string | undefined,
  maxBytes: number,
): Promise<Uint8Array<ArrayBuffer>> {
  const tooLarge = () =>
    new ServeError(
      'UPSTREAM_UNAVAILABLE',
      `Model server answered more than ${maxBytes} bytes (ROUTER_MAX_UPSTREAM_BYTES).`,
    );
  if (contentLength !== undefined && Number(contentLength) > maxBytes) {
    body.destroy();
    throw tooLarge();
  }
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of body) {
    length += chunk.length;
    if (length > maxBytes) {
      body.destroy();
      throw tooLarge();
    }
    chunks.push(chunk);
  }
  const out = new Uint8Array(new ArrayBuffer(length));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

/** A 200 the router passes on must be JSON: declared so, and parsing as such. */
export function isJsonAnswer(contentType: string | undefined, body: Uint8Array): boolean {
  if (!/^application\/(?:[\w.+-]*\+)?json\s*(?:;|$)/i.test(contentType ?? '')) return false;
  try {
    JSON.parse(Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('utf8'));
    return true;
  } catch {
    return false;
  }
}

/** A header's value as one string (the first, when repeated). */
export function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
