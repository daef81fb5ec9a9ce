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
import type { Admission, ApiKey, Charge, KeyUsage } from './api-access.js';

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
  /**
   * Decides on one request of `characters` for `key` at `nowMs` and counts it when admitted (`characters` null: a
   * call that translates nothing, ApiAccess `admit`).
   */
  admit(key: ApiKey, characters: number | null, nowMs: number): Promise<Admission>;
  /** Gives back an admitted request's characters (ApiAccess `refund`). */
  refund(key: ApiKey, charge: Charge): Promise<void>;
  /** The use of each key id asked (none counted yet: zeros), read from the store once whatever their number. */
  usages(keyIds: readonly string[]): Promise<Map<string, KeyUsage>>;
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

/**
 * The decision on one request, and the state after it (unchanged when refused). A translation (`characters` a
 * number) is refused once the quota is used up, however few characters it has: a key that has spent its quota gets
 * nothing translated, not even an empty file. A call that translates nothing (`characters` null) passes the quota.
 */
export function decide(
  state: KeyState,
  key: ApiKey,
  request: number | null,
  nowMs: number,
): { admission: Admission; state: KeyState } {
  const characters = request ?? 0;
  const second = Math.floor(nowMs / 1000);
  const periodMs = key.periodS * 1000;
  const period = Math.floor(nowMs / periodMs);
  const secondRequests = state.second === second ? state.secondRequests : 0;
  const periodCharacters = state.period === period ? state.periodCharacters : 0;
  const quota = key.characterQuota;
  if (quota !== undefined && (state.characters + characters > quota || (request !== null && state.characters >= quota)))
    return { admission: { ok: false, reason: 'quota', limit: quota }, state };
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
    admission: { ok: true, charge: { characters, period } },
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

/** The state after giving back `charge` (ApiAccess `refund`): its characters, from their period while it is current. */
export function refunded(state: KeyState, charge: Charge): KeyState {
  return {
    ...state,
    characters: Math.max(0, state.characters - charge.characters),
    periodCharacters:
      state.period === charge.period ? Math.max(0, state.periodCharacters - charge.characters) : state.periodCharacters,
  };
}
