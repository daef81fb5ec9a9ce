/**
 * @module common/strict-utf8 — the one strict UTF-8 decoder of every hop: invalid bytes are the client's 400, not
 * text handed on with U+FFFD in place of them (the router's bodies, the model server's bodies and KServe tensors).
 */
import { ServeError } from './errors.js';

const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * `bytes` as text. @param what names the bytes in the error (default `Request body`).
 * @throws ServeError BAD_REQUEST `{what} is not valid UTF-8.`
 */
export function decodeUtf8(bytes: Uint8Array | ArrayBuffer, what = 'Request body'): string {
  try {
    return UTF8.decode(bytes);
  } catch {
    throw new ServeError('BAD_REQUEST', `${what} is not valid UTF-8.`);
  }
}
