/**
 * @module engine/cohort-layout — re-laying a cohort's tensors when its rows change: rows leave or beams reorder
 * (`gatherRows`), or other cohorts' rows join (`mergeCohorts`). Row-level copying is row-layout.ts; this file
 * decides the lengths (trimmed to the longest content a remaining row needs) and swaps pooled memory in and out.
 */
import type { Row } from './decoding.js';
import type { Cohort, CohortContext } from './cohort.js';
import { relayoutRows, type RowSource } from './row-layout.js';

/**
 * Rebuild `cohort` from rows `sources` of itself (rows left, beams reordered), trimming padding that
 * no remaining row needs. With no rows left the cohort holds its old tensors until it is retired.
 */
export function gatherRows(ctx: CohortContext, cohort: Cohort, sources: number[], rows: Row[]): void {
  cohort.rows = rows;
  if (rows.length === 0) return;
  const encoderLengths = sources.map((s) => cohort.encoderLengths[s]!);
  const S = Math.max(...encoderLengths);
  // A row's cache holds the tokens fed so far: the start token and all its tokens but the newest.
  const P = cohort.selfCache === null ? 0 : Math.max(...rows.map((r) => r.hyp.tokens.length));
  relayout(ctx, cohort, [{ cohort, rows: sources }], S, P);
  cohort.encoderLengths = encoderLengths;
}

/** Append the `joining` cohorts' rows to `running` (all have had their first step), padding to common lengths. */
export function mergeCohorts(ctx: CohortContext, running: Cohort, joining: readonly Cohort[]): void {
  const all = [running, ...joining];
  const S = Math.max(...all.map((c) => c.encoderLength));
  const P = Math.max(...all.map((c) => c.pastLength));
  relayout(
    ctx,
    running,
    all.map((cohort) => ({ cohort, rows: cohort.rows.map((_, i) => i) })),
    S,
    P,
  );
  running.rows = all.flatMap((c) => c.rows);
  running.encoderLengths = all.flatMap((c) => c.encoderLengths);
}

/** Replace `target`'s tensors with the listed rows of the given cohorts, at lengths S (encoder) and P (cache). */
function relayout(
  ctx: CohortContext,
  target: Cohort,
  parts: { cohort: Cohort; rows: number[] }[],
  S: number,
  P: number,
): void {
  const d = ctx.config.dModel;
  const H = ctx.heads;
  const dh = ctx.headDim;
  const { memory } = ctx;
  const pick = <T extends Float32Array | BigInt64Array>(
    get: (c: Cohort) => T,
    length: (c: Cohort) => number,
  ): RowSource<T>[] =>
    parts.flatMap(({ cohort, rows }) => rows.map((row) => ({ data: get(cohort), row, length: length(cohort) })));
  const rows = parts.reduce((sum, p) => sum + p.rows.length, 0);
  const encoderStates = relayoutRows(
    pick(
      (c) => c.encoderStates,
      (c) => c.encoderLength,
    ),
    1,
    d,
    S,
    'start',
    memory.pooled(rows * S * d),
  );
  const encoderMask = relayoutRows(
    pick(
      (c) => c.encoderMask,
      (c) => c.encoderLength,
    ),
    1,
    1,
    S,
    'start',
  );
  let crossCache: Float32Array[] | null = null;
  let selfCache: Float32Array[] | null = null;
  let selfMask: BigInt64Array | null = null;
  if (target.crossCache !== null) {
    crossCache = target.crossCache.map((_, k) =>
      relayoutRows(
        pick(
          (c) => c.crossCache![k]!,
          (c) => c.encoderLength,
        ),
        H,
        dh,
        S,
        'start',
        memory.pooled(rows * H * S * dh),
      ),
    );
    selfCache = target.selfCache!.map((_, k) =>
      relayoutRows(
        pick(
          (c) => c.selfCache![k]!,
          (c) => c.pastLength,
        ),
        H,
        dh,
        P,
        'end',
        memory.pooled(rows * H * P * dh),
      ),
    );
    if (target.selfMask !== null)
      selfMask = relayoutRows(
        pick(
          (c) => c.selfMask!,
          (c) => c.pastLength,
        ),
        1,
        1,
        P,
        'end',
      );
  }
  // Every row is copied out: the old tensors' memory is free (a target listed twice is recycled once).
  for (const cohort of new Set(parts.map((p) => p.cohort))) memory.recycleRowTensors(cohort);
  target.encoderStates = encoderStates;
  target.encoderMask = encoderMask;
  target.encoderLength = S;
  if (crossCache !== null) {
    target.crossCache = crossCache;
    target.selfCache = selfCache;
    target.selfMask = selfMask;
    target.pastLength = P;
  }
}
