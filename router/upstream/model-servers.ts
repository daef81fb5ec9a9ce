/**
 * @module router/upstream/model-servers — which model servers exist, which of them answer, and which languages each serves:
 * the router's view of MODEL_SERVERS, kept current while it runs. Mechanism only; router/upstream/upstream.ts decides where
 * a request goes from this view (`route`). Its parts: router/upstream/hosts/ discovery, languages, probe, route.
 *
 * Health, per host (one state, changed only in `#admit` and `#eject`, which log the transition):
 * ```
 *   unknown ──/ping 200 + languages read──▶ healthy ──silent, refused, /ping not 200──▶ ejected
 *      │                                     ▲                                         │
 *      └──────────/ping fails───────▶ ejected └─────/ping 200 + languages read──────────┘
 * ```
 * A probe is `GET /ping` on the host's own control connection every `probeIntervalMs`; one probe at a time per
 * host. Any HTTP answer from the host is heard (`heard`, from router/upstream/upstream.ts for traffic), so a busy host stays
 * in (router/upstream/hosts/probe.ts). Ejection, and what it means for the requests the host holds in flight:
 * - silent (nothing heard for `probeTimeoutMs` while a probe was owed): a partition or a dead machine, whose
 *   in-flight requests will not be answered: router/upstream/upstream.ts fails them now (`onSilent`) rather than after its
 *   timeout. Bound: `probeIntervalMs + probeTimeoutMs` after the host went silent (1.5 s by default);
 * - a refused connection (from a probe or from traffic: certain, at once), or `/ping` answered other than 200 (the
 *   model server says it is unhealthy): nothing new goes there, and what it holds in flight runs on — a draining
 *   host answers it, a dead process's connections fail each request on its own.
 * A suspicion from traffic (a reset, a closed socket) probes at once rather than ejecting on one error, so a single
 * connection torn down by a keep-alive race never takes a healthy host out; a probe torn itself is tried once more
 * on a new connection, and a host that tears that one too is ejected.
 */
import type { Logger } from '../../common/logger.js';
import { NOT_CONNECTED_CODES } from './errors.js';
import { Sources } from './hosts/discovery.js';
import { HostState, type ModelServerHost } from './hosts/host.js';
import { readLanguages, recheck } from './hosts/languages.js';
import { controlClient, controlGet, isTransportCode, pingStatus, SilentHostError } from './hosts/probe.js';
import type { ControlOptions } from './hosts/probe.js';
import { routeOf, type Route } from './hosts/route.js';

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
  /** A host went silent: its in-flight requests will not be answered (router/upstream/upstream.ts fails them with `error`). */
  onSilent?: (origin: string, error: SilentHostError) => void;
  /** A host left MODEL_SERVERS' resolution: nothing new goes to it. */
  onRemove?: (origin: string) => void;
  /** Name resolution (tests resolve names of their own). Default: the system resolver, every address. */
  resolve?: (hostname: string) => Promise<string[]>;
}

export class ModelServers {
  readonly #sources: Sources;
  readonly #languages: readonly string[];
  readonly #control: ControlOptions;
  readonly #onSilent: ModelServersOptions['onSilent'];
  readonly #onRemove: ModelServersOptions['onRemove'];
  /** Hosts by origin; changed by `#refresh` (add, remove) only. */
  readonly #hosts = new Map<string, HostState>();
  readonly #timers: NodeJS.Timeout[] = [];
  #refreshing: Promise<void> | undefined;
  #closed = false;

