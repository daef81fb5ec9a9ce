/**
 * @module router/upstream/host-choice — which of the model servers that may take a language gets the next request: the one
 * with the fewest requests outstanding from this router process (waiting or in flight), the starting point rotating
 * among equally loaded hosts. Which hosts may take it (ready, healthy) is router/upstream/model-servers.ts `route`.
 */
import { ServeError } from '../../common/errors.js';
import type { Route } from './hosts/route.js';

/** Seconds a client is asked to wait when no host of its language answers: a readmission takes about a probe. */
export const NO_HOST_RETRY_AFTER_S = 1;

/**
 * The hosts `route` offers for `lang`, other than `failed` (a retry); undefined when a retry has nowhere else to go.
 * @throws ServeError when no host may take it now.
 */
export function candidates(route: Route, lang: string, failed: string | undefined): readonly string[] | undefined {
  switch (route.kind) {
    case 'none':
      throw new ServeError('UPSTREAM_UNAVAILABLE', 'No model server is known: MODEL_SERVERS resolves to no address.');
    case 'language-down':
      throw new ServeError('NO_WORKER', `Model ${lang} is unavailable now, ${route.reason}; retry later.`, {
        retryAfterS: NO_HOST_RETRY_AFTER_S,
      });
    case 'unreachable':
      // Nothing answers: one try, as with a single model server (a refusal is a 502 in milliseconds).
      if (failed !== undefined) return undefined;
      break;
    case 'hosts':
      break;
  }
  const origins = failed === undefined ? route.origins : route.origins.filter((o) => o !== failed);
  return origins.length === 0 ? undefined : origins;
}

/**
 * The least loaded of `origins` (not empty), scanning from `turn` modulo their number so that ties rotate; stops
 * early at an idle host.
 */
export function leastOutstanding(
  origins: readonly string[],
  turn: number,
  outstanding: (origin: string) => number,
): string {
  const start = turn % origins.length;
  let best = origins[start]!;
  let bestLoad = outstanding(best);
  for (let i = 1; i < origins.length && bestLoad > 0; i++) {
    const origin = origins[(start + i) % origins.length]!;
    const load = outstanding(origin);
    if (load < bestLoad) [best, bestLoad] = [origin, load];
  }
  return best;
}
