/**
 * @module router/keys/usage-store — the one place every router instance counts a key's requests and characters in:
 * the policy (`decide`: quota, then requests per second, then characters per period, in fixed windows aligned to
 * the clock) and the interface its stores implement. A decision and its count are one step in the store (under its
 * lock, or one Redis script), so instances racing for a key's last request or character never both get it, and a
 * refused request counts nothing.
 *
 * Stores: ./file-usage-store.ts (one machine, no service: a file all instances lock in turn) and
 * ./redis-usage-store.ts (several machines: Redis or Valkey).
 */
import type { Admission, ApiKey, KeyUsage } from './api-access.js';

/** What a store keeps per key id. */
export interface KeyState {
  /** Requests and characters admitted since the store began (the quota counts these characters). */
  requests: number;
  characters: number;
  /** The current second (ms since the epoch / 1000, floored) and the requests admitted in it. */
  second: number;
  secondRequests: number;
  /** The current characters period (its index: ms since the epoch / periodS / 1000, floored) and its characters. */
  period: number;
  periodCharacters: number;
}

export interface UsageStore {
  /** Decides on one request of `characters` for `key` at `nowMs` and counts it when admitted. */
  admit(key: ApiKey, characters: number, nowMs: number): Promise<Admission>;
  usage(keyId: string): Promise<KeyUsage>;
  close(): Promise<void>;
}

export const EMPTY_STATE: KeyState = {
  requests: 0,
  characters: 0,
  second: 0,
  secondRequests: 0,
  period: 0,
  periodCharacters: 0,
};

/** The decision on one request, and the state after it (unchanged when refused). */
export function decide(
  state: KeyState,
  key: ApiKey,
  characters: number,
  nowMs: number,
): { admission: Admission; state: KeyState } {
  const second = Math.floor(nowMs / 1000);
  const periodMs = key.periodS * 1000;
  const period = Math.floor(nowMs / periodMs);
  const secondRequests = state.second === second ? state.secondRequests : 0;
  const periodCharacters = state.period === period ? state.periodCharacters : 0;
  if (key.characterQuota !== undefined && state.characters + characters > key.characterQuota)
    return { admission: { ok: false, reason: 'quota', limit: key.characterQuota }, state };
  if (key.requestsPerSecond !== undefined && secondRequests + 1 > key.requestsPerSecond)
    return {
      admission: {
        ok: false,
        reason: 'rate',
        limit: key.requestsPerSecond,
        retryAfterS: ((second + 1) * 1000 - nowMs) / 1000,
      },
      state,
    };
  if (key.charactersPerPeriod !== undefined && periodCharacters + characters > key.charactersPerPeriod)
    return {
      admission: {
        ok: false,
        reason: 'characters',
        limit: key.charactersPerPeriod,
        retryAfterS: ((period + 1) * periodMs - nowMs) / 1000,
      },
      state,
    };
  return {
    admission: { ok: true },
    state: {
      requests: state.requests + 1,
      characters: state.characters + characters,
      second,
      secondRequests: secondRequests + 1,
      period,
      periodCharacters: periodCharacters + characters,
    },
  };
}
