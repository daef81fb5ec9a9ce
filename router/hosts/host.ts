/**
 * @module router/hosts/host — one model server as router/model-servers.ts sees it: its health, the languages it has
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

/** A host's mutable state; `health` changes only in router/model-servers.ts `#admit` and `#eject`. */
export interface HostState {
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

/** A host just found: health unknown, nothing heard, no language known yet. */
export function createHost(origin: string, control: Client): HostState {
  return {
    origin,
    health: 'unknown',
    ready: new Set(),
    registered: new Set(),
    readySinceAdmitted: new Set(),
    heardAt: -Infinity,
    busy: false,
    silent: false,
    control,
    probing: undefined,
    languagesWanted: false,
    rechecks: new Map(),
  };
}
