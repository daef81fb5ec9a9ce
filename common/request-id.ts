/**
 * @module common/request-id — the one rule for `x-request-id` on every hop (nginx, the built-in front, the
 * router, the model server): a client's id is kept when it matches `REQUEST_ID_PATTERN`, else the hop makes a
 * UUID. Every hop keeps what the hop before it sent, so one id reaches every log.
 *
 * nginx cannot import this: `nginx/nginx.conf`'s `map $http_x_request_id` spells the same character class, and
 * common/request-id.test.ts fails when the two differ.
 */
import { randomUUID } from 'node:crypto';

/**
 * Printable ASCII without spaces, quotes or separators that would need escaping in a log line or a header:
 * letters, digits and `_ . : @ / + = -` (so base64 ids and `user@host/trace` ids pass), 1 to 128 of them.
 * Spelled out instead of `\w` because PCRE's `\w` follows the locale and JavaScript's does not.
 */
export const REQUEST_ID_PATTERN = /^[A-Za-z0-9_.:@/+=-]{1,128}$/;

/** The incoming id when it is well-formed, else a fresh UUID. */
export function requestIdFrom(incoming: string | null | undefined): string {
  return typeof incoming === 'string' && REQUEST_ID_PATTERN.test(incoming) ? incoming : randomUUID();
}
