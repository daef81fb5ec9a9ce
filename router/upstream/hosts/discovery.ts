/**
 * @module router/upstream/hosts/discovery — MODEL_SERVERS' base URLs → hosts. An IP literal is one host; a name is resolved
 * to all its addresses, each a host (a Kubernetes headless Service: one per ready pod), again at every refresh, so
 * a host added or removed is picked up without a restart.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Logger } from '../../../common/logger.js';

/** Resolution failures that mean "the name has no address now" (a headless Service with no ready pod). */
const NO_ADDRESS_CODES = new Set(['ENOTFOUND', 'ENODATA']);

/** The sources, resolved again by each `origins()`. */
export class Sources {
  readonly #sources: { url: URL; literal: boolean }[];
  readonly #resolve: (hostname: string) => Promise<string[]>;
  readonly #logger: Pick<Logger, 'warn'> | undefined;
  /** Each source's last resolution, kept when a lookup fails for a reason other than "no address". */
  readonly #resolved = new Map<string, string[]>();

  /** `resolve`: name resolution (tests resolve names of their own). Default: the system resolver, every address. */
  constructor(
    sources: readonly string[],
    resolve?: (hostname: string) => Promise<string[]>,
    logger?: Pick<Logger, 'warn'>,
  ) {
    this.#sources = sources.map((s) => {
      const url = new URL(s);
      return { url, literal: isIP(url.hostname.replace(/^\[|\]$/g, '')) !== 0 };
    });
    this.#resolve = resolve ?? (async (name) => (await lookup(name, { all: true })).map((a) => a.address));
    this.#logger = logger;
  }

  /** The origins of the IP-literal sources, known without a lookup. */
  get literalOrigins(): string[] {
    return this.#sources.filter((s) => s.literal).map((s) => s.url.origin);
  }

  /** Every origin the sources stand for now; a failed lookup keeps the source's last addresses. */
  async origins(): Promise<Set<string>> {
    const origins = new Set<string>();
    await Promise.all(
      this.#sources.map(async ({ url, literal }) => {
        if (literal) {
          origins.add(url.origin);
          return;
        }
        let addresses: string[];
        try {
          addresses = await this.#resolve(url.hostname);
        } catch (err) {
          const code = (err as { code?: unknown }).code;
          if (!(typeof code === 'string' && NO_ADDRESS_CODES.has(code))) {
            this.#logger?.warn({ source: url.origin, err: (err as Error).message }, 'model server name lookup failed');
            addresses = this.#resolved.get(url.href) ?? [];
          } else {
            addresses = [];
          }
        }
        this.#resolved.set(url.href, addresses);
        for (const address of addresses) {
          const host = isIP(address) === 6 ? `[${address}]` : address;
          origins.add(`${url.protocol}//${host}:${url.port || '80'}`);
        }
      }),
    );
    return origins;
  }
}
