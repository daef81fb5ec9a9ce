/**
 * @module router/upstream/upstream — the router's client for the model servers' inference API: per model server, one lane
 * per target language (an undici Pool of keep-alive connections behind a bounded `Gate`); the choice of model
 * server for each request; and the one place where a transport failure or an upstream error reply becomes a typed
 * `ServeError`. Each policy has its own file: lanes and their refusal latch (lane.ts), host choice (host-choice.ts),
 * what may go to another host (retry.ts), one request and its answer (exchange.ts), error mapping
 * (errors.ts), reading answers (reply.ts).
 *
 * Why lanes: the model server keeps one queue per language, and a language served by its own engine answers in
 * its own time. A pool shared by every language would be one FIFO in front of those queues: a flood of `en`
 * would hold every connection and `ko` would wait behind it here. With a lane per (model server, language) a flood
 * fills its own lane only, and every other language — and every other model server — always has connections of
 * its own: one slow host never delays another's languages.
 *
 * ```
 *  translate(en) ─▶ route(en): hosts serving en ─▶ least outstanding ─▶ gate(host, en): ≤ connections in flight
 *                   (router/upstream/model-servers.ts)                             ≤ queue waiting, FIFO, else 503 QUEUE_FULL
 *                 ─▶ Pool(host, en): one request per connection ─▶ host:9999/predictions/en
 *                    (pipelining 1: closing a connection cancels exactly one job)
 * ```
 * Per router process at most `hosts × languages × (connections + queue)` requests are held, so memory stays
 * bounded whatever the number of clients; the rest is refused in microseconds.
 *
 * Replicas: a request goes to the host with the fewest requests outstanding from this process (waiting or in
 * flight), and once more to another host when the first never took it or its host died under it (retry.ts); a
 * request that reached a worker is never sent twice.
 *
 * Every HTTP answer a host gives (a 503 refusal as much as a translation) tells router/upstream/model-servers.ts it is alive
 * (`heard`). Requests in flight on a host are failed by the router only when that host has gone silent (`onSilent`):
 * then at once (502, the silence named) instead of after `timeoutMs`; a host ejected for a refused connection or a
 * failing `/ping` gets nothing new, and each request it holds is answered by it or failed by its own connection.
 *
 * Failure map (what a client of the router sees):
 * - the language's lane is full → `QUEUE_FULL` 503 + `Retry-After`, from the router itself;
 * - the lane has no free connection while its model server refuses → that refusal (`OVERLOADED` or `QUEUE_FULL`,
 *   503 + `Retry-After`), from the router itself;
 * - no answering host has the language ready (its hosts are ejected, still loading it after a restart, or it is
 *   registered nowhere yet) → `NO_WORKER` 503 + `Retry-After`, at once; likewise a 404 from a host that had it
 *   ready at the last read (never a 404 for a language the router accepts);
 * - connection refused / reset / closed, connect timeout, and no other host → `UPSTREAM_UNAVAILABLE` 502, at once;
 *   a host once known to serve the language is then ejected, and what follows is the 503 above until it is back;
 *   a model server never heard from since the router started is a 502 in milliseconds, not after a back-off;
 * - no whole reply (headers and body) within `timeoutMs` of the send → `REQUEST_TIMEOUT` 504;
 * - a reply body over `maxResponseBytes`, a 200 that is not JSON, a redirect (never followed) or an error reply
 *   without `x-error-code` → `UPSTREAM_UNAVAILABLE` 502: the model server failed, not the client;
 * - an error reply from the model server (`{code, type, message}`) → the catalogue entry with that status and
 *   type, its message kept, `Retry-After` kept (queue full → 503 + Retry-After reaches the client).
 *
 * A request's `signal` (the client went away) aborts it wherever it is: waiting in the lane, or in flight, where
 * undici destroys its connection, which the model server sees as the client's disconnect.
 */
import { Client } from 'undici';
import { ServeError } from '../../common/errors.js';
import type { GateStats } from './gate.js';
import { candidates, leastOutstanding, NO_HOST_RETRY_AFTER_S } from './host-choice.js';
import { pingStatus } from './hosts/probe.js';
import { HostLanes } from './host-lanes.js';
import { enterLane, laneAnswered, laneFailed } from './lane.js';
import { ModelServers, type ModelServersOptions } from './model-servers.js';
import { judgeFailure, LostWithHost, mayGoElsewhere, unwrap } from './retry.js';
import { exchange, type ExchangeOptions, type TranslateReply, type TranslateRequest } from './exchange.js';

