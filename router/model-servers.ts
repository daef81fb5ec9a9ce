/**
 * @module router/model-servers — which model servers exist, which of them answer, and which languages each serves:
 * the router's view of MODEL_SERVERS, kept current while it runs. Mechanism only; router/upstream.ts decides where
 * a request goes from this view (`route`).
 *
 * Sources are base URLs. An IP literal is one host; a name is resolved to all its addresses, each a host of its own
 * (a Kubernetes headless Service resolves to one address per ready pod), again every `refreshIntervalMs`, so a pod
 * or a machine added or removed is picked up without a restart.
 *
 * What a host serves is asked of the host itself, on its inference port, the one port a model server exposes to
 * other machines (management stays on loopback): `GET /v2/models/{lang}/ready` for each language the router
 * accepts — 200 ready, 400 registered but not ready (loading, scaled to 0), 404 not registered. No map is kept by
 * hand, and a language registered or unregistered on a host is seen at the next refresh.
 *
 * Health, per host (one state, changed only in `#admit` and `#eject`, which log the transition):
 * ```
 *   unknown ──/ping 200 + languages read──▶ healthy ──silent, refused, /ping not 200──▶ ejected
 *      │                                     ▲                                         │
 *      └──────────/ping fails───────▶ ejected └─────/ping 200 + languages read──────────┘
 * ```
 * A probe is `GET /ping` on the host's own control connection (never behind translations in a lane) every
 * `probeIntervalMs`; one probe at a time per host. A busy host is not a dead one (Envoy's outlier detection and
 * nginx's max_fails judge a host by its answers, not by one probe): any HTTP answer from the host — a translation,
 * a 503 refusal, a probe — is heard (`heard`, from router/upstream.ts for traffic), and a probe's deadline is
 * `probeTimeoutMs` of *silence* since it was sent, not of its own wait: a host whose `/ping` waits seconds behind
 * ten thousand clients (bench figure 11) while it keeps answering requests stays in, and so do the requests it
 * holds. Ejection, and what it means for the requests the host holds in flight:
 * - silent (nothing heard for `probeTimeoutMs` while a probe was owed): a partition or a dead machine, whose
 *   in-flight requests will not be answered: router/upstream.ts fails them now (`onSilent`) rather than after its
 *   timeout. Bound: `probeIntervalMs + probeTimeoutMs` after the host went silent (1.5 s by default);
 * - a refused connection (from a probe or from traffic: certain, at once), or `/ping` answered other than 200 (the
 *   model server says it is unhealthy): nothing new goes there, and what it holds in flight runs on — a draining
 *   host answers it, a dead process's connections fail each request on its own.
 * A suspicion from traffic (a reset, a closed socket) probes at once rather than ejecting on one error, so a single
 * connection torn down by a keep-alive race never takes a healthy host out.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Client } from 'undici';
import type { Logger } from '../common/logger.js';

export type HostHealth = 'unknown' | 'healthy' | 'ejected';

/** One model server as the router sees it. */
export interface ModelServerHost {
  /** `http://address:port`: the base URL requests are sent to. */
  readonly origin: string;
  readonly health: HostHealth;
  /** Languages whose model is ready on it (a worker has loaded it). */
  readonly ready: ReadonlySet<string>;
  /** Languages registered on it, ready or not. */
  readonly registered: ReadonlySet<string>;
}

/** Where a request for one language may go (router/upstream.ts picks among `origins`). */
export type Route =
  /** Healthy hosts where the language is ready (else where its worker is restarting: `readySinceAdmitted`). */
  | { kind: 'hosts'; origins: readonly string[] }
  /** No host has answered since the router started: every known host, tried anyway (a refusal is a fast 502). */
  | { kind: 'unreachable'; origins: readonly string[] }
  /**
   * No answering host has the language ready (those that serve it are down or still loading it, or it is not
   * registered anywhere yet): 503 + Retry-After at once. `reason` says which, without addresses.
   */
  | { kind: 'language-down'; reason: string }
  /** MODEL_SERVERS resolved to no address. */
  | { kind: 'none' };

