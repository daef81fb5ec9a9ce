/**
 * @module router/router-env — the Hono environment of the router's apps: what middleware puts on a request for the
 * handlers and the log line. Its own file so that the API modules (router/apis/) and app.ts share it without a cycle.
 */
import type { HttpBindings } from '@hono/node-server';

/** The router app's bindings and per-request variables. */
export type RouterEnv = {
  /** @hono/node-server's bindings when served by it; absent under `app.request()`. */
  Bindings: Partial<HttpBindings>;
  Variables: {
    requestId: string;
    tgtLang?: string;
    texts?: number;
    srcText?: string | string[];
    errorCode?: string;
    /** What a 502's transport failure was (its code: a refused or reset connection …), for the log line. */
    errorCause?: string;
    /** The model server's identification headers of a 200, for the log line. */
    upstreamHeaders?: Record<string, string>;
    /** The API key's id (never the key) of a DeepL or LibreTranslate request. */
    keyId?: string;
  };
};
