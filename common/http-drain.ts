/**
 * @module common/http-drain — graceful stop of a Node HTTP server behind a keep-alive client (nginx, the
 * front proxy, a pm2 cluster reload), without the race that drops requests.
 *
 * `server.close()` alone closes every idle keep-alive connection at once; a proxy may be writing its next
 * request into one of them at that very moment and gets a reset (a 502 for a POST, which proxies do not
 * retry). The client closing a connection is race-free, so draining asks the client to do it:
 *
 * ```
 *  drain() ─┬─ stop listening (new connections go to the other instances)
 *           ├─ every response not yet sent, and every request that still arrives on an open
 *           │  connection, is answered with `Connection: close` → the client closes after reading it
 *           ├─ graceMs later: close connections that stayed idle all along (a client that reuses
 *           │  connections most-recently-used first has not touched them; the race is now negligible)
 *           └─ 'close' when the last connection is gone → resolve(true)
 *              timeoutMs with requests still running → destroy the rest → resolve(false)
 * ```
 */
import type { Server, ServerResponse } from 'node:http';
import { Server as NetServer } from 'node:net';

/**
 * Connections a public-facing listener (the built-in front, each router) keeps waiting to be accepted, as the nginx
 * front's `listen … backlog=4096`: with Node's default of 511 a burst of thousands overflowed the accept queue while
 * the event loop was busy — the built-in front's clients waited out their connect timeouts, and nginx answered 502 for
 * the router connections refused (512 of 10,000 clients in one loaded run of bench figure 11). The kernel caps it at
 * net.core.somaxconn.
 */
export const LISTEN_BACKLOG = 4096;

export interface DrainOptions {
  /** How long connections idle at the start of the drain are left for their client to close, in ms. */
  graceMs: number;
  /** Longest wait for in-flight requests, in ms; past it the remaining connections are destroyed. */
  timeoutMs: number;
}

/** Tracks a server's in-flight responses so that `drain()` can finish them with `Connection: close`. */
export class HttpDrain {
  readonly #server: Server;
  readonly #inFlight = new Set<ServerResponse>();
  #draining = false;
  #closeIdleOnFinish = false;
  #done: Promise<boolean> | undefined;

  /** Attach before the server receives requests (its own `request` listener runs first). */
  constructor(server: Server) {
    this.#server = server;
    server.prependListener('request', (_req, res: ServerResponse) => {
      if (this.#draining) res.setHeader('connection', 'close');
      this.#inFlight.add(res);
      res.once('close', () => {
        this.#inFlight.delete(res);
        // After the grace period a connection that just finished its last response may be idle with
        // keep-alive (its headers were sent before the drain began): close it now that it is idle.
        if (this.#closeIdleOnFinish) setImmediate(() => this.#server.closeIdleConnections());
      });
    });
  }

  get draining(): boolean {
    return this.#draining;
  }

  /** Requests received and not yet answered. */
  get inFlight(): number {
    return this.#inFlight.size;
  }

  /** Stop and drain; resolves true when every request was answered, false when `timeoutMs` cut some off. Idempotent. */
  drain(options: DrainOptions): Promise<boolean> {
    this.#done ??= this.#run(options);
    return this.#done;
  }

  async #run({ graceMs, timeoutMs }: DrainOptions): Promise<boolean> {
    this.#draining = true;
    for (const res of this.#inFlight) if (!res.headersSent) res.setHeader('connection', 'close');
    const closed = new Promise<void>((resolve) => this.#server.once('close', () => resolve()));
    // net.Server's close, not http.Server's: stop listening without closing idle connections yet.
    if (this.#server.listening) NetServer.prototype.close.call(this.#server);
    const timers: NodeJS.Timeout[] = [];
    const grace = new Promise<void>((resolve) => timers.push(setTimeout(resolve, graceMs)));
    const timedOut = new Promise<'timeout'>((resolve) => timers.push(setTimeout(() => resolve('timeout'), timeoutMs)));
    await Promise.race([closed, grace]);
    this.#closeIdleOnFinish = true;
    this.#server.closeIdleConnections();
    const outcome = await Promise.race([closed.then(() => 'closed' as const), timedOut]);
    for (const t of timers) clearTimeout(t);
    if (outcome === 'timeout') {
      this.#server.closeAllConnections();
      await closed;
      return false;
    }
    return true;
  }
}
