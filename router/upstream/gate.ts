/**
 * @module router/upstream/gate — a bounded admission gate: at most `limit` holders at once, at most `queueLimit` callers
 * waiting in FIFO order for a place, and nobody else (they are refused at once). The router keeps one per target
 * language in front of that language's connections to the model server, so one language's backlog waits in its
 * own short line, never in a line another language shares.
 *
 * Invariants (only `enter`, `#leave` and a waiter's abort change the state, all on the one JS thread):
 * - `active ≤ limit`, `waiting ≤ queueLimit`;
 * - a place freed while someone waits goes straight to the first waiter (`active` does not drop), so a newcomer
 *   cannot overtake the line;
 * - a waiter whose signal aborts leaves the line and never holds a place;
 * - `refuseWaiting` empties the line: every waiter is refused ('full'), none holds a place.
 */

/** What `enter` returns: call `release` exactly once when done (further calls do nothing). */
export type Release = () => void;

/** Why a caller was not admitted. */
export type GateRefusal = 'full' | 'aborted';

export class GateRefusedError extends Error {
  constructor(readonly reason: GateRefusal) {
    super(reason === 'full' ? 'gate full' : 'aborted while waiting');
    this.name = 'GateRefusedError';
  }
}

interface Waiter {
  admit: (release: Release) => void;
  refuse: (err: GateRefusedError) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

export interface GateStats {
  active: number;
  waiting: number;
  /** Callers refused because the line was full, since the start. */
  refused: number;
}

export class Gate {
  #active = 0;
  #refused = 0;
  /** FIFO; a Set keeps removal of an aborted waiter O(1) and iteration in insertion order. */
  readonly #waiting = new Set<Waiter>();

  /**
   * @param limit places (≥ 1): requests of one language in flight to the model server.
   * @param queueLimit callers that may wait for a place (≥ 0).
   */
  constructor(
    readonly limit: number,
    readonly queueLimit: number,
  ) {
    if (!(Number.isInteger(limit) && limit >= 1))
      throw new RangeError(`gate limit must be an integer ≥ 1, got ${limit}`);
    if (!(Number.isInteger(queueLimit) && queueLimit >= 0))
      throw new RangeError(`gate queue limit must be an integer ≥ 0, got ${queueLimit}`);
  }

  get stats(): GateStats {
    return { active: this.#active, waiting: this.#waiting.size, refused: this.#refused };
  }

  /**
   * A place now (synchronously, as a ready value), a promise of one when the line has room, else a
   * GateRefusedError('full') thrown at once. The promise rejects with GateRefusedError('aborted') when `signal`
   * aborts first.
   */
  enter(signal?: AbortSignal): Release | Promise<Release> {
    if (signal?.aborted) throw new GateRefusedError('aborted');
    if (this.#active < this.limit) {
      this.#active++;
      return this.#release();
    }
    if (this.#waiting.size >= this.queueLimit) {
      this.#refused++;
      throw new GateRefusedError('full');
    }
    return new Promise<Release>((admit, refuse) => {
      const waiter: Waiter = { admit, refuse, signal, onAbort: undefined };
      if (signal) {
        waiter.onAbort = () => {
          this.#waiting.delete(waiter);
          refuse(new GateRefusedError('aborted'));
        };
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.#waiting.add(waiter);
    });
  }

  /** Refuse every caller waiting now ('full', counted as refused); those holding a place keep it. */
  refuseWaiting(): void {
    const waiting = [...this.#waiting];
    this.#waiting.clear();
    for (const waiter of waiting) {
      if (waiter.onAbort) waiter.signal!.removeEventListener('abort', waiter.onAbort);
      this.#refused++;
      waiter.refuse(new GateRefusedError('full'));
    }
  }

  #release(): Release {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#leave();
    };
  }

  #leave(): void {
    const next = this.#waiting.values().next();
    if (next.done) {
      this.#active--;
      return;
    }
    const waiter = next.value;
    this.#waiting.delete(waiter);
    if (waiter.onAbort) waiter.signal!.removeEventListener('abort', waiter.onAbort);
    waiter.admit(this.#release());
  }
}