  constructor(options: ModelServersOptions) {
    if (options.sources.length === 0) throw new RangeError('ModelServers needs at least one source');
    this.#sources = new Sources(options.sources, options.resolve, options.logger);
    this.#languages = options.languages;
    this.#control = {
      probeTimeoutMs: options.probeTimeoutMs ?? 1_000,
      authorization: options.authorization,
      logger: options.logger,
    };
    this.#onSilent = options.onSilent;
    this.#onRemove = options.onRemove;
    // Literal sources are known at once, so a request that comes before the first resolution has somewhere to go.
    for (const origin of this.#sources.literalOrigins) this.#add(origin);
    this.#timers.push(
      setInterval(() => this.#probeAll(), options.probeIntervalMs ?? 500).unref(),
      setInterval(() => void this.refresh(), options.refreshIntervalMs ?? 2_000).unref(),
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

  /** Where a request for `lang` may go now (router/upstream/hosts/route.ts). Synchronous: it reads the current view only. */
  route(lang: string): Route {
    return routeOf(this.#hosts, lang);
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
   * and a fresh read confirms the rest. A host not admitted (its first probe was refused while it was starting, and
   * the next is a probe period away) is checked now: until then it counts as never heard from, and were it to die
   * meanwhile, its languages would be a 502 rather than a 503 + Retry-After. Once until it is next taken out: a
   * host that fails that check (its /ping says Unhealthy) is left to the periodic probe, not checked per answer.
   */
  served(origin: string, lang: string): void {
    const host = this.#hosts.get(origin);
    if (host === undefined) return;
    if (host.health !== 'healthy') {
      if (host.checkedForTraffic) return;
      host.checkedForTraffic = true;
      // A read asked for runs after a check already under way (one that may have started before this answer).
      return void this.#probe(host, true);
    }
    if (host.ready.has(lang)) return;
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

  /** Ask the healthy hosts that do not list `lang` ready about it now (router/upstream/hosts/languages.ts `recheck`). */
  recheck(lang: string): Promise<void> {
    return recheck(this.#hosts.values(), lang, this.#control);
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
    const origins = await this.#sources.origins();
    if (this.#closed) return;
    for (const origin of origins) if (!this.#hosts.has(origin)) this.#add(origin);
    for (const [origin, host] of this.#hosts) {
      if (origins.has(origin)) continue;
      this.#hosts.delete(origin);
      this.#control.logger?.info({ modelServer: origin }, 'model server removed (no longer in MODEL_SERVERS)');
      void host.control.close().catch(() => undefined);
      this.#onRemove?.(origin);
    }
    // Languages are re-read on every healthy host; the others are probed (and read when they answer).
    await Promise.all([...this.#hosts.values()].map((h) => this.#probe(h, true)));
  }

  #add(origin: string): void {
    this.#hosts.set(origin, new HostState(origin, controlClient(origin, this.#control.probeTimeoutMs)));
    this.#control.logger?.info({ modelServer: origin }, 'model server added');
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
  #probe(host: HostState, read: boolean): Promise<void> {
    if (read) host.languagesWanted = true;
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

  async #check(host: HostState, read: boolean, again = false): Promise<void> {
    try {
      const status = await controlGet(host, '/ping', this.#control, false);
      if (status !== 200) throw new Error(`/ping answered ${status}`);
      if (read || host.health !== 'healthy') await readLanguages(host, this.#languages, this.#control);
    } catch (err) {
      if (this.#hosts.get(host.origin) !== host) return;
      const code = (err as { code?: unknown }).code;
      const transport = isTransportCode(code) && !(err instanceof SilentHostError) && code !== 'ECONNREFUSED';
      if (transport && performance.now() - host.heardAt < this.#control.probeTimeoutMs) {
        // While the host answers others, a connection not made in time says it is busy, and a torn one (a reset,
        // a keep-alive race) nothing yet: the check runs once more on a new connection (the torn one is gone). A
        // host that tears that one too is going (a port still open while its process exits, a process that dies
        // as it starts), however recently heard.
        if (NOT_CONNECTED_CODES.has(code as string)) return;
        if (!again) return this.#check(host, read, true);
      }
      this.#eject(host, (err as Error).message, err instanceof SilentHostError ? err : undefined);
      return;
    }
    if (this.#hosts.get(host.origin) === host) this.#admit(host);
  }

  #admit(host: HostState): void {
    host.silent = false;
    if (host.health === 'healthy') return;
    const from = host.health;
    host.health = 'healthy';
    host.readySinceAdmitted = new Set(host.ready);
    this.#control.logger?.info(
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
      host.checkedForTraffic = false;
      this.#control.logger?.warn({ modelServer: host.origin, from, reason }, 'model server ejected');
      // The control connection may sit on a silent peer: a fresh one lets the next probe fail or pass on its own.
      const stale = host.control;
      host.control = controlClient(host.origin, this.#control.probeTimeoutMs);
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
