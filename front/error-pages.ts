/**
 * @module front/error-pages — the JSON bodies the front answers itself (nginx or the built-in proxy), so a
 * client gets TorchServe's `{code, type, message}` from every layer, never an HTML error page. The router's
 * own errors pass through the front untouched; these cover what only the front sees: the router down or
 * silent, a body over the limit, a request it cannot parse. nginx gets the same bodies rendered into its
 * config (`front/nginx.ts`), so both fronts answer byte for byte alike.
 */
import { ServeError, type ErrorBody } from '../common/errors.js';

/** Status → the error the front answers with it. */
export function frontErrors(maxBodyBytes: number): Readonly<Record<400 | 413 | 500 | 502 | 504, ServeError>> {
  return {
    400: new ServeError('BAD_REQUEST', 'Malformed HTTP request.'),
    413: new ServeError('PAYLOAD_TOO_LARGE', `Request body is larger than ${maxBodyBytes} bytes.`),
    500: new ServeError('INTERNAL'),
    502: new ServeError('UPSTREAM_UNAVAILABLE', 'Router is unavailable.'),
    504: new ServeError('REQUEST_TIMEOUT', 'Router did not answer in time.'),
  };
}

/** The exact body text (both fronts send this string). */
export function errorBodyText(error: ServeError): string {
  const body: ErrorBody = error.toBody();
  return JSON.stringify(body);
}
