/**
 * @module router/upstream/retry — which failed attempts may go to another model server. Only a request that never reached a
 * worker (`NotReached`: refused connection, admission 503, stale language list) or whose host died under it
 * (`LostWithHost`, checked before the client hears it) is sent once more, elsewhere; one that reached a live
 * worker is never sent twice.
 */
import { ServeError } from '../../common/errors.js';
import type { ModelServers } from './model-servers.js';
import { NOT_CONNECTED_CODES, RETRY_ELSEWHERE_CODES, transportCode } from './errors.js';

/** An attempt that failed before the request reached a worker: it may be sent to another replica. */
export class NotReached extends Error {
  constructor(readonly error: unknown) {
    super('not reached');
  }
}

/** An attempt whose connection was torn down after the request was sent: its host may have died with it. */
export class LostWithHost extends Error {
  constructor(readonly error: ServeError) {
    super('lost with its host');
  }
}

/** The error the client hears from a failed attempt. */
export function unwrap(err: unknown): unknown {
  return err instanceof NotReached || err instanceof LostWithHost ? err.error : err;
}

/** What a failed exchange says about its host, and whether another host may take the request. */
export function judgeFailure(origin: string, err: unknown, servers: ModelServers | undefined): unknown {
  if (err instanceof ServeError) {
    // Its list was stale (unregistered since, or a host that came back and registers its languages one by one
    // while another is tried for them): another host may serve the language.
    if (err.code === 'MODEL_NOT_FOUND') void servers?.suspect(origin);
    // Only a request the model server says reached no worker may run elsewhere: a document whose first
    // sentences ran before the rest was refused must not be translated twice.
    if (RETRY_ELSEWHERE_CODES.has(err.code) && err.reachedWorker === false) return new NotReached(err);
    const code = transportCode(err);
    if (code !== undefined) {
      if (code === 'ECONNREFUSED') {
        servers?.refused(origin, 'connection refused');
        return new NotReached(err);
      }
      if (NOT_CONNECTED_CODES.has(code)) {
        void servers?.suspect(origin);
        return new NotReached(err);
      }
      // Torn down mid-request (reset, closed): whether its host died is checked before the client hears it.
      return new LostWithHost(err);
    }
  }
  return err;
}

/**
 * Whether a failed attempt on `origin` may go to another host: one that never reached a worker, or one whose host
 * died under it — the connection torn down mid-request and the host, checked at once, gone or no longer ready for
 * `lang` (a crashed model server, restarting). Its work died with it, so sending it again does nothing twice; with
 * no other host, the client hears the route's 503 + Retry-After rather than a 502.
 */
export async function mayGoElsewhere(
  err: unknown,
  origin: string,
  lang: string,
  servers: ModelServers | undefined,
): Promise<boolean> {
  if (err instanceof NotReached) return true;
  if (!(err instanceof LostWithHost) || servers === undefined) return false;
  await servers.suspect(origin);
  return !servers.serves(origin, lang);
}
