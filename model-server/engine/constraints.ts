/**
 * @module engine/constraints — lexically constrained decoding: token sequences (a glossary's target terms) that
 * a hypothesis must contain before it may end. Pure bookkeeping; decoding.ts asks it which tokens a hypothesis
 * may take next.
 *
 * The rules, per hypothesis (as in fairseq's and Sockeye's constrained beam search, without their beam banks):
 * - a constraint starts when the hypothesis takes its first token, by the model's choice or forced (below); once
 *   started, its remaining tokens are forced one per step, so a started term is always written whole;
 * - `</s>` is not allowed while a constraint is unmet: where the model would end, the next unmet constraint starts
 *   instead, so a term the model never chose is written where the model thought the sentence complete;
 * - when the steps left are just enough for the unmet constraints' tokens and `</s>`, the next one starts at once;
 *   the engine gives a constrained row its constraints' length on top of its token cap, so this always fits.
 * A row without constraints never reaches this module: constraints cost only the rows that have them.
 */

/** Where one hypothesis stands. Values are never changed: `advance` returns a new one. */
export interface ConstraintProgress {
  /** Bit i set: constraint i is met. */
  readonly met: number;
  /** The constraint being written, or -1. */
  readonly active: number;
  /** Tokens of the active constraint written so far. */
  readonly written: number;
}

export const NO_PROGRESS: ConstraintProgress = { met: 0, active: -1, written: 0 };

/** At most this many constraints per row (a bit each in `met`). */
export const MAX_CONSTRAINTS = 30;

export class Constraints {
  readonly terms: readonly (readonly number[])[];
  readonly #all: number;

  /** @throws RangeError for more than MAX_CONSTRAINTS or an empty term */
  constructor(terms: readonly (readonly number[])[]) {
    if (terms.length > MAX_CONSTRAINTS) throw new RangeError(`at most ${MAX_CONSTRAINTS} constraints per row`);
    if (terms.some((t) => t.length === 0)) throw new RangeError('a constraint needs at least one token');
    this.terms = terms;
    this.#all = terms.length === 0 ? 0 : 2 ** terms.length - 1;
  }

  /** Tokens all the terms take: what the engine adds to a constrained row's token cap. */
  get tokens(): number {
    return this.terms.reduce((n, t) => n + t.length, 0);
  }

  allMet(p: ConstraintProgress): boolean {
    return p.met === this.#all;
  }

  /** Tokens still to write to meet every constraint. */
  remaining(p: ConstraintProgress): number {
    let n = p.active >= 0 ? this.terms[p.active]!.length - p.written : 0;
    this.terms.forEach((term, i) => {
      if (i !== p.active && (p.met & (2 ** i)) === 0) n += term.length;
    });
    return n;
  }

  /**
   * The one token the hypothesis must take next, or undefined when it may take any (but `</s>` only if
   * `mayEnd`). `left`: tokens it may still generate, `</s>` included.
   */
  forced(p: ConstraintProgress, left: number): number | undefined {
    if (p.active >= 0) return this.terms[p.active]![p.written];
    if (this.allMet(p)) return undefined;
    return this.remaining(p) + 1 >= left ? this.nextStart(p) : undefined;
  }

  /** Whether `</s>` is allowed: every constraint met. */
  mayEnd(p: ConstraintProgress): boolean {
    return this.allMet(p);
  }

  /** The first token of the first unmet constraint (what replaces `</s>` while one is unmet). */
  nextStart(p: ConstraintProgress): number {
    const i = this.terms.findIndex((_, k) => (p.met & (2 ** k)) === 0 && k !== p.active);
    return this.terms[i]![0]!;
  }

  /** The progress after taking `token`. */
  advance(p: ConstraintProgress, token: number): ConstraintProgress {
    if (p.active >= 0) {
      const term = this.terms[p.active]!;
      if (term[p.written] !== token) return { met: p.met, active: -1, written: 0 };
      return p.written + 1 === term.length
        ? { met: p.met | (2 ** p.active), active: -1, written: 0 }
        : { met: p.met, active: p.active, written: p.written + 1 };
    }
    const i = this.terms.findIndex((term, k) => (p.met & (2 ** k)) === 0 && term[0] === token);
    if (i < 0) return p;
    return this.terms[i]!.length === 1
      ? { met: p.met | (2 ** i), active: -1, written: 0 }
      : { met: p.met, active: i, written: 1 };
  }
}
