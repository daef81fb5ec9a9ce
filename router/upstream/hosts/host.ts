/**
 * @module router/upstream/hosts/host — one model server as router/upstream/model-servers.ts sees it: its health, the languages it has
 * ready and registered, its control connection and the bookkeeping of its probes.
 */
import type { Client } from 'undici';

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

/** A host's state; `health` changes only in router/upstream/model-servers.ts `#admit` and `#eject`. */
export class HostState {
  health: HostHealth = 'unknown';
  ready = new Set<string>();
  registered = new Set<string>();
  /**
   * Languages it has had ready since it was last admitted. One of them registered but not ready now is a worker
   * restarting: the model server queues its requests until the worker is back, so the host keeps getting them.
   */
  readySinceAdmitted = new Set<string>();
  /** When anything was last heard from it (performance.now): a probe's answer, or traffic's (`heard`). */
  heardAt = -Infinity;
  /** A probe waited past `probeTimeoutMs` while the host answered other requests; cleared by a prompt probe. */
  busy = false;
  /** `onSilent` was called and the host has not been admitted since. */
  silent = false;
  /** The probe or language read under way; at most one per host. */
  probing: Promise<void> | undefined = undefined;
  /** A language read was asked for and has not started yet. */
  languagesWanted = false;
  /** Traffic it answered while not admitted has had it checked since it was last taken out (`served`). */
  checkedForTraffic = false;
  /** `recheck`: per language, the check under way, or when (performance.now) the last one was sent. */
  rechecks = new Map<string, Promise<void> | number>();

  /** `control`: its own connection for probes and language reads (router/upstream/hosts/probe.ts `controlClient`). */
  constructor(
    readonly origin: string,
    public control: Client,
  ) {}
}
