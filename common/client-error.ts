/**
 * @module common/client-error — what a Node HTTP server answers a request its parser rejects (garbage request
 * line, oversized or invalid headers, broken Content-Length or chunk framing). Node's default is a bare
 * `400`/`431` with no body; a client of mt-serve gets TorchServe's JSON error from every layer instead, naming
 * the problem, and the connection is closed (the rest of the stream cannot be trusted).
 */
import type { Server, ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { ServeError } from './errors.js';

/** llhttp error codes → what the message says. */
const MESSAGES: Record<string, string> = {
  HPE_HEADER_OVERFLOW: 'Malformed HTTP request: the request headers are too large.',
  HPE_INVALID_CONTENT_LENGTH: 'Malformed HTTP request: invalid Content-Length header.',
  HPE_UNEXPECTED_CONTENT_LENGTH: 'Malformed HTTP request: Content-Length together with Transfer-Encoding.',
  HPE_INVALID_TRANSFER_ENCODING: 'Malformed HTTP request: invalid Transfer-Encoding header.',
  HPE_INVALID_CHUNK_SIZE: 'Malformed HTTP request: invalid chunk size in a chunked body.',
  HPE_INVALID_HEADER_TOKEN: 'Malformed HTTP request: invalid character in a header.',
  HPE_INVALID_METHOD: 'Malformed HTTP request: invalid method.',
  HPE_INVALID_URL: 'Malformed HTTP request: invalid request target.',
  HPE_INVALID_VERSION: 'Malformed HTTP request: invalid HTTP version.',
};

/** Answer parser errors on `server` with a JSON 400 and close the connection. Call once, before listening. */
export function answerClientErrors(server: Server): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    const res = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
    // Node's own rule: nothing can be written once an answer has started, or to a socket that is gone.
    if (err.code === 'ECONNRESET' || !socket.writable || res?.headersSent) {
      socket.destroy();
      return;
    }
    if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
      socket.end('HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n');
      return;
    }
    const error = new ServeError('BAD_REQUEST', MESSAGES[err.code ?? ''] ?? 'Malformed HTTP request.');
    const body = JSON.stringify(error.toBody());
    socket.end(
      `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
        `Connection: close\r\n\r\n${body}`,
    );
  });
}
