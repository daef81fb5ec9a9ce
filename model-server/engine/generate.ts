/**
 * @module engine/generate — the generation step loop: encoder once per admitted group, then the decoder
 * one token per step over the set of live rows, with the merged decoder's KV cache.
 *
 * ```
 * submit() ─▶ pending ─┐   (step boundary)
 *                      ▼
 *   ┌──────── loop: admit pending (encode) → new cohort at step 0
 *   │         step the cohorts the plan picks: decoder(input_ids [n,1], past) → logits or top-2 → decideStep
 *   │         finished rows resolve at once and leave; their cache rows are gathered out
 *   │         merge cohorts that can share a decoder run from now on
 *   └──────── until no cohort and nothing pending
 * ```
 *
 * A *cohort* is a set of rows sharing one set of batched tensors. Rows admitted at one boundary form one.
 * Which cohorts merge depends on the decoder graph:
 * - when it takes `decoder_attention_mask` (joinable), every cohort merges into the running one after its first
 *   step (shorter caches left-padded and masked, encoder tensors right-padded to the common length): one decoder
 *   call per step for everyone;
 * - the Hugging Face export has no such input — positions follow the cache length — so only cohorts that have
 *   taken the same number of steps merge. Younger cohorts catch up with older ones, which pause for a bounded
 *   number of steps (catch-up.ts); while some cannot catch up, at most `maxCohorts` cohorts generate at once and
 *   later rows wait at the boundary (each extra cohort costs a decoder run, a pass over the weights, per step).
 *
 * Files: this one is the loop and its policy (admission, stepping, merging); cohort.ts the cohort state and its
 * memory pools; encode.ts the encoder runs; step.ts a decoder step; cohort-layout.ts gathers and merges.
 *
 * Invariants (the loop is the only writer of cohort state; `submit` only appends to `#pending`):
 * - one decoder or encoder run at a time on the shared sessions;
 * - a row's cache holds exactly its fed tokens, right-aligned (`align: 'end'`), masked where padded;
 * - a sequence's rows (its beams) are adjacent in one cohort;
 * - no cohort steps twice between two boundaries, and no row pauses more than `catchUpSteps` steps in all;
 * - when rows leave, tensors are gathered and trimmed to the longest remaining content, so a step costs
 *   what its live rows cost; when no row leaves and no beam reorders, nothing is gathered;
 * - the self-attention cache: when the decoder graph exposes what a step appends (decoder-graph.ts), a step
 *   fetches only that and the cohort's CacheBuffers build the next cache in reused memory (kv-cache.ts);
 *   otherwise the whole `present.*.decoder` is fetched (onnxruntime-node copies each fetched output into a
 *   fresh ArrayBuffer: ~100 MB per step at batch 64).
 */
import { ServeError } from '../../common/errors.js';
import { type Hypothesis, SearchState, type SearchSettings } from './decoding.js';
import { equalStepGroups, planSteps, reachable } from './catch-up.js';
import { type Cohort, type CohortContext, CohortMemory } from './cohort.js';
import { copyRows, gatherRows, mergeCohorts } from './cohort-layout.js';
import { encodeCohort } from './encode.js';
import { emptyGeneratorStats, type GeneratorStats } from './generator-stats.js';
import type { ModelConfig } from './model-config.js';
import type { EngineSessions } from './session.js';
import { type DecoderRun, runDecoder, stepCohort } from './step.js';

export type { GeneratorStats } from './generator-stats.js';

export interface GenerationRequest {
  /** Encoder input: `[__src__] tokens </s>`. */
  inputIds: readonly number[];
  settings: SearchSettings;
}

/** How a caller may end a submitted sequence early. */
export interface SubmitOptions {
  /**
   * Aborting it cancels the sequence: one still waiting leaves the queue at once, one generating leaves its
   * cohort at the next step boundary (all its beams together). Either way the promise rejects with the
   * signal's reason (an Error; anything else is wrapped in one).
   */
  signal?: AbortSignal;
}

interface Waiter {
  request: GenerationRequest;
  state: SearchState;
  /** Settle the caller's promise (and stop listening to its signal). */
  resolve: (hyp: Hypothesis) => void;
  reject: (err: Error) => void;
}

