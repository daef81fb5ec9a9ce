/**
 * @module router/upstream — the router's client for the model servers' inference API: per model server, one lane
 * per target language (an undici Pool of keep-alive connections behind a bounded `Gate`); the choice of model
 * server for each request; and the one place where a transport failure or an upstream error reply becomes a typed
 * `ServeError`. Each policy has its own file: lanes and their refusal latch (lane.ts), host choice (host-choice.ts),
 * what may go to another host (retry.ts), error mapping (upstream-errors.ts), reading answers (upstream-reply.ts).
 *
 * Why lanes: the model server keeps one queue per language, and a language served by its own engine answers in
 * its own time. A pool shared by every language would be one FIFO in front of those queues: a flood of `en`
 * would hold every connection and `ko` would wait behind it here. With a lane per (model server, language) a flood
 * fills its own lane only, and every other language — and every other model server — always has connections of
 * its own: one slow host never delays another's languages.
 *
 * ```
 *  translate(en) ─▶ route(en): hosts serving en ─▶ least outstanding ─▶ gate(host, en): ≤ connections in flight
 *                   (router/model-servers.ts)                             ≤ queue waiting, FIFO, else 503 QUEUE_FULL
 *                 ─▶ Pool(host, en): one request per connection ─▶ host:9999/predictions/en
 *                    (pipelining 1: closing a connection cancels exactly one job)
 * ```
 * Per router process at most `hosts × languages × (connections + queue)` requests are held, so memory stays
 * bounded whatever the number of clients; the rest is refused in microseconds.
 *
 * Replicas: a request goes to the host with the fewest requests outstanding from this process (waiting or in
 * flight), and once more to another host when the first never took it — connection refused or not connected in
 * time, an admission 503 (queue full, overloaded, no worker, shutting down), a 404 for a model it does not have
 * (its language list was stale), or its host went silent while it waited in the lane. A request that reached a
 * worker is never sent twice.
 *
 * Every HTTP answer a host gives (a 503 refusal as much as a translation) tells router/model-servers.ts it is alive
 * (`heard`): a host busy enough that its `/ping` waits is not taken out while it answers. Requests in flight on a
 * host are failed by the router only when that host has gone silent — nothing from it at all, probes included, for
 * the probe limit (a partition, a dead machine): then at once (502, the silence named) instead of after
 * `timeoutMs`. A host ejected for a refused connection or a failing `/ping` gets nothing new, and what it holds runs
 * on: each request there is answered by the host or failed by its own connection.
 *
 * A lane whose model server refused a request at admission (queue budget or bound: 503 + Retry-After) keeps no
 * line until that Retry-After has passed and, beyond it, until the model server has answered a request sent on the
 * lane after the refusal (it admits again; an answer to a job admitted before says nothing, and under sustained
 * overload one comes every batch): its waiters are refused at once, and so is every request that finds no free
 * connection, with the model server's own refusal and the Retry-After left of it (at least 1 s). Under sustained
 * overload a connection frees only when an admitted job ends, seconds later: a line reopened at the Retry-After
 * alone, or at the next answer to an older job, filled again and held its requests until then (refusal p99 1.4 and
 * 1.5 s through the front at 10×, bench figure 7). A line is there to absorb a
 * burst while the model server admits; while it refuses, a request waiting in the line for a connection is only
 * refused later (seconds later at 10× overload on bench figure 7, where lines held requests behind connections
 * whose jobs waited in the model server's queue). A request that finds a free connection still goes through, so the
 * model server keeps being asked and its queue never runs dry because of this.
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
import { Client, type Pool } from 'undici';
import { ERROR_CODE_HEADER, REACHED_WORKER_HEADER, ServeError } from '../common/errors.js';
import { Gate, GateRefusedError, type GateStats } from './gate.js';
import { ModelServers, type ModelServersOptions } from './model-servers.js';
import { pingStatus } from './hosts/probe.js';
import type { Route } from './hosts/route.js';
import { createLane, LANE_RETRY_AFTER_S, laneAnswered, laneFailed, refusingNow, type Lane } from './lane.js';
import { leastOutstanding } from './host-choice.js';
import { judgeFailure, LostWithHost, NotReached, unwrap } from './retry.js';
import { transportError, upstreamError } from './upstream-errors.js';
import { header, isJsonAnswer, readCapped } from './upstream-reply.js';
import type { TranslateInput } from './translate-request.js';

/** What the router sends for one request (the model name is the target language, as in the seed). */
export interface TranslateRequest {
  tgtLang: string;
  body: Omit<TranslateInput, 'tgt_lang'>;
  requestId: string;
  /** The client's Cache-Control, passed on: `no-cache` makes the model server skip its translation cache. */
  cacheControl?: string | undefined;
  /** Aborts the upstream request (the client went away). */
  signal?: AbortSignal;
}