/** The slice of the router the app depends on; `Upstream` is the real one, tests may pass another server. */
export interface UpstreamClient {
  translate(request: TranslateRequest): Promise<TranslateReply>;
  /** Model server `/ping`: true when it answers 200 within `timeoutMs`. Never throws. */
  ping(timeoutMs: number): Promise<boolean>;
}

export interface UpstreamOptions {
  /**
   * One model server base URL, e.g. `http://127.0.0.1:9999`, used as it is: no probes, no language discovery
   * (tools and tests that point the router at one server). Give `modelServers` instead to serve from several.
   */
  url?: string;
  /**
   * MODEL_SERVERS: the model servers to discover, probe and balance among (router/upstream/model-servers.ts). One of
   * `url` and `modelServers` is required.
   */
  modelServers?: Omit<ModelServersOptions, 'authorization' | 'onSilent' | 'onRemove'>;
  /**
   * Connections per target language per model server (per router process): the most requests of one language in
   * flight to one model server at once. Each carries one request at a time, so closing it cancels exactly that
   * request.
   */
  connections: number;
  /**
   * Requests of one language that may wait for one of a model server's connections; past it the router answers
   * 503 with `Retry-After` at once. Default `4 × connections`.
   */
  queue?: number;
  /**
   * Longest time for a whole answer, headers and body, in ms (→ 504): one deadline per request, which a model
   * server sending its body a byte at a time cannot stretch.
   */
  timeoutMs: number;
  /** Largest answer body read from a model server, bytes (more → 502). Default 8 MiB. */
  maxResponseBytes?: number;
  /** Longest wait for a TCP connect, in ms (→ 502). Loopback connects in microseconds; default 1000. */
  connectTimeoutMs?: number;
  /**
   * The `Authorization` header for the model server when it has TOKEN_AUTH on; `refresh` asks for a fresh read
   * (the model server writes new keys at each start). Called with `refresh` after a 401, and the request is sent
   * once more.
   */
  authorization?: (refresh: boolean) => string | undefined;
}

/** The real client (module doc). `close()` lets in-flight requests finish. */
export class Upstream implements UpstreamClient {
  readonly #url: string | undefined;
  readonly #servers: ModelServers | undefined;
  readonly #lanes: HostLanes;
  readonly #exchange: ExchangeOptions;
  /** `/ping` of a `url` upstream has its own connection, so a health check never waits behind translations. */
  readonly #control: Client | undefined;
  /** Rotates the starting point among equally loaded hosts. */
  #turn = 0;
  #closed = false;

