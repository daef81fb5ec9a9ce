/**
 * @module router/keys/keyed-access — API keys on: the key ring (who may call) and the usage store (how much they may
 * call, counted across every router instance) behind the one `ApiAccess` the DeepL and LibreTranslate rooms ask.
 */
import type { Logger } from '../../common/logger.js';
import type { Admission, ApiAccess, ApiKey, Charge, KeyCheck, KeyReport, KeyUsage } from './api-access.js';
import { FileUsageStore } from './file-usage-store.js';
import { KeyRing } from './key-ring.js';
import { RedisUsageStore } from './redis-usage-store.js';
import type { UsageStore } from './usage-store.js';

export interface KeyedAccessOptions {
  /** API_KEYS: a key file or a folder of them. */
  keys: string;
  /** USAGE_STORE, as config resolved it. */
  store: { kind: 'file'; dir: string } | { kind: 'redis'; url: string };
  logger?: Logger;
}

export class KeyedAccess implements ApiAccess {
  readonly #ring: KeyRing;
  readonly #store: UsageStore;

  /** @throws Error when the keys cannot be read. */
  constructor(options: KeyedAccessOptions) {
    this.#ring = new KeyRing(options.keys, options.logger);
    this.#store =
      options.store.kind === 'file'
        ? new FileUsageStore(options.store.dir)
        : new RedisUsageStore(options.store.url, options.logger);
  }

  check(secret: string | undefined): KeyCheck {
    return this.#ring.check(secret);
  }

  admit(key: ApiKey, characters: number | null): Promise<Admission> {
    return this.#store.admit(key, characters, Date.now());
  }

  refund(key: ApiKey, charge: Charge): Promise<void> {
    return this.#store.refund(key, charge);
  }

  async usage(key: ApiKey): Promise<KeyUsage> {
    return (await this.#store.usages([key.id])).get(key.id)!;
  }

  async report(): Promise<KeyReport[]> {
    const keys = this.#ring.keys();
    const usages = await this.#store.usages(keys.map((key) => key.id));
    return keys.map((key) => ({
      id: key.id,
      ...usages.get(key.id)!,
      requestsPerSecond: key.requestsPerSecond ?? null,
      charactersPerPeriod: key.charactersPerPeriod ?? null,
      periodS: key.periodS,
      characterQuota: key.characterQuota ?? null,
    }));
  }

  close(): Promise<void> {
    return this.#store.close();
  }
}
