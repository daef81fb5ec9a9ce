/**
 * @module common/strict-utf8 — the one strict UTF-8 decoder and JSON body parser of every hop: invalid bytes or
 * JSON are the client's 400, not text handed on with U+FFFD in place of them (the router's bodies, the model
 * server's bodies and KServe tensors).
 */
import { ServeError } from './errors.js';

/** A JSON value, as a body decodes to. */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue };

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

/** A decoded body's JSON value. @throws ServeError INVALID_JSON `Request body is not valid JSON: {why}` */
export function parseJsonBody(text: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue;
  } catch (err) {
    throw new ServeError('INVALID_JSON', `Request body is not valid JSON: ${(err as Error).message}`);
  }
}