export interface GeneratorOptions {
  sessions: EngineSessions;
  config: ModelConfig;
  /** Most decoder rows (beams included) stepped at once; later sequences wait at the boundary. */
  maxBatchRows: number;
  /**
   * Non-joinable graphs: most steps a row may pause in all so that younger rows catch up and share its decoder
   * runs (catch-up.ts); 0 turns catch-up off. Default 8.
   */
  catchUpSteps?: number;
  /**
   * Non-joinable graphs: most cohorts generating at once; rows that can neither start nor catch up wait at the
   * boundary. Default 2: a second cohort lets new rows start while a long one finishes, at the price of one more
   * decoder run per step.
   */
  maxCohorts?: number;
  /**
   * Called at each step boundary where the decoder ran, once its finished and cancelled rows have left (so
   * `liveRows` is current): a progress signal for watchdogs. Runs inside the loop: it must be cheap and not throw.
   */
  onStep?: () => void;
}

export class Generator {
  readonly #ctx: CohortContext;
  readonly #maxBatchRows: number;
  readonly #catchUpSteps: number;
  readonly #maxCohorts: number;
  readonly #onStep: (() => void) | undefined;
  readonly #pending: Waiter[] = [];
  readonly #waiters = new Map<SearchState, Waiter>();
  /**
   * Generating sequences whose caller cancelled them, with the error they reject with. Abort listeners only add
   * here; the loop removes their rows at the next step boundary (#dropCancelled), never during a run.
   */
  readonly #cancelled = new Map<SearchState, Error>();
  #cohorts: Cohort[] = [];
  #loop: Promise<void> | null = null;
  #closed = false;
  readonly #stats: GeneratorStats = emptyGeneratorStats();

