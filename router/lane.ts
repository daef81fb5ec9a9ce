/**
 * @module router/lane — one lane: the connections to one model server for one target language (an undici Pool
 * behind a bounded `Gate`), and its refusal latch. A lane whose model server refused a request at admission keeps
 * no line until that Retry-After has passed and, beyond it, until the model server has answered a request sent on
 * the lane after the refusal (upstream.ts explains why).
 */
import { Pool } from 'undici';
import { ServeError } from '../common/errors.js';
import { Gate } from './gate.js';

/** Seconds a client refused by a full lane is asked to wait: a lane drains in about one model-server batch. */
export const LANE_RETRY_AFTER_S = 1;
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
