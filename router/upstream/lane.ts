/**
 * @module router/upstream/lane — one lane: the connections to one model server for one target language (an undici Pool
 * behind a bounded `Gate`), entering it, and its refusal latch.
 *
 * A lane whose model server refused a request at admission (queue budget or bound: 503 + Retry-After) keeps no
 * line until that Retry-After has passed and, beyond it, until the model server has answered a request sent on the
 * lane after the refusal (it admits again; an answer to a job admitted before says nothing, and under sustained
 * overload one comes every batch): its waiters are refused at once, and so is every request that finds no free
 * connection, with the model server's own refusal and the Retry-After left of it (at least 1 s). Under sustained
 * overload a connection frees only when an admitted job ends, seconds later: a line reopened at the Retry-After
 * alone, or at the next answer to an older job, filled again and held its requests until then (refusal p99 1.4 and
 * 1.5 s through the front at 10×, bench figure 7). A line is there to absorb a burst while the model server admits;
 * while it refuses, a request waiting in the line for a connection is only refused later (seconds later at 10×
 * overload on bench figure 7, where lines held requests behind connections whose jobs waited in the model server's
 * queue). A request that finds a free connection still goes through, so the model server keeps being asked and its
 * queue never runs dry because of this.
 */
import { Pool } from 'undici';
import { ServeError } from '../../common/errors.js';
import { Gate, GateRefusedError, type Release } from './gate.js';
import { NotReached } from './retry.js';

/** Seconds a client refused by a full lane is asked to wait: a lane drains in about one model-server batch. */
const LANE_RETRY_AFTER_S = 1;

export interface Lane {
  gate: Gate;
  pool: Pool;
  /** The model server's last admission refusal on this lane, and until when (performance.now) it holds. */
  refusal: ServeError | undefined;
  refusingUntil: number;
  /** When (performance.now) the last admission refusal arrived. */
  refusedAt: number;
  /**
   * When (performance.now) the latest request the model server answered on this lane was sent. The line stays
   * closed past the Retry-After until a request sent after the refusal is answered, showing it admits again
   * (module doc); an answer to a request admitted before the refusal shows nothing, and under sustained overload
   * those keep coming every batch.
   */
  answeredSentAt: number;
}

/** Admission refusals of the model server that close a lane's line for their Retry-After (module doc). */
const ADMISSION_REFUSALS = new Set(['OVERLOADED', 'QUEUE_FULL']);

/** What a lane's connections and line are sized and timed by. */
export interface LaneOptions {
  connections: number;
  queue: number;
  connectTimeoutMs: number;
  timeoutMs: number;
}

/** A new lane to `origin`: a gate of `connections` in flight and `queue` waiting, a Pool of `connections`. */
export function createLane(origin: string, options: LaneOptions): Lane {
  return {
    refusal: undefined,
    refusingUntil: 0,
    refusedAt: Number.NEGATIVE_INFINITY,
    answeredSentAt: Number.NEGATIVE_INFINITY,
    gate: new Gate(options.connections, options.queue),
    pool: new Pool(origin, {
      connections: options.connections,
      pipelining: 1,
      connect: { timeout: options.connectTimeoutMs },
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
    }),
  };
}

/** A request sent at `sentAt` was answered: the model server admits again (it reopens the line after a refusal). */
export function laneAnswered(lane: Lane, sentAt: number): void {
  lane.answeredSentAt = Math.max(lane.answeredSentAt, sentAt);
}

/** A request sent at `sentAt` failed with `err`: an admission refusal closes the line; a 4xx or 504 was admitted. */
export function laneFailed(lane: Lane, sentAt: number, err: unknown): void {
  if (err instanceof ServeError && ADMISSION_REFUSALS.has(err.code) && err.retryAfterS !== undefined) {
    lane.refusal = err;
    lane.refusedAt = performance.now();
    lane.refusingUntil = lane.refusedAt + err.retryAfterS * 1000;
    lane.gate.refuseWaiting();
  } else if (err instanceof ServeError && (err.status < 500 || err.status === 504)) {
    // Answered (a 4xx about the request, a deadline passed on a worker): it was admitted.
    laneAnswered(lane, sentAt);
  }
}

/** The model server's refusal, with the Retry-After left of it, while the lane keeps no line; else undefined. */
export function refusingNow(lane: Lane): ServeError | undefined {
  const leftMs = lane.refusingUntil - performance.now();
  if (lane.refusal === undefined || (leftMs <= 0 && lane.answeredSentAt > lane.refusedAt)) return undefined;
  return new ServeError(lane.refusal.code, lane.refusal.message, {
    retryAfterS: Math.max(1, Math.ceil(leftMs / 1000)),
  });
}

/**
 * A place in the lane for a request of `lang`: at once (a `Release`), or a promise of one from the line. Only a
 * request that has to wait listens for `gone` (its host's going; a signal combined per waiter). @throws NotReached
 * with the model server's refusal while the lane keeps no line, or with `gone`'s reason when the host went while
 * it waited; ServeError QUEUE_FULL when the line is full; `signal`'s reason when the client went away.
 */
export function enterLane(
  lane: Lane,
  lang: string,
  signal: AbortSignal | undefined,
  gone: AbortSignal,
): Release | Promise<Release> {
  const refused = (err: unknown) => {
    if (!(err instanceof GateRefusedError)) return err;
    if (err.reason === 'aborted') return signal?.aborted ? (signal.reason ?? err) : new NotReached(gone.reason);
    const refusal = refusingNow(lane);
    if (refusal !== undefined) return new NotReached(refusal);
    return new ServeError(
      'QUEUE_FULL',
      `Router queue of model ${lang} is full (${lane.gate.limit} in flight, ${lane.gate.queueLimit} waiting), retry later.`,
      { retryAfterS: LANE_RETRY_AFTER_S },
    );
  };
  const mustWait = lane.gate.stats.active >= lane.gate.limit;
  if (mustWait) {
    const refusal = refusingNow(lane);
    if (refusal !== undefined) throw new NotReached(refusal);
  }
  try {
    const entered = lane.gate.enter(!mustWait ? signal : signal !== undefined ? AbortSignal.any([signal, gone]) : gone);
    return typeof entered === 'function'
      ? entered
      : entered.catch((err: unknown) => {
          throw refused(err);
        });
  } catch (err) {
    throw refused(err);
  }
}
