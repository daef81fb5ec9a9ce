/**
 * @module router/host-choice — which of the model servers that may take a language gets the next request: the one
 * with the fewest requests outstanding from this router process (waiting or in flight), the starting point rotating
 * among equally loaded hosts. Which hosts may take it (ready, healthy) is router/model-servers.ts `route`.
 */

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