  constructor(options: UpstreamOptions) {
    if ((options.url === undefined) === (options.modelServers === undefined)) {
      throw new TypeError('Upstream needs exactly one of url and modelServers');
    }
    this.#url = options.url === undefined ? undefined : new URL(options.url).origin;
    this.#lanes = new HostLanes({
      connections: options.connections,
      queue: options.queue ?? 4 * options.connections,
      connectTimeoutMs: options.connectTimeoutMs ?? 1_000,
      timeoutMs: options.timeoutMs,
    });
    if (options.url !== undefined) {
      this.#control = new Client(options.url, { connect: { timeout: this.#lanes.options.connectTimeoutMs } });
    }
    if (options.modelServers !== undefined) {
      this.#servers = new ModelServers({
        ...options.modelServers,
        ...(options.authorization ? { authorization: options.authorization } : {}),
        onSilent: (origin, silence) =>
          this.#lanes.drop(
            origin,
            new ServeError(
              'UPSTREAM_UNAVAILABLE',
              `Model server stopped answering: nothing from it for ${Math.round(silence.silentMs)} ms, health probe included.`,
              { cause: silence },
            ),
            'fail',
          ),
        onRemove: (origin) =>
          this.#lanes.drop(
            origin,
            new ServeError('UPSTREAM_UNAVAILABLE', 'Model server left MODEL_SERVERS.'),
            'finish',
          ),
      });
    }
    this.#exchange = {
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxResponseBytes ?? 8 * 1024 * 1024,
      authorization: options.authorization,
      servers: this.#servers,
    };
  }

  /** Every model server's origin now: the one `url`, or every known host (what each must hold, e.g. glossaries). */
  origins(): string[] {
    return this.#url !== undefined ? [this.#url] : (this.#servers?.hosts ?? []).map((host) => host.origin);
  }

  /** The `Authorization` header a model server with TOKEN_AUTH expects (undefined when it is off). */
  authorizationHeader(refresh = false): string | undefined {
    return this.#exchange.authorization?.(refresh);
  }

  /** The model servers as discovered (absent for a `url` upstream). */
  get modelServers(): ModelServers | undefined {
    return this.#servers;
  }

  /** Each language's lanes, summed over the model servers: in flight, waiting, refused so far. */
  get stats(): Record<string, GateStats> {
    return this.#lanes.stats;
  }

  /** Requests outstanding (waiting or in flight) per model server, from this router process. */
  get outstanding(): Record<string, number> {
    return this.#lanes.outstanding;
  }

  async translate(request: TranslateRequest): Promise<TranslateReply> {
    try {
      return await this.#translate(request);
    } catch (err) {
      // Routed only where the language was read ready: a host that answers 404 unregistered it since (or is a
      // restarted process registering its models again). The router accepts the language, so it is unavailable
      // for now, not unknown; the fresh read (`suspect`) settles where it goes next.
      if (this.#servers !== undefined && err instanceof ServeError && err.code === 'MODEL_NOT_FOUND') {
        throw new ServeError(
          'NO_WORKER',
          `Model ${request.tgtLang} is unavailable now (its model server no longer has it registered), retry later.`,
          { retryAfterS: NO_HOST_RETRY_AFTER_S, cause: err },
        );
      }
      throw err;
    }
  }

  async #translate(request: TranslateRequest): Promise<TranslateReply> {
    const lang = request.tgtLang;
    // Not ready anywhere by the last read: ask the hosts about it now (registered or loaded since?) before refusing.
    if (this.#servers?.route(lang).kind === 'language-down') await this.#servers.recheck(lang);
    const first = this.#choose(lang, undefined)!;
    try {
      return await this.#attempt(first, request);
    } catch (err) {
      if (!(await mayGoElsewhere(err, first, lang, this.#servers))) throw unwrap(err);
      // Once only: a second refusal means the language is saturated or gone, and the client hears it now.
      const second = this.#choose(lang, first);
      if (second === undefined) throw unwrap(err);
      try {
        return await this.#attempt(second, request);
      } catch (again) {
        if (again instanceof LostWithHost && (await mayGoElsewhere(again, second, lang, this.#servers))) {
          // Both hosts went down under it: what the route says now (503 + Retry-After when nobody has it ready).
          this.#choose(lang, second);
        }
        throw unwrap(again);
      }
    }
  }

  /**
   * The least loaded host that may take `lang`, other than `failed` (a retry); undefined when a retry has nowhere
   * else to go. @throws ServeError when no host may take it now.
   */
  #choose(lang: string, failed: string | undefined): string | undefined {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN', 'Router is shutting down.');
    const origins = candidates(this.#servers?.route(lang) ?? { kind: 'hosts', origins: [this.#url!] }, lang, failed);
    if (origins === undefined) return undefined;
    return leastOutstanding(origins, this.#turn++, (origin) => this.#lanes.outstandingAt(origin));
  }

  /** One try on one host. @throws NotReached when the request never reached a worker there. */
  async #attempt(origin: string, request: TranslateRequest): Promise<TranslateReply> {
    const [host, lane] = this.#lanes.get(origin, request.tgtLang);
    host.outstanding++;
    try {
      const entered = enterLane(lane, request.tgtLang, request.signal, host.gone.signal);
      const release = typeof entered === 'function' ? entered : await entered;
      const sentAt = performance.now();
      try {
        const reply = await exchange(origin, lane.pool, request, this.#exchange);
        laneAnswered(lane, sentAt);
        return reply;
      } catch (err) {
        laneFailed(lane, sentAt, err);
        // What the failure says about its host, and whether another host may take the request.
        throw judgeFailure(origin, err, this.#servers);
      } finally {
        release();
      }
    } finally {
      host.outstanding--;
    }
  }

  /** True when a model server answers `/ping` with 200 within `timeoutMs` (any one of them). Never throws. */
  async ping(timeoutMs: number): Promise<boolean> {
    if (this.#servers !== undefined) return this.#servers.anyAnswers(timeoutMs);
    try {
      return (await pingStatus(this.#control!, timeoutMs)) === 200;
    } catch {
      return false;
    }
  }

  /** Stops new requests, waits for in-flight ones, then closes the connections. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const pools = this.#lanes.pools();
    const dispatchers = this.#control === undefined ? pools : [this.#control, ...pools];
    await Promise.all([
      ...dispatchers.map((d) => (d.closed || d.destroyed ? undefined : d.close())),
      this.#servers?.close(),
    ]);
  }
}
