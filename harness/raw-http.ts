/**
 * @module harness/raw-http — bytes on a TCP socket, for requests no well-behaved client sends
 * (broken framing, oversized or invalid headers, garbage request lines) and the answer read back as is.
 */
import { connect } from 'node:net';

export interface RawReply {
  /** 0 when the server closed without an answer. */
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * Write `bytes` to 127.0.0.1:`port`, read until the first answer is complete (its Content-Length, or its last chunk)
 * or the server closes (or `timeoutMs`), parse that answer. Not waiting for the close once the answer is whole: after
 * refusing a body it has not read, nginx holds the connection open for `lingering_timeout` (5 s) to discard it.
 */
export function rawRequest(port: number, bytes: string | Buffer, timeoutMs = 10_000): Promise<RawReply> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no answer (and no close) within ${timeoutMs} ms`));
    }, timeoutMs);
    socket.on('data', (d: Buffer) => {
      chunks.push(d);
      if (parse(Buffer.concat(chunks).toString('latin1')).complete) socket.destroy();
    });
    // A server may reset after answering (it did not read the rest of what we sent): keep what arrived.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(parse(Buffer.concat(chunks).toString('latin1')).reply);
    });
    // No half-close after writing: nginx takes it for a client that went away and drops the request.
    socket.on('end', () => socket.destroy());
    socket.write(bytes);
  });
}

/** The first answer in `text`, and whether all of it has arrived (its Content-Length, or its last chunk). */
function parse(text: string): { reply: RawReply; complete: boolean } {
  const head = text.indexOf('\r\n\r\n');
  if (!text.startsWith('HTTP/') || head < 0) return { reply: { status: 0, headers: {}, body: text }, complete: false };
  const [statusLine, ...lines] = text.slice(0, head).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  let body = text.slice(head + 4);
  let complete = false;
  if (headers['transfer-encoding'] === 'chunked') ({ body, complete } = dechunk(body));
  else if (headers['content-length'] !== undefined) {
    const length = Number(headers['content-length']);
    complete = body.length >= length;
    body = body.slice(0, length);
  }
  const reply = {
    status: Number(statusLine!.split(' ')[1]),
    headers,
    body: Buffer.from(body, 'latin1').toString('utf8'),
  };
  return { reply, complete };
}

/** A chunked body's data so far, and whether its last (empty) chunk has come. */
function dechunk(text: string): { body: string; complete: boolean } {
  let body = '';
  let rest = text;
  for (;;) {
    const eol = rest.indexOf('\r\n');
    if (eol < 0) return { body, complete: false };
    const size = parseInt(rest.slice(0, eol), 16);
    if (!(size > 0)) return { body, complete: size === 0 };
    body += rest.slice(eol + 2, eol + 2 + size);
    rest = rest.slice(eol + 2 + size + 2);
  }
}
