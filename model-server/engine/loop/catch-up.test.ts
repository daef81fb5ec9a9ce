import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { equalStepGroups, planSteps, reachable, type CohortClock } from './catch-up.js';

interface SimCohort extends CohortClock {
  /** Original cohorts merged into this one. */
  members: number[];
  /** Steps still to take before every row is done. */
  left: number;
}

/**
 * The step loop of generate.ts reduced to clocks: at each boundary a cohort may arrive, the plan steps some,
 * finished ones leave, equal step counts merge. Returns per original cohort its pauses and whether it merged.
 */
function simulate(budget: number, arrivals: (number | null)[]) {
  let cohorts: SimCohort[] = [];
  const pauses = new Map<number, number>();
  const boundaries = new Map<number, number>();
  const lengths = new Map<number, number>();
  let merges = 0;
  for (let t = 0; t < arrivals.length || cohorts.length > 0; t++) {
    const length = arrivals[t];
    if (length !== undefined && length !== null) {
      cohorts.push({ steps: 0, pauseBudget: budget, members: [t], left: length });
      lengths.set(t, length);
    }
    const stepping = planSteps(cohorts);
    // The youngest always steps, and nobody steps twice.
    const youngest = Math.min(...cohorts.map((c) => c.steps));
    expect(stepping.some((c) => c.steps === youngest)).toBe(cohorts.length > 0);
    expect(new Set(stepping).size).toBe(stepping.length);
    for (const c of cohorts) {
      for (const m of c.members) boundaries.set(m, (boundaries.get(m) ?? 0) + 1);
      if (!stepping.includes(c)) for (const m of c.members) pauses.set(m, (pauses.get(m) ?? 0) + 1);
    }
    for (const c of stepping) {
      c.steps++;
      c.left--;
    }
    cohorts = cohorts.filter((c) => c.left > 0);
    const merged: SimCohort[] = [];
    for (const [into, ...rest] of equalStepGroups(cohorts)) {
      for (const r of rest) {
        into!.members.push(...r.members);
        into!.pauseBudget = Math.min(into!.pauseBudget, r.pauseBudget);
        into!.left = Math.max(into!.left, r.left);
        merges++;
      }
      merged.push(into!);
    }
    cohorts = merged;
    // Every boundary leaves distinct step counts behind.
    expect(new Set(cohorts.map((c) => c.steps)).size).toBe(cohorts.length);
  }
  return { pauses, boundaries, lengths, merges };
}

describe('catch-up policy', () => {
  it('no cohort pauses more than its budget in all, under any arrival pattern, and every one finishes', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 10 }),
        fc.array(fc.option(fc.integer({ min: 1, max: 30 }), { nil: null }), { maxLength: 60 }),
        (budget, arrivals) => {
          const { pauses, boundaries, lengths } = simulate(budget, arrivals);
          for (const [id, length] of lengths) {
            expect(pauses.get(id) ?? 0).toBeLessThanOrEqual(budget);
            // It was live for its own steps plus its pauses, never longer (merged cohorts run to the longest
            // member, so a row's own length bounds only from below).
            expect(boundaries.get(id)!).toBeGreaterThanOrEqual(length);
          }
        },
      ),
    );
  });

  it('a wave arriving over a few boundaries becomes one cohort within the budget', () => {
    // Four arrivals one boundary apart, all generating 16 steps: each catches up and merges.
    const { merges, pauses } = simulate(8, [16, 16, 16, 16]);
    expect(merges).toBe(3);
    expect(Math.max(...pauses.values())).toBeLessThanOrEqual(8);
  });

  it('a cohort never pauses for one that cannot reach it within its budget', () => {
    const old = { steps: 10, pauseBudget: 8 };
    const young = { steps: 0, pauseBudget: 8 };
    expect(planSteps([old, young])).toEqual([young, old]);
    expect(old.pauseBudget).toBe(8);
    const near = { steps: 5, pauseBudget: 8 };
    expect(planSteps([near, young])).toEqual([young]);
    expect(near.pauseBudget).toBe(7);
  });

  it('the nearest younger stepping cohort decides: a middle cohort that pauses is no one to wait for', () => {
    const a = { steps: 0, pauseBudget: 8 };
    const b = { steps: 2, pauseBudget: 8 }; // pauses for a (gap 2)
    const c = { steps: 9, pauseBudget: 8 }; // b pauses, so c's nearest stepping younger is a: gap 9 > 8
    expect(planSteps([c, b, a])).toEqual([a, c]);
  });

  it('reachable: a newcomer can catch up only with a youngest cohort whose budget covers its steps', () => {
    expect(reachable([])).toBe(false);
    expect(reachable([{ steps: 3, pauseBudget: 3 }])).toBe(true);
    expect(reachable([{ steps: 4, pauseBudget: 3 }])).toBe(false);
    expect(
      reachable([
        { steps: 20, pauseBudget: 8 },
        { steps: 2, pauseBudget: 8 },
      ]),
    ).toBe(true);
  });
});