  constructor(options: GeneratorOptions) {
    const { sessions, config } = options;
    this.#maxBatchRows = Math.max(1, options.maxBatchRows);
    this.#catchUpSteps = Math.max(0, Math.floor(options.catchUpSteps ?? 8));
    this.#maxCohorts = Math.max(1, Math.floor(options.maxCohorts ?? 2));
    this.#onStep = options.onStep;
    const inputs = sessions.decoderInputs;
    this.#ctx = {
      sessions,
      config,
      layers: config.decoderLayers,
      heads: config.decoderHeads,
      headDim: config.dModel / config.decoderHeads,
      joinable: sessions.decoderKind === 'merged' && inputs.has('decoder_attention_mask'),
      feedsEncoderMask: inputs.has('encoder_attention_mask'),
      memory: new CohortMemory(config.decoderLayers),
      stats: this.#stats,
    };
  }

  /** True when rows arriving mid-generation merge into the running batch (see module doc). */
  get joinable(): boolean {
    return this.#ctx.joinable;
  }

  /** Counters since load (for benchmarks and metrics). */
  stats(): Readonly<GeneratorStats> {
    return { ...this.#stats };
  }

  /** Rows currently being decoded. */
  get liveRows(): number {
    return this.#cohorts.reduce((sum, c) => sum + c.rows.length, 0);
  }

  /**
   * Queue one sequence; it starts at the next step boundary and resolves with its best hypothesis as
   * soon as it finishes, whatever else is running. See `SubmitOptions.signal` for cancelling it.
   */
  submit(request: GenerationRequest, options: SubmitOptions = {}): Promise<Hypothesis> {
    if (this.#closed) return Promise.reject(new ServeError('SHUTTING_DOWN', 'Translation engine is closed.'));
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<Hypothesis>((resolve, reject) => {
      const onAbort = () => this.#cancel(waiter, abortError(signal!));
      const waiter: Waiter = {
        request,
        state: new SearchState(request.settings),
        resolve: (hyp) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(hyp);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.push(waiter);
      this.#ensureLoop();
    });
  }

  /** A waiting sequence leaves at once; a generating one is marked for the next step boundary. */
  #cancel(waiter: Waiter, error: Error): void {
    const at = this.#pending.indexOf(waiter);
    if (at >= 0) {
      this.#pending.splice(at, 1);
      this.#stats.cancelled++;
      waiter.reject(error);
    } else if (this.#waiters.get(waiter.state) === waiter) {
      this.#cancelled.set(waiter.state, error);
    }
  }

  /**
   * Gather the rows of cancelled sequences out of their cohorts, as finished rows leave, and reject them. Runs at
   * step boundaries only; costs nothing when no sequence was cancelled.
   */
  #dropCancelled(): void {
    if (this.#cancelled.size === 0) return;
    const dropping = performance.now();
    for (const cohort of this.#cohorts) {
      const sources: number[] = [];
      cohort.rows.forEach((row, i) => {
        if (!this.#cancelled.has(row.state)) sources.push(i);
      });
      if (sources.length === cohort.rows.length) continue;
      this.#stats.cancelledRows += cohort.rows.length - sources.length;
      gatherRows(
        this.#ctx,
        cohort,
        sources,
        sources.map((i) => cohort.rows[i]!),
      );
    }
    for (const [state, error] of this.#cancelled) this.#settle(state, error);
    this.#cancelled.clear();
    this.#dropEmpty();
    this.#stats.layoutMs += performance.now() - dropping;
  }

  /**
   * After a decoder run of `cohort` failed with `error`: trial-run halves of its sequences (copies, the cohort
   * untouched) down to single sequences, reject each sequence that fails alone with its error, and gather the
   * others' rows, as finished rows leave. A sequence's beams are tried and dropped together. Costs about
   * 2·log2(sequences) trial runs per bad sequence, on this path only. When no sequence fails alone (an error of
   * the batch as a whole) nothing is dropped and the caller's retry decides.
   */
  async #dropFailing(cohort: Cohort, error: unknown): Promise<void> {
    const sequences: number[][] = [];
    cohort.rows.forEach((row, i) => {
      if (i > 0 && cohort.rows[i - 1]!.state === row.state) sequences[sequences.length - 1]!.push(i);
      else sequences.push([i]);
    });
    const failing = new Map<SearchState, Error>();
    const search = async (group: number[][], known: unknown): Promise<void> => {
      if (group.length === 1) {
        const state = cohort.rows[group[0]![0]!]!.state;
        failing.set(state, known instanceof Error ? known : new Error(String(known)));
        return;
      }
      const half = Math.ceil(group.length / 2);
      for (const part of [group.slice(0, half), group.slice(half)]) {
        try {
          await runDecoder(this.#ctx, copyRows(this.#ctx, cohort, part.flat()));
        } catch (err) {
          await search(part, err);
        }
      }
    };
    await search(sequences, error);
    if (failing.size === 0) return;
    const sources = cohort.rows.flatMap((row, i) => (failing.has(row.state) ? [] : [i]));
    gatherRows(
      this.#ctx,
      cohort,
      sources,
      sources.map((i) => cohort.rows[i]!),
    );
    for (const [state, err] of failing) this.#fail(state, err);
  }

  /** Answer a generating sequence that finished or was cancelled (an Error): exactly once, then forget it. */
  #settle(state: SearchState, outcome: Hypothesis | Error): void {
    const waiter = this.#waiters.get(state);
    if (waiter === undefined) return;
    this.#waiters.delete(state);
    if (outcome instanceof Error) {
      this.#stats.cancelled++;
      waiter.reject(outcome);
    } else {
      if (outcome.tokens.at(-1) !== this.#ctx.config.eosTokenId) this.#stats.cappedRows++;
      waiter.resolve(outcome);
    }
  }

  /** Retire the cohorts no row is left in. */
  #dropEmpty(): void {
    for (const gone of this.#cohorts.filter((c) => c.rows.length === 0)) this.#ctx.memory.retire(gone);
    this.#cohorts = this.#cohorts.filter((c) => c.rows.length > 0);
  }

  #ensureLoop(): void {
    if (this.#loop !== null) return;
    // Start on a microtask: rows submitted in the same tick (one translate() call) share the first batch.
    this.#loop = Promise.resolve()
      .then(() => this.#run())
      .finally(() => {
        this.#loop = null;
        // A submit that landed after the loop's last check but before this callback.
        if (this.#pending.length > 0) this.#ensureLoop();
      });
  }

  /** Stop taking work; resolves once every submitted sequence has finished. */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#loop !== null) await this.#loop;
  }

  async #run(): Promise<void> {
    try {
      while (this.#pending.length > 0 || this.#cohorts.length > 0) {
        // Before admission, so cancelled rows make room; after it, for cancels that came during the encoder run.
        this.#dropCancelled();
        const fresh = await this.#admit();
        if (fresh !== null) this.#cohorts.push(fresh);
        this.#dropCancelled();
        // planSteps needs distinct step counts: #coalesce merged equal ones, and admit adds one cohort at 0 steps.
        const stepping = this.#ctx.joinable ? this.#cohorts : planSteps(this.#cohorts);
        this.#stats.pauses += this.#cohorts.length - stepping.length;
        for (const cohort of stepping) await this.#step(cohort);
        this.#dropEmpty();
        this.#coalesce();
        if (stepping.length > 0) this.#onStep?.();
      }
    } catch (err) {
      // A run that failed for the batch as a whole (no sequence failed alone, and the retry failed too) leaves
      // the cohorts' tensors unusable: fail the rows in flight. Sequences still pending were not part of it; the
      // loop restarts for them (see #ensureLoop).
      const error = err instanceof Error ? err : new Error(String(err));
      for (const waiter of this.#waiters.values()) waiter.reject(this.#cancelled.get(waiter.state) ?? error);
      this.#waiters.clear();
      this.#cancelled.clear();
      for (const cohort of this.#cohorts) this.#ctx.memory.retire(cohort);
      this.#cohorts = [];
    }
  }

  /**
   * Encode what may start of the pending sequences as a new cohort (0 steps taken), or null. Rows fit within
   * `maxBatchRows`; on a non-joinable graph they also wait while `maxCohorts` cohorts run and none of them can
   * wait for newcomers to catch up (an idle engine always takes the first sequence, however wide its beam).
   */
  async #admit(): Promise<Cohort | null> {
    if (this.#pending.length === 0) return null;
    if (
      !this.#ctx.joinable &&
      this.#cohorts.length >= this.#maxCohorts &&
      !(this.#catchUpSteps > 0 && reachable(this.#cohorts))
    ) {
      return null;
    }
    let room = this.#maxBatchRows - this.liveRows;
    const admitted: Waiter[] = [];
    while (this.#pending.length > 0) {
      const rows = this.#pending[0]!.state.settings.numBeams;
      const mustTake = admitted.length === 0 && this.liveRows === 0;
      if (!mustTake && rows > room) break;
      admitted.push(this.#pending.shift()!);
      room -= rows;
    }
    if (admitted.length === 0) return null;
    for (const waiter of admitted) this.#waiters.set(waiter.state, waiter);
    const { cohort, failed } = await encodeCohort(
      this.#ctx,
      admitted.map((w) => ({ inputIds: w.request.inputIds, state: w.state })),
      this.#catchUpSteps,
    );
    for (const { state, error } of failed) this.#fail(state, error);
    return cohort;
  }

  /** Reject a sequence a model run failed on alone (its rows are out of every cohort). */
  #fail(state: SearchState, error: Error): void {
    const waiter = this.#waiters.get(state);
    if (waiter === undefined) return;
    this.#waiters.delete(state);
    this.#cancelled.delete(state);
    this.#stats.failed++;
    waiter.reject(error);
  }

  /**
   * Merge the cohorts that can share decoder runs from now on, each into the earliest-started of its group:
   * with a joinable graph every cohort that has stepped; otherwise those with equal step counts (equal cache
   * lengths: no padding, true positions). A merged cohort keeps the smaller pause budget.
   */
  #coalesce(): void {
    const groups = this.#ctx.joinable
      ? [this.#cohorts.filter((c) => c.steps > 0)]
      : equalStepGroups(this.#cohorts.filter((c) => c.steps > 0));
    for (const [into, ...rest] of groups) {
      if (into === undefined || rest.length === 0) continue;
      // One re-layout for the whole group: merging pairwise would copy the growing tensors once per cohort.
      const merging = performance.now();
      mergeCohorts(this.#ctx, into, rest);
      for (const joining of rest) {
        into.pauseBudget = Math.min(into.pauseBudget, joining.pauseBudget);
        // Its rows now live in `into`'s tensors: its memory is free.
        this.#ctx.memory.retire(joining);
        joining.rows = [];
      }
      this.#stats.layoutMs += performance.now() - merging;
      this.#stats.merges += rest.length;
    }
    this.#cohorts = this.#cohorts.filter((c) => c.rows.length > 0);
  }

  /** One decoder run for `cohort`, then its rows' successors; finished sequences resolve here. */
  async #step(cohort: Cohort): Promise<void> {
    const ctx = this.#ctx;
    let run: DecoderRun;
    try {
      run = await runDecoder(ctx, cohort);
    } catch (err) {
      // A run that failed changed nothing (step.ts): find the sequences it fails on alone, drop them, run the rest.
      await this.#dropFailing(cohort, err);
      if (cohort.rows.length === 0) return;
      run = await runDecoder(ctx, cohort);
    }
    const n = cohort.rows.length;
    const decision = stepCohort(ctx, cohort, run);
    // A sequence cancelled during the run it finished in still answers with its cancellation: its caller has
    // already given up on it (a deadline answered, a client gone).
    for (const state of decision.done) {
      const cancelled = this.#cancelled.get(state);
      this.#cancelled.delete(state);
      this.#settle(state, cancelled ?? state.best());
    }
    const identity = decision.next.length === n && decision.next.every((s, i) => s.source === i);
    if (identity) {
      cohort.rows = decision.next.map((s) => s.row);
      return;
    }
    const gathering = performance.now();
    gatherRows(
      ctx,
      cohort,
      decision.next.map((s) => s.source),
      decision.next.map((s) => s.row),
    );
    this.#stats.layoutMs += performance.now() - gathering;
  }
}

/** The error a cancelled sequence rejects with: its signal's reason when that is an Error. */
function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(`generation cancelled: ${String(reason)}`);
}
