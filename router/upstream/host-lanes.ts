/**
 * @module router/upstream/host-lanes — the lanes of one router process, by model server then target language, created on
 * first use; what the process has outstanding at each model server; and a model server's lanes dropped when it goes.
 */
import type { Pool } from 'undici';
import type { ServeError } from '../../common/errors.js';
import { Gate, type GateStats } from './gate.js';
import { createLane, type Lane, type LaneOptions } from './lane.js';

/** One model server's lanes, and what this router process has outstanding there (waiting or in flight). */
export interface HostEntry {
  lanes: Map<string, Lane>;
  outstanding: number;
  /** Aborted when the host goes silent or is removed (its reason the client's error): waiters go elsewhere. */
  gone: AbortController;
}

export class HostLanes {
  /** By origin, then language; created on first use. `drop` takes a host's entry out whole. */
  readonly #hosts = new Map<string, HostEntry>();

  constructor(readonly options: LaneOptions) {
    // Validates both bounds now rather than on the first request.
    void new Gate(options.connections, options.queue);
  }

  /** `origin`'s entry and its lane for `lang`, both created on first use. */
  get(origin: string, lang: string): [HostEntry, Lane] {
    let host = this.#hosts.get(origin);
    if (host === undefined) {
      host = { lanes: new Map(), outstanding: 0, gone: new AbortController() };
      this.#hosts.set(origin, host);
    }
    let lane = host.lanes.get(lang);
    if (lane === undefined) host.lanes.set(lang, (lane = createLane(origin, this.options)));
    return [host, lane];
  }

  /** Requests outstanding (waiting or in flight) at `origin`. */
  outstandingAt(origin: string): number {
    return this.#hosts.get(origin)?.outstanding ?? 0;
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

  /** Requests outstanding (waiting or in flight) per model server. */
  get outstanding(): Record<string, number> {
    return Object.fromEntries([...this.#hosts].map(([origin, host]) => [origin, host.outstanding]));
  }

  /**
   * Forget a host's lanes: the requests still waiting in them go to another replica (or get `reason`). In flight:
   * a silent host's will not be answered (it is cut off, or its machine died), so they are failed now with `reason`
   * rather than after `timeoutMs` ('fail'); a host removed from MODEL_SERVERS finishes what it has ('finish').
   */
  drop(origin: string, reason: ServeError, inFlight: 'fail' | 'finish'): void {
    const host = this.#hosts.get(origin);
    if (host === undefined) return;
    this.#hosts.delete(origin);
    host.gone.abort(reason);
    for (const lane of host.lanes.values()) {
      const pool = lane.pool;
      void (inFlight === 'fail' ? pool.destroy(reason) : pool.close()).catch(() => undefined);
    }
  }

  /** Every lane's connection pool. */
  pools(): Pool[] {
    return [...this.#hosts.values()].flatMap((h) => [...h.lanes.values()].map((l) => l.pool));
  }
}