/** A successful model-server reply, passed through untouched. */
export interface TranslateReply {
  /** The raw JSON body (`{"translated": …}`). */
  body: Uint8Array<ArrayBuffer>;
  /** The model server's identification headers (`x-model-name`, `x-worker-id`, `x-device`, …) that it sent. */
  headers: Record<string, string>;
}

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
   * MODEL_SERVERS: the model servers to discover, probe and balance among (router/model-servers.ts). One of
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

/** Headers of the model server's reply that the router passes on to its client. */
export const PASSTHROUGH_HEADERS = [
  'x-model-name',
  'x-model-version',
  'x-worker-id',
  'x-device',
  'x-device-fallback',
  'x-cache',
] as const;

/** Seconds a client is asked to wait when no host of its language answers: a readmission takes about a probe. */
const NO_HOST_RETRY_AFTER_S = 1;

/** One model server's lanes, and what this router process has outstanding there (waiting or in flight). */
interface HostLanes {
  lanes: Map<string, Lane>;
  outstanding: number;
  /** Aborted when the host is ejected: requests still waiting in its lanes go to another replica. */
  /** Aborted when the host goes silent or is removed (its reason the client's error): waiters go elsewhere. */
  gone: AbortController;
}

/**
 * The real client: per model server, a lane (gate + undici Pool) per target language. A request goes to the
 * model server with the fewest outstanding requests among those that serve its language (router/model-servers.ts
 * `route`), and once more to another one when the first did not take it (refused connection, admission 503).
 * `close()` lets in-flight requests finish.
 */