export interface ModelServersOptions {
  /** MODEL_SERVERS: base URLs, `http://host:port`; a name stands for every address it resolves to. */
  sources: readonly string[];
  /** Languages the router accepts (`tgt_lang`): the ones asked of every host. */
  languages: readonly string[];
  /** Health probe period per host, ms. Default 500. */
  probeIntervalMs?: number;
  /** A probe (and each language query) not answered within this is a failure, ms. Default 1000. */
  probeTimeoutMs?: number;
  /** Period of name resolution and of re-reading every healthy host's languages, ms. Default 2000. */
  refreshIntervalMs?: number;
  /** TOKEN_AUTH: the inference key header (`/v2/models/…/ready` needs it; `/ping` does not). */
  authorization?: (refresh: boolean) => string | undefined;
  logger?: Pick<Logger, 'info' | 'warn'>;
  /** A host went silent: its in-flight requests will not be answered (router/upstream.ts fails them with `error`). */
  onSilent?: (origin: string, error: SilentHostError) => void;
  /** A host left MODEL_SERVERS' resolution: nothing new goes to it. */
  onRemove?: (origin: string) => void;
  /** Name resolution (tests resolve names of their own). Default: the system resolver, every address. */
  resolve?: (hostname: string) => Promise<string[]>;
}

interface HostState {
  origin: string;
  health: HostHealth;
  ready: Set<string>;
  registered: Set<string>;
  /**
   * Languages it has had ready since it was last admitted. One of them registered but not ready now is a worker
   * restarting: the model server queues its requests until the worker is back, so the host keeps getting them.
   */
  readySinceAdmitted: Set<string>;
  control: Client;
  /** When anything was last heard from it (performance.now): a probe's answer, or traffic's (`heard`). */
  heardAt: number;
  /** A probe waited past `probeTimeoutMs` while the host answered other requests; cleared by a prompt probe. */
  busy: boolean;
  /** `onSilent` was called and the host has not been admitted since. */
  silent: boolean;
  /** The probe or language read under way; at most one per host. */
  probing: Promise<void> | undefined;
  /** A language read was asked for and has not started yet. */
  languagesWanted: boolean;
  /** `recheck`: per language, the check under way, or when (performance.now) the last one was sent. */
  rechecks: Map<string, Promise<void> | number>;
}

/** `recheck` asks one host about one language at most this often, ms. */
const RECHECK_INTERVAL_MS = 100;

/** GETs in flight at once on a control connection: a language read sends one per language. */
const CONTROL_PIPELINING = 32;

/** Resolution failures that mean "the name has no address now" (a headless Service with no ready pod). */
const NO_ADDRESS_CODES = new Set(['ENOTFOUND', 'ENODATA']);

export class ModelServers {
  readonly #sources: { url: URL; literal: boolean }[];
  readonly #languages: readonly string[];
  readonly #probeIntervalMs: number;
  readonly #probeTimeoutMs: number;
  readonly #authorization: ModelServersOptions['authorization'];
  readonly #logger: ModelServersOptions['logger'];
  readonly #onSilent: ModelServersOptions['onSilent'];
  readonly #onRemove: ModelServersOptions['onRemove'];
  readonly #resolve: (hostname: string) => Promise<string[]>;
  /** Hosts by origin; changed by `#refresh` (add, remove) only. */
  readonly #hosts = new Map<string, HostState>();
  /** Each source's last resolution, kept when a lookup fails for a reason other than "no address". */
  readonly #resolved = new Map<string, string[]>();
  readonly #timers: NodeJS.Timeout[] = [];
  #refreshing: Promise<void> | undefined;
  #closed = false;

