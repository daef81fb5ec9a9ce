/**
 * @module engine/catch-up — which cohorts step at a step boundary when the decoder graph cannot merge rows of
 * different lengths (the Hugging Face export: positions follow the cache length and there is no self-attention
 * mask). Rows that have taken the same number of steps CAN share a decoder run there — equal cache lengths need
 * no mask and give every row its true position — so a younger cohort is let *catch up* with an older one: the
 * older one pauses while the younger steps, and the two merge once their step counts are equal (generate.ts).
 *
 * Why: without it, rows arriving while others generate form their own cohort until the end, and every step then
 * costs one decoder run per cohort — on a CPU a whole pass over the weights each (a batch-1 step of M2M100-418M
 * costs about a tenth of a batch-64 step). Clients that send their next request when the last is answered
 * arrive in waves a few milliseconds apart, so the first of a wave used to start alone and the rest formed a
 * second cohort that paid for its own weight pass at every step (bench figure 2, docs/engine.md).
 *
 * ```
 * step boundary:  A ──●──●──●  (3 steps)                 A pauses (budget 8 → 7 → 6 → 5)
 *                 B         ●──●──●   B steps 3 times     ──▶ A+B merge, one decoder run per step after
 * ```
 *
 * Rules (cohorts sorted youngest first, no two with equal step counts — those were merged):
 * - the youngest cohort always steps;
 * - an older cohort pauses iff the nearest younger cohort that steps this boundary will reach it within the
 *   older one's remaining pause budget (`steps gap ≤ pauseBudget`); a pause spends one unit of budget;
 * - a merged cohort keeps the smaller budget of the two.
 * So no row waits more than `catchUpSteps` steps in all (no starvation under any arrival pattern), and a
 * cohort never pauses for a younger one that cannot reach it.
 */

/** What the policy reads and writes of a cohort. */
export interface CohortClock {
  /** Decoder steps taken (= cache length with the KV cache): equal counts can share one decoder run. */
  steps: number;
  /** Steps this cohort may still wait for a younger one to catch up. */
  pauseBudget: number;
}

/**
 * The cohorts that step at this boundary (youngest first); each cohort left out pauses and its budget is
 * spent by one. `cohorts` must not hold two with the same step count.
 */
export function planSteps<T extends CohortClock>(cohorts: readonly T[]): T[] {
  const stepping: T[] = [];
  for (const cohort of [...cohorts].sort((a, b) => a.steps - b.steps)) {
    const younger = stepping[stepping.length - 1];
    if (younger !== undefined && cohort.pauseBudget >= cohort.steps - younger.steps) {
      cohort.pauseBudget--;
      continue;
    }
    stepping.push(cohort);
  }
  return stepping;
}

/**
 * Whether a cohort started now (0 steps) would catch up with a running one: the youngest running cohort can
 * wait for it. Without running cohorts there is nothing to catch up with (false).
 */
export function reachable(cohorts: readonly CohortClock[]): boolean {
  if (cohorts.length === 0) return false;
  const youngest = cohorts.reduce((a, b) => (b.steps < a.steps ? b : a));
  return youngest.pauseBudget >= youngest.steps;
}

/** Groups of cohorts with the same step count, in first-appearance order, each in the order given. */
export function equalStepGroups<T extends CohortClock>(cohorts: readonly T[]): T[][] {
  const groups = new Map<number, T[]>();
  for (const cohort of cohorts) {
    const group = groups.get(cohort.steps);
    if (group) group.push(cohort);
    else groups.set(cohort.steps, [cohort]);
  }
  return [...groups.values()];
}