export class Upstream implements UpstreamClient {
  readonly #url: string | undefined;
  readonly #servers: ModelServers | undefined;
  readonly #connections: number;
  readonly #queue: number;
  readonly #timeoutMs: number;
  readonly #maxResponseBytes: number;
  readonly #connectTimeoutMs: number;
  readonly #authorization: UpstreamOptions['authorization'];
  /** By origin, then language; created on first use. Ejection and removal take a host's entry out whole. */
  readonly #hosts = new Map<string, HostLanes>();
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
    this.#connections = options.connections;
    this.#queue = options.queue ?? 4 * options.connections;
    this.#timeoutMs = options.timeoutMs;
    this.#maxResponseBytes = options.maxResponseBytes ?? 8 * 1024 * 1024;
    this.#connectTimeoutMs = options.connectTimeoutMs ?? 1_000;
    this.#authorization = options.authorization;
    // Validates both bounds now rather than on the first request.
    void new Gate(this.#connections, this.#queue);
    if (options.url !== undefined) {
      this.#control = new Client(options.url, { connect: { timeout: this.#connectTimeoutMs } });
    }
    if (options.modelServers !== undefined) {
      this.#servers = new ModelServers({
        ...options.modelServers,
        ...(options.authorization ? { authorization: options.authorization } : {}),
        onSilent: (origin, silence) =>
          this.#dropHost(
            origin,
            new ServeError(
              'UPSTREAM_UNAVAILABLE',
              `Model server stopped answering: nothing from it for ${Math.round(silence.silentMs)} ms, health probe included.`,
              { cause: silence },
            ),
            'fail',
          ),
        onRemove: (origin) =>
          this.#dropHost(origin, new ServeError('UPSTREAM_UNAVAILABLE', 'Model server left MODEL_SERVERS.'), 'finish'),
      });
    }
  }

  /** Every model server's origin now: the one `url`, or every known host (what each must hold, e.g. glossaries). */
  origins(): string[] {
    return this.#url !== undefined ? [this.#url] : (this.#servers?.hosts ?? []).map((host) => host.origin);
  }

  /** The `Authorization` header a model server with TOKEN_AUTH expects (undefined when it is off). */
  authorizationHeader(refresh = false): string | undefined {
    return this.#authorization?.(refresh);
  }

  /** The model servers as discovered (absent for a `url` upstream). */
  get modelServers(): ModelServers | undefined {
    return this.#servers;
  }

  /** Each language's lanes, summed over the model servers: in flight, waiting, refused so far. */
  get stats(): Record<string, GateStats> {
    const sum: Record<string, GateStats> = {};
    for (const host of this.#hosts.values()) {
      for (const [lang, lane] of host.lanes) {
        const s = lane.gate.stats;
        const t = (sum[lang] ??= { active: 0, waiting: 0, refused: 0 });
        t.active += s.active;
        t.waiting += s.waiting;
        t.refused += s.refused;
      }
    }
    return sum;
  }

  /** Requests outstanding (waiting or in flight) per model server, from this router process. */
  get outstanding(): Record<string, number> {
    return Object.fromEntries([...this.#hosts].map(([origin, host]) => [origin, host.outstanding]));
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
    // Not ready anywhere by the last read: ask the hosts about it now (registered or loaded since?) before refusing.
    if (this.#servers?.route(request.tgtLang).kind === 'language-down') await this.#servers.recheck(request.tgtLang);
    const first = this.#choose(request.tgtLang, undefined)!;
    try {
      return await this.#attempt(first, request);
    } catch (err) {
      if (!(await this.#mayRetry(err, first, request.tgtLang))) throw unwrap(err);
      // Once only: a second refusal means the language is saturated or gone, and the client hears it now.
      const second = this.#choose(request.tgtLang, first);
      if (second === undefined) throw unwrap(err);
      try {
        return await this.#attempt(second, request);
      } catch (again) {
        if (again instanceof LostWithHost && (await this.#mayRetry(again, second, request.tgtLang))) {
          // Both hosts went down under it: what the route says now (503 + Retry-After when nobody has it ready).
          this.#choose(request.tgtLang, second);
        }
        throw unwrap(again);
      }
    }
  }

  /**
   * Whether a failed attempt may go to another host: one that never reached a worker, or one whose host died
   * under it — the connection torn down mid-request and the host, checked at once, gone or no longer ready for
   * the language (a crashed model server, restarting). Its work died with it, so sending it again does nothing
   * twice; with no other host, the client hears the route's 503 + Retry-After rather than a 502.
   */
  async #mayRetry(err: unknown, origin: string, lang: string): Promise<boolean> {
    if (err instanceof NotReached) return true;
    if (!(err instanceof LostWithHost) || this.#servers === undefined) return false;
    await this.#servers.suspect(origin);
    // That check may have run on the control connection the same death tore down (a torn connection alone does
    // not eject a host heard from just now): once more, on a new connection, which a dead process refuses.
    if (this.#servers.serves(origin, lang)) await this.#servers.suspect(origin);
    return !this.#servers.serves(origin, lang);
  }

  /**
   * The least loaded host that may take `lang`, other than `failed` (a retry); undefined when a retry has nowhere
   * else to go. @throws ServeError when no host may take it now.
   */
  #choose(lang: string, failed: string | undefined): string | undefined {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN', 'Router is shutting down.');
    const route: Route = this.#servers?.route(lang) ?? { kind: 'hosts', origins: [this.#url!] };
    switch (route.kind) {
      case 'none':
        throw new ServeError('UPSTREAM_UNAVAILABLE', 'No model server is known: MODEL_SERVERS resolves to no address.');
      case 'language-down':
        throw new ServeError('NO_WORKER', `Model ${lang} is unavailable now, ${route.reason}; retry later.`, {
          retryAfterS: NO_HOST_RETRY_AFTER_S,
        });
      case 'unreachable':
        // Nothing answers: one try, as with a single model server (a refusal is a 502 in milliseconds).
        if (failed !== undefined) return undefined;
        break;
      case 'hosts':
        break;
    }
    const origins = failed === undefined ? route.origins : route.origins.filter((o) => o !== failed);
    if (origins.length === 0) return undefined;
    return leastOutstanding(origins, this.#turn++, (origin) => this.#hosts.get(origin)?.outstanding ?? 0);
  }

  #hostLanes(origin: string): HostLanes {
    let host = this.#hosts.get(origin);
    if (host === undefined) {
      host = { lanes: new Map(), outstanding: 0, gone: new AbortController() };
      this.#hosts.set(origin, host);
    }
    return host;
  }

  #lane(host: HostLanes, origin: string, tgtLang: string): Lane {
    let lane = host.lanes.get(tgtLang);
    if (lane === undefined) {
      lane = createLane(origin, {
        connections: this.#connections,
        queue: this.#queue,
        connectTimeoutMs: this.#connectTimeoutMs,
        timeoutMs: this.#timeoutMs,
      });
      host.lanes.set(tgtLang, lane);
    }
    return lane;
  }

  /** One try on one host. @throws NotReached when the request never reached a worker there. */
  async #attempt(origin: string, request: TranslateRequest): Promise<TranslateReply> {
    const host = this.#hostLanes(origin);
    const lane = this.#lane(host, origin, request.tgtLang);
    host.outstanding++;
    try {
      let release;
      try {
        // Only a request that has to wait listens for the host's going (a signal combined per waiter).
        const mustWait = lane.gate.stats.active >= lane.gate.limit;
        if (mustWait) {
          const refusal = refusingNow(lane);
          if (refusal !== undefined) throw new NotReached(refusal);
        }
        const signal =
          mustWait && request.signal !== undefined
            ? AbortSignal.any([request.signal, host.gone.signal])
            : mustWait
              ? host.gone.signal
              : request.signal;
        const entered = lane.gate.enter(signal);
        release = typeof entered === 'function' ? entered : await entered;
      } catch (err) {
        if (!(err instanceof GateRefusedError)) throw err;
        if (err.reason === 'aborted') {
          if (request.signal?.aborted) throw request.signal.reason ?? err;
          throw new NotReached(host.gone.signal.reason);
        }
        const refusal = refusingNow(lane);
        if (refusal !== undefined) throw new NotReached(refusal);
        throw new ServeError(
          'QUEUE_FULL',
          `Router queue of model ${request.tgtLang} is full (${this.#connections} in flight, ${this.#queue} waiting), retry later.`,
          { retryAfterS: LANE_RETRY_AFTER_S },
        );
      }
      const sentAt = performance.now();
      try {
        const reply = await this.#exchange(origin, lane.pool, request);
        laneAnswered(lane, sentAt);
        return reply;
      } catch (err) {
        laneFailed(lane, sentAt, err);
        throw this.#judge(origin, err);
      } finally {
        release();
      }
    } finally {
      host.outstanding--;
    }
  }

  /** What a failed exchange says about its host, and whether another host may take the request (retry.ts). */
  #judge(origin: string, err: unknown): unknown {
    return judgeFailure(origin, err, this.#servers);
  }

  /**
   * Forget a host's lanes: the requests still waiting in them go to another replica (or get `reason`). In flight:
   * a silent host's will not be answered (it is cut off, or its machine died), so they are failed now with `reason`
   * rather than after `timeoutMs` ('fail'); a host removed from MODEL_SERVERS finishes what it has ('finish').
   */
  #dropHost(origin: string, reason: ServeError, inFlight: 'fail' | 'finish'): void {
    const host = this.#hosts.get(origin);
    if (host === undefined) return;
    this.#hosts.delete(origin);
    host.gone.abort(reason);
    for (const lane of host.lanes.values()) {
      const pool = lane.pool;
      void (inFlight === 'fail' ? pool.destroy(reason) : pool.close()).catch(() => undefined);
    }
  }

  /**
   * One request and its whole answer, within one deadline (`timeoutMs` from the send, not reset by each chunk of
   * the body), reading at most `maxResponseBytes`; a 200 must be JSON. What a model server sends otherwise is its
   * failure: 502, or 504 past the deadline.
   */
  async #exchange(origin: string, pool: Pool, request: TranslateRequest): Promise<TranslateReply> {
    const json = JSON.stringify(request.body);
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    const signal = request.signal === undefined ? deadline : AbortSignal.any([request.signal, deadline]);
    const overDeadline = (err: unknown) =>
      deadline.aborted && !request.signal?.aborted
        ? new ServeError('REQUEST_TIMEOUT', `Model server did not answer within ${this.#timeoutMs / 1000} s.`, {
            cause: err,
          })
        : transportError(err, this.#timeoutMs);
    let response;
    try {
      response = await this.#send(pool, request, json, false, signal);
      this.#servers?.heard(origin);
      if (response.statusCode === 401 && this.#authorization) {
        await response.body.dump();
        response = await this.#send(pool, request, json, true, signal);
      }
    } catch (err) {
      throw err instanceof ServeError ? err : overDeadline(err);
    }
    let body: Uint8Array<ArrayBuffer>;
    try {
      body = await readCapped(response.body, header(response.headers['content-length']), this.#maxResponseBytes);
    } catch (err) {
      throw err instanceof ServeError ? err : overDeadline(err);
    }
    if (response.statusCode !== 200) {
      throw upstreamError(response.statusCode, body, {
        code: header(response.headers[ERROR_CODE_HEADER]),
        retryAfter: header(response.headers['retry-after']),
        reachedWorker: header(response.headers[REACHED_WORKER_HEADER]),
      });
    }
    if (!isJsonAnswer(header(response.headers['content-type']), body)) {
      throw new ServeError('UPSTREAM_UNAVAILABLE', 'Model server answered 200 with a body that is not JSON.');
    }
    this.#servers?.served(origin, request.tgtLang);
    const headers: Record<string, string> = {};
    for (const name of PASSTHROUGH_HEADERS) {
      const value = header(response.headers[name]);
      if (value !== undefined) headers[name] = value;
    }
    // Which model server answered (worker ids repeat across hosts): for clients and the router's log line.
    headers['x-model-server'] = new URL(origin).host;
    return { body, headers };
  }

  async #send(pool: Pool, request: TranslateRequest, body: string, refreshKey: boolean, signal: AbortSignal) {
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-request-id': request.requestId };
    if (request.cacheControl !== undefined) headers['cache-control'] = request.cacheControl;
    const authorization = this.#authorization?.(refreshKey);
    if (authorization !== undefined) headers.authorization = authorization;
    try {
      return await pool.request({
        method: 'POST',
        path: `/predictions/${encodeURIComponent(request.tgtLang)}`,
        headers,
        body,
        signal,
      });
    } catch (err) {
      // The caller tells its deadline from the client's abort; an abort is rethrown as it is.
      if (signal.aborted) throw err;
      throw transportError(err, this.#timeoutMs);
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
    const pools = [...this.#hosts.values()].flatMap((h) => [...h.lanes.values()].map((l) => l.pool));
    const dispatchers = this.#control === undefined ? pools : [this.#control, ...pools];
    await Promise.all([
      ...dispatchers.map((d) => (d.closed || d.destroyed ? undefined : d.close())),
      this.#servers?.close(),
    ]);
  }
}
