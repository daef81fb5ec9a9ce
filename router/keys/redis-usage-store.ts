/**
 * @module router/keys/redis-usage-store — key usage shared by the routers of several machines, in Redis or Valkey
 * (USAGE_STORE=redis://…). One hash per key id (`mt:usage:<id>`, the fields of `KeyState`); each decision is one
 * Lua script — the policy of ./usage-store.ts `decide`, step for step — so it is atomic across every router of every
 * machine. Windows follow the Redis server's clock (`TIME`), the one clock all machines share.
 *
 * When Redis cannot be reached a keyed request fails (the APIs' 5xx) rather than passing uncounted; the client
 * reconnects on its own.
 */
import { createClient } from '@redis/client';
import type { Logger } from '../../common/logger.js';
import type { Admission, ApiKey, Charge, KeyUsage } from './api-access.js';
import type { UsageStore } from './usage-store.js';

/**
 * `decide` in Lua; -1 stands for "no limit", and as ARGV[1] for a call that translates nothing. Answers {verdict,
 * limit, retry-after ms}, and {'ok', the characters period, 0} when admitted.
 */
const ADMIT_SCRIPT = `
local h = KEYS[1]
local chars = tonumber(ARGV[1])
local translation = chars >= 0
if not translation then chars = 0 end
local rps = tonumber(ARGV[2])
local cpp = tonumber(ARGV[3])
local periodMs = tonumber(ARGV[4])
local quota = tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local s = redis.call('HMGET', h, 'requests', 'characters', 'second', 'secondRequests', 'period', 'periodCharacters')
local requests = tonumber(s[1]) or 0
local characters = tonumber(s[2]) or 0
local second = math.floor(now / 1000)
local period = math.floor(now / periodMs)
local secondRequests = 0
if tonumber(s[3]) == second then secondRequests = tonumber(s[4]) or 0 end
local periodCharacters = 0
if tonumber(s[5]) == period then periodCharacters = tonumber(s[6]) or 0 end
if quota >= 0 and (characters + chars > quota or (translation and characters >= quota)) then
  return {'quota', quota, 0}
end
if rps >= 0 and secondRequests + 1 > rps then return {'rate', rps, (second + 1) * 1000 - now} end
if cpp >= 0 and periodCharacters + chars > cpp then return {'characters', cpp, (period + 1) * periodMs - now} end
redis.call('HSET', h, 'requests', requests + 1, 'characters', characters + chars, 'second', second,
  'secondRequests', secondRequests + 1, 'period', period, 'periodCharacters', periodCharacters + chars)
return {'ok', period, 0}
`;

/** `refunded` in Lua: ARGV = characters, the period they were counted in. */
const REFUND_SCRIPT = `
local h = KEYS[1]
local chars = tonumber(ARGV[1])
local s = redis.call('HMGET', h, 'characters', 'period', 'periodCharacters')
if not s[1] then return 0 end
redis.call('HSET', h, 'characters', math.max(0, tonumber(s[1]) - chars))
if tonumber(s[2]) == tonumber(ARGV[2]) then
  redis.call('HSET', h, 'periodCharacters', math.max(0, (tonumber(s[3]) or 0) - chars))
end
return 1
`;

const hashOf = (keyId: string) => `mt:usage:${keyId}`;

export class RedisUsageStore implements UsageStore {
  readonly #client;
  #connecting: Promise<unknown> | undefined;

  constructor(url: string, logger?: Logger) {
    this.#client = createClient({ url });
    // Without a listener an unreachable server would be an uncaught 'error'; reconnection is the client's own.
    this.#client.on('error', (err: Error) => logger?.warn({ err: err.message }, 'usage store: Redis error'));
  }

  async admit(key: ApiKey, characters: number | null): Promise<Admission> {
    const client = await this.#connected();
    const limit = (value: number | undefined) => String(value ?? -1);
    const reply = (await client.eval(ADMIT_SCRIPT, {
      keys: [hashOf(key.id)],
      arguments: [
        String(characters ?? -1),
        limit(key.requestsPerSecond),
        limit(key.charactersPerPeriod),
        String(key.periodS * 1000),
        limit(key.characterQuota),
      ],
    })) as [string, number, number];
    const [verdict, max, retryAfterMs] = reply;
    if (verdict === 'ok') return { ok: true, charge: { characters: characters ?? 0, period: Number(max) } };
    if (verdict === 'quota') return { ok: false, reason: 'quota', limit: Number(max) };
    return {
      ok: false,
      reason: verdict === 'rate' ? 'rate' : 'characters',
      limit: Number(max),
      retryAfterS: Number(retryAfterMs) / 1000,
    };
  }

  async refund(key: ApiKey, charge: Charge): Promise<void> {
    const client = await this.#connected();
    await client.eval(REFUND_SCRIPT, {
      keys: [hashOf(key.id)],
      arguments: [String(charge.characters), String(charge.period)],
    });
  }

  async usages(keyIds: readonly string[]): Promise<Map<string, KeyUsage>> {
    const client = await this.#connected();
    // Commands issued in one turn of the event loop go to Redis as one pipeline: one round trip for every key.
    const replies = await Promise.all(keyIds.map((id) => client.hmGet(hashOf(id), ['requests', 'characters'])));
    return new Map(
      keyIds.map((id, i) => {
        const [requests, characters] = replies[i]!;
        return [id, { requests: Number(requests ?? 0), characters: Number(characters ?? 0) }];
      }),
    );
  }

  async close(): Promise<void> {
    if (this.#client.isOpen) await this.#client.close();
  }

  async #connected() {
    if (!this.#client.isOpen) this.#connecting ??= this.#client.connect().finally(() => (this.#connecting = undefined));
    await this.#connecting;
    return this.#client;
  }
}