  constructor(options: ModelServersOptions) {
    if (options.sources.length === 0) throw new RangeError('ModelServers needs at least one source');
    this.#sources = options.sources.map((s) => {
      const url = new URL(s);
      return { url, literal: isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0 };
    });
    this.#languages = options.languages;
    this.#probeIntervalMs = options.probeIntervalMs ?? 500;
    this.#probeTimeoutMs = options.probeTimeoutMs ?? 1_000;
    this.#authorization = options.authorization;
    this.#logger = options.logger;
    this.#onSilent = options.onSilent;
    this.#onRemove = options.onRemove;
    this.#resolve = options.resolve ?? (async (name) => (await lookup(name, { all: true })).map((a) => a.address));
    // Literal sources are known at once, so a request that comes before the first resolution has somewhere to go.
    for (const source of this.#sources) if (source.literal) this.#add(source.url.origin);
    const refreshIntervalMs = options.refreshIntervalMs ?? 2_000;
    this.#timers.push(
      setInterval(() => this.#probeAll(), this.#probeIntervalMs).unref(),
      setInterval(() => void this.refresh(), refreshIntervalMs).unref(),
    );
    void this.refresh();
  }

  /** Every known host. */
  get hosts(): ModelServerHost[] {
    return [...this.#hosts.values()].map(({ origin, health, ready, registered }) => ({
      origin,
      health,
      ready,
      registered,
    }));
  }

  /**
   * Where a request for `lang` may go now (see `Route`). Synchronous: it reads the current view only. Only hosts
   * that report `lang` ready take it: a host back from a restart with some of its models still loading (or none
   * registered yet) gets only the languages it reports ready, and a language no answering host has ready is
   * refused at once, as unavailable for now, never sent where it would be answered 404. The one exception: when no
   * host has it ready, a host that had it ready since it was admitted and still has it registered (its worker is
   * restarting) takes it, and its queue holds the requests until the worker is back.
   */
  route(lang: string): Route {
    if (this.#hosts.size === 0) return { kind: 'none' };
    const ready: string[] = [];
    const restarting: string[] = [];
    let healthy = 0;
    let down = 0;
    let loading = 0;
    let without = 0;
    for (const host of this.#hosts.values()) {
      if (host.health === 'healthy') {
        healthy++;
        if (host.ready.has(lang)) {
          ready.push(host.origin);
          continue;
        }
        if (host.registered.has(lang) && host.readySinceAdmitted.has(lang)) restarting.push(host.origin);
        else if (host.registered.has(lang)) loading++;
        else without++;
      } else if (host.health === 'ejected' && host.registered.has(lang)) {
        down++;
      }
    }
    if (ready.length > 0) return { kind: 'hosts', origins: ready };
    // Its worker is restarting there (a crash, a scale): the model server holds the requests in its queue, and its
    // queue budget answers 503 itself when the wait would be too long.
    if (restarting.length > 0) return { kind: 'hosts', origins: restarting };
    // No host has ever been heard from (all down since this router started): try one, a refusal is a fast 502.
    if (healthy === 0 && down === 0) return { kind: 'unreachable', origins: [...this.#hosts.keys()] };
    const counts = [
      down > 0 ? `${down} down` : '',
      loading > 0 ? `${loading} still loading it` : '',
      without > 0 ? `${without} answering without it` : '',
    ].filter(Boolean);
    return { kind: 'language-down', reason: `no model server has it ready: ${counts.join(', ')}` };
  }

  /** Traffic says the host refused a connection: eject it now; the probes readmit it. */
  refused(origin: string, reason: string): void {
    const host = this.#hosts.get(origin);
    if (host !== undefined) this.#eject(host, reason, undefined);
  }

  /** Traffic got an HTTP answer (any status) from the host: it is alive, whatever its `/ping` takes. */
  heard(origin: string): void {
    const host = this.#hosts.get(origin);
    if (host !== undefined) host.heardAt = performance.now();
  }

  /**
   * Traffic got a translation of `lang` from the host: it serves `lang`, whatever its last language read said (a
   * read made while it was still registering its models after a restart misses some). Routing counts it at once
   * — so were the host cut off now, `lang` would be refused as down rather than sent to hosts that never had it —
   * and a fresh read confirms the rest.
   */
  served(origin: string, lang: string): void {
    const host = this.#hosts.get(origin);
    if (host === undefined || host.health !== 'healthy' || host.ready.has(lang)) return;
    host.ready.add(lang);
    host.readySinceAdmitted.add(lang);
    host.registered.add(lang);
    void this.#probe(host, true);
  }

  /**
   * Traffic saw something odd (a reset, a 404 for a language it listed): probe it and re-read its languages now;
   * resolves when that check is done.
   */
  suspect(origin: string): Promise<void> {
    const host = this.#hosts.get(origin);
    return host === undefined ? Promise.resolve() : this.#probe(host, true);
  }

  /**
   * Ask each healthy host that does not list `lang` ready about it now (`/v2/models/{lang}/ready`, one GET), so a
   * language registered or loaded since the last read is routed on its first request, not at the next period.
   * One question per host and language at a time, at most every 100 ms; a failed one changes nothing (the probes
   * judge health). Resolves when the answers are in.
   */
  async recheck(lang: string): Promise<void> {
    const asked: Promise<void>[] = [];
    for (const host of this.#hosts.values()) {
      if (host.health !== 'healthy' || host.ready.has(lang)) continue;
      const last = host.rechecks.get(lang);
      if (last instanceof Promise) {
        asked.push(last);
        continue;
      }
      if (last !== undefined && performance.now() - last < RECHECK_INTERVAL_MS) continue;
      const sentAt = performance.now();
      const check = this.#get(host, `/v2/models/${encodeURIComponent(lang)}/ready`, true)
        .then((status) => {
          if (host.health !== 'healthy') return;
          if (status === 200) {
            host.ready.add(lang);
            host.readySinceAdmitted.add(lang);
          }
          if (status === 200 || status === 400) host.registered.add(lang);
        })
        .catch(() => undefined)
        .finally(() => host.rechecks.set(lang, sentAt));
      host.rechecks.set(lang, check);
      asked.push(check);
    }
    await Promise.all(asked);
  }

  /** Whether `origin` is healthy with `lang` ready now. */
  serves(origin: string, lang: string): boolean {
    const host = this.#hosts.get(origin);
    return host !== undefined && host.health === 'healthy' && host.ready.has(lang);
  }

  /** Resolve every source again and probe the hosts; resolves when done (tests await it). */
  refresh(): Promise<void> {
    this.#refreshing ??= this.#refresh().finally(() => (this.#refreshing = undefined));
    return this.#refreshing;
  }

  async #refresh(): Promise<void> {
    const origins = new Set<string>();
    await Promise.all(
      this.#sources.map(async ({ url, literal }) => {
        if (literal) {
          origins.add(url.origin);
          return;
        }
        let addresses: string[];
        try {
          addresses = await this.#resolve(url.hostname);
        } catch (err) {
          const code = (err as { code?: unknown }).code;
          if (!(typeof code === 'string' && NO_ADDRESS_CODES.has(code))) {
            this.#logger?.warn({ source: url.origin, err: (err as Error).message }, 'model server name lookup failed');
            addresses = this.#resolved.get(url.href) ?? [];
          } else {
            addresses = [];
          }
        }
        this.#resolved.set(url.href, addresses);
        for (const address of addresses) {
          const host = isIP(address) === 6 ? `[${address}]` : address;
          origins.add(`${url.protocol}//${host}:${url.port || '80'}`);
        }
      }),
    );
    if (this.#closed) return;
    for (const origin of origins) if (!this.#hosts.has(origin)) this.#add(origin);
    for (const [origin, host] of this.#hosts) {
      if (origins.has(origin)) continue;
      this.#hosts.delete(origin);
      this.#logger?.info({ modelServer: origin }, 'model server removed (no longer in MODEL_SERVERS)');
      void host.control.close().catch(() => undefined);
      this.#onRemove?.(origin);
    }
    // Languages are re-read on every healthy host; the others are probed (and read when they answer).
    await Promise.all([...this.#hosts.values()].map((h) => this.#probe(h, true)));
  }

  #add(origin: string): void {
    const host: HostState = {
      origin,
      health: 'unknown',
      ready: new Set(),
      registered: new Set(),
      readySinceAdmitted: new Set(),
      heardAt: -Infinity,
      busy: false,
      silent: false,
      control: this.#controlClient(origin),
      probing: undefined,
      languagesWanted: false,
      rechecks: new Map(),
    };
    this.#hosts.set(origin, host);
    this.#logger?.info({ modelServer: origin }, 'model server added');
  }

  /**
   * A host's own connection for probes and language reads, never shared with translations. Pipelined: a read of
   * every language is one round trip, not one per language, so a distant host's reads fit the probe limit.
   */
  #controlClient(origin: string): Client {
    return new Client(origin, { connect: { timeout: this.#probeTimeoutMs }, pipelining: CONTROL_PIPELINING });
  }

  /** A host with languages registered but not ready yet (loading after a restart) has them re-read each probe. */
  #probeAll(): void {
    for (const host of this.#hosts.values()) {
      void this.#probe(host, host.health === 'healthy' && host.registered.size > host.ready.size);
    }
  }

  /**
   * Ping the host; read its languages when asked or when it is not yet healthy. One check at a time per host; a
   * read asked for while a plain probe runs is done right after it, never dropped.
   */
  #probe(host: HostState, readLanguages: boolean): Promise<void> {
    if (readLanguages) host.languagesWanted = true;
    host.probing ??= this.#checkWhileWanted(host).finally(() => (host.probing = undefined));
    return host.probing;
  }

  async #checkWhileWanted(host: HostState): Promise<void> {
    do {
      const read = host.languagesWanted;
      host.languagesWanted = false;
      await this.#check(host, read);
    } while (host.languagesWanted && !this.#closed && this.#hosts.get(host.origin) === host);
  }

  async #check(host: HostState, readLanguages: boolean): Promise<void> {
    try {
      const status = await this.#get(host, '/ping', false);
      if (status !== 200) throw new Error(`/ping answered ${status}`);
      if (readLanguages || host.health !== 'healthy') await this.#readLanguages(host);
    } catch (err) {
      if (this.#hosts.get(host.origin) !== host) return;
      const code = (err as { code?: unknown }).code;
      // A torn control connection (a reset, a keep-alive race) says nothing while the host answers others.
      const answering = performance.now() - host.heardAt < this.#probeTimeoutMs;
      if (code === 'ECONNREFUSED' || err instanceof SilentHostError || !answering || !isTransportCode(code)) {
        this.#eject(host, (err as Error).message, err instanceof SilentHostError ? err : undefined);
      }
      return;
    }
    if (this.#hosts.get(host.origin) === host) this.#admit(host);
  }

  async #readLanguages(host: HostState): Promise<void> {
    const ready = new Set<string>();
    const registered = new Set<string>();
    await Promise.all(
      this.#languages.map(async (lang) => {
        let status = await this.#get(host, `/v2/models/${encodeURIComponent(lang)}/ready`, true);
        // The model server writes new keys at each start: read the key file again, once.
        if (status === 401 && this.#authorization) {
          status = await this.#get(host, `/v2/models/${encodeURIComponent(lang)}/ready`, true, true);
        }
        if (status === 200) ready.add(lang);
        if (status === 200 || status === 400) registered.add(lang);
        else if (status !== 404) throw new Error(`/v2/models/${lang}/ready answered ${status}`);
      }),
    );
    host.ready = ready;
    host.registered = registered;
    if (host.health === 'healthy') for (const lang of ready) host.readySinceAdmitted.add(lang);
  }

  /**
   * One GET on the control connection, given up only when the host has been silent for `probeTimeoutMs` since it
   * was sent: while traffic is answered the deadline moves on to `probeTimeoutMs` after the last answer.
   * @throws SilentHostError when given up; the transport's error when the connection fails.
   */
  async #get(host: HostState, path: string, auth: boolean, refreshKey = false): Promise<number> {
    const headers: Record<string, string> = {};
    const authorization = auth ? this.#authorization?.(refreshKey) : undefined;
    if (authorization !== undefined) headers.authorization = authorization;
    const sentAt = performance.now();
    const controller = new AbortController();
    let done = false;
    let timer: NodeJS.Timeout | undefined;
    const watch = (delayMs: number) => {
      // Judged after the event loop's I/O phase (setImmediate runs after it): when this process was itself too
      // busy to run the timer on time, answers that arrived meanwhile are read before silence is concluded.
      timer = setTimeout(() => setImmediate(judge), delayMs);
    };
    const judge = () => {
      if (done) return;
      const silentMs = performance.now() - Math.max(host.heardAt, sentAt);
      if (silentMs >= this.#probeTimeoutMs) {
        controller.abort(new SilentHostError(path, silentMs));
        return;
      }
      if (!host.busy) {
        host.busy = true;
        this.#logger?.warn(
          { modelServer: host.origin, path, waitedMs: Math.round(performance.now() - sentAt) },
          'model server slow to answer its probe while it answers requests: busy, kept in',
        );
      }
      watch(this.#probeTimeoutMs - silentMs);
    };
    watch(this.#probeTimeoutMs);
    try {
      const response = await host.control.request({ method: 'GET', path, headers, signal: controller.signal });
      await response.body.dump();
      host.heardAt = performance.now();
      if (host.busy && host.heardAt - sentAt < this.#probeTimeoutMs) {
        host.busy = false;
        this.#logger?.info({ modelServer: host.origin }, 'model server answers its probe promptly again');
      }
      return response.statusCode;
    } finally {
      done = true;
      clearTimeout(timer);
    }
  }

  #admit(host: HostState): void {
    host.silent = false;
    if (host.health === 'healthy') return;
    const from = host.health;
    host.health = 'healthy';
    host.readySinceAdmitted = new Set(host.ready);
    this.#logger?.info(
      { modelServer: host.origin, from, ready: [...host.ready], registered: [...host.registered] },
      from === 'ejected' ? 'model server readmitted' : 'model server healthy',
    );
  }

  /** Take the host out of routing; `silent` (its error) when it stopped answering altogether (module doc). */
  #eject(host: HostState, reason: string, silent: SilentHostError | undefined): void {
    if (this.#closed) return;
    if (host.health !== 'ejected') {
      const from = host.health;
      host.health = 'ejected';
      host.busy = false;
      this.#logger?.warn({ modelServer: host.origin, from, reason }, 'model server ejected');
      // The control connection may sit on a silent peer: a fresh one lets the next probe fail or pass on its own.
      const stale = host.control;
      host.control = this.#controlClient(host.origin);
      void stale.destroy().catch(() => undefined);
    }
    // Also when ejected before for another reason (a refusal, then a partition): whatever it holds will not come.
    if (silent !== undefined && !host.silent) {
      host.silent = true;
      this.#onSilent?.(host.origin, silent);
    }
  }

  /**
   * Whether any host answers (the router's `/health`): a healthy one heard from within `timeoutMs` does (a busy
   * host's `/ping` may wait behind its traffic); else each is asked `/ping` now, 200 within `timeoutMs`.
   */
  async anyAnswers(timeoutMs: number): Promise<boolean> {
    const now = performance.now();
    for (const host of this.#hosts.values()) {
      if (host.health === 'healthy' && now - host.heardAt < timeoutMs) return true;
    }
    const answers = [...this.#hosts.values()].map(async (host) => {
      const status = await pingStatus(host.control, timeoutMs);
      if (status !== 200) throw new Error(`/ping answered ${status}`);
    });
    return Promise.any(answers).then(
      () => true,
      () => false,
    );
  }

  /** Stop probing and close the control connections. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    for (const timer of this.#timers) clearInterval(timer);
    await Promise.all([...this.#hosts.values()].map((h) => h.control.destroy().catch(() => undefined)));
  }
}

/** A host said nothing at all — to the probe or to any request — for the probe limit since the probe was sent. */
/** `GET /ping` on `client`, answered within `timeoutMs`: its status. @throws the transport's error or the timeout */
export async function pingStatus(client: Client, timeoutMs: number): Promise<number> {
  const response = await client.request({
    method: 'GET',
    path: '/ping',
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    signal: AbortSignal.timeout(timeoutMs),
  });
  await response.body.dump();
  return response.statusCode;
}

export class SilentHostError extends Error {
  readonly silentMs: number;
  constructor(path: string, silentMs: number) {
    super(`nothing heard from it for ${Math.round(silentMs)} ms (${path} unanswered)`);
    this.name = 'SilentHostError';
    this.silentMs = silentMs;
  }
}

/** undici's and Node's codes for a failed exchange (as opposed to an unexpected answer). */
function isTransportCode(code: unknown): boolean {
  return typeof code === 'string' && (code.startsWith('UND_ERR_') || code.startsWith('E'));
}
