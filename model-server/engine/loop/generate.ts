/**
 * @module engine/generate — the generation step loop: encoder once per admitted group, then the decoder
 * one token per step over the set of live rows, with the merged decoder's KV cache.
 *
 * ```
 * submit() ─▶ pending ─┐   (step boundary)
 *                      ▼
 *   ┌──────── loop: cancelled rows leave; admit pending (encode) → new cohort at step 0
 *   │         step the cohorts the plan picks: decoder(input_ids [n,1], past) → logits or top-2 → decideStep
 *   │         finished rows resolve at once and leave; their cache rows are gathered out
 *   │         (a failed run: the sequences that fail alone leave, rejected; the others run again)
 *   │         merge cohorts that can share a decoder run from now on; onStep()
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
 * Two classes share the engine: interactive rows and *bulk* rows (a long document's sentences, a big batch:
 * SubmitOptions.bulk). They never share a cohort, and while both have rows to step, bulk cohorts step only while
 * their share of the decoder time spent since both were present is under BULK_SHARE. Why: on a CPU a step of 64
 * rows costs many times a step of one, so a single sentence riding in a document's batch is many times slower
 * than alone; stepped apart, it pays for its own runs plus at most BULK_SHARE of the time, and the document still
 * gets a bounded, never starved share. With one class alone, it has the whole engine.
 *
 * Files: this one is the loop and its policy (admission, stepping, merging); sequences.ts the submitted sequences
 * until their answer (queue, cancellation); cohort.ts the cohort state and its memory pools; encode.ts the encoder
 * runs; step.ts a decoder step; cohort-layout.ts gathers and merges.
 *
 * Invariants (the loop is the only writer of cohort state; `submit` and abort listeners only touch `Sequences`):
 * - one decoder or encoder run at a time on the shared sessions;
 * - a row's cache holds exactly its fed tokens, right-aligned (`align: 'end'`), masked where padded;
 * - a sequence's rows (its beams) are adjacent in one cohort, and leave it together (finished, cancelled, failed);
 * - every submitted sequence is answered exactly once (sequences.ts);
 * - no cohort steps twice between two boundaries, and no row pauses more than `catchUpSteps` steps in all;
 * - when rows leave, tensors are gathered and trimmed to the longest remaining content, so a step costs
 *   what its live rows cost; when no row leaves and no beam reorders, nothing is gathered;
 * - the self-attention cache: when the decoder graph exposes what a step appends (decoder-graph.ts), a step
 *   fetches only that and the cohort's CacheBuffers build the next cache in reused memory (kv-cache.ts);
 *   otherwise the whole `present.*.decoder` is fetched (onnxruntime-node copies each fetched output into a
 *   fresh ArrayBuffer: ~100 MB per step at batch 64).
 */
import { ServeError } from '../../../common/errors.js';
import type { Hypothesis } from '../decoding.js';
import { equalStepGroups, planSteps, reachable } from './catch-up.js';
import { type Cohort, type CohortContext, CohortMemory } from './cohort.js';
import { gatherRows, mergeCohorts, removeRows } from './cohort-layout.js';
import { encodeCohort } from './encode.js';
import { encodeOnDevice } from './encode-device.js';
import type { EngineOptions } from '../engine-options.js';
import { emptyGeneratorStats, type GeneratorStats } from './generator-stats.js';
import type { ModelConfig } from '../model-config.js';
import { type GenerationRequest, Sequences, type SubmitOptions } from './sequences.js';
import type { EngineSessions } from '../session.js';
import { type DecoderRun, failingSequences, runDecoder, stepCohort } from './step.js';

export type { GeneratorStats } from './generator-stats.js';
export type { GenerationRequest, SubmitOptions } from './sequences.js';

export interface GeneratorOptions extends Pick<EngineOptions, 'catchUpSteps' | 'maxCohorts' | 'onStep'> {
  sessions: EngineSessions;
  config: ModelConfig;
  /** Most decoder rows (beams included) stepped at once; later sequences wait at the boundary. */
  maxBatchRows: number;
}

/** Most of the decoder time bulk cohorts take while interactive rows generate. */
export const BULK_SHARE = 1 / 3;

export class Generator {
  readonly #ctx: CohortContext;
  readonly #maxBatchRows: number;
  readonly #catchUpSteps: number;
  readonly #maxCohorts: number;
  readonly #onStep: (() => void) | undefined;
  /** Work waiting for the next step boundary (`atBoundary`); run and emptied by the loop, in order. */
  readonly #boundaryTasks: ((generating: boolean) => Promise<void>)[] = [];
  readonly #sequences: Sequences;
  #cohorts: Cohort[] = [];
  /** Decoder time of each class since both last had rows to step (reset when one has none). */
  #contention = { bulkMs: 0, interactiveMs: 0 };
  #loop: Promise<void> | null = null;
  #closed = false;
  readonly #stats: GeneratorStats = emptyGeneratorStats();

  constructor(options: GeneratorOptions) {
    const { sessions, config } = options;
    this.#maxBatchRows = Math.max(1, options.maxBatchRows);
    this.#catchUpSteps = Math.max(0, Math.floor(options.catchUpSteps ?? 8));
    this.#maxCohorts = Math.max(1, Math.floor(options.maxCohorts ?? 2));
    this.#onStep = options.onStep;
    this.#sequences = new Sequences(this.#stats, config.eosTokenId);
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

  /** True when a sequence can keep its steps' cross-attention (SubmitOptions.onAttention). */
  get keepsAttention(): boolean {
    return this.#ctx.sessions.kind === 'host' && this.#ctx.sessions.decoderOutputs.crossAttention !== null;
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
    const answer = this.#sequences.add(request, options);
    this.#ensureLoop();
    return answer;
  }

  /**
   * Gather the rows of cancelled sequences out of their cohorts, as finished rows leave, and reject them. Runs at
   * step boundaries only; costs nothing when no sequence was cancelled.
   */
  async #dropCancelled(): Promise<void> {
    const cancelled = this.#sequences.cancelled;
    if (cancelled.size === 0) return;
    const dropping = performance.now();
    for (const cohort of this.#cohorts) this.#stats.cancelledRows += await removeRows(this.#ctx, cohort, cancelled);
    for (const [state, error] of [...cancelled]) this.#sequences.reject(state, error);
    this.#dropEmpty();
    this.#stats.layoutMs += performance.now() - dropping;
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
        // Work that came after the last boundary: nothing is generating now, so it runs at once, in order.
        void this.#boundaryTasks.splice(0).reduce((done, task) => done.then(() => task(false)), Promise.resolve());
        // A submit that landed after the loop's last check but before this callback.
        if (this.#sequences.waiting > 0) this.#ensureLoop();
      });
  }

  /**
   * Run `task` at the next step boundary, with no decoder run beside it (other work on the engine's sessions, such
   * as the alignment pass, would otherwise share the cores with a step), or after this turn of the event loop when
   * nothing is generating. `generating`: whether steps follow this boundary (a task may wait for the next one).
   */
  atBoundary(task: (generating: boolean) => Promise<void>): Promise<void> {
    // Idle: after this turn of the event loop, so that work asked for in it goes together.
    if (this.#loop === null) return new Promise<void>((resolve) => setImmediate(resolve)).then(() => task(false));
    return new Promise((resolve, reject) => this.#boundaryTasks.push((g) => task(g).then(resolve, reject)));
  }

  /** Stop taking work; resolves once every submitted sequence has finished. */
  async close(): Promise<void> {
    this.#closed = true;
    while (this.#loop !== null) await this.#loop;
  }

  /** Whether the loop steps again: rows wait to start or are generating. */
  get #generating(): boolean {
    return this.#sequences.waiting > 0 || this.#cohorts.length > 0;
  }

  async #run(): Promise<void> {
    try {
      while (this.#generating) {
        // Before admission, so cancelled rows make room; after it, for cancels that came during the encoder run.
        await this.#dropCancelled();
        this.#cohorts.push(...(await this.#admit()));
        await this.#dropCancelled();
        const stepping = this.#plan();
        const contended = this.#cohorts.some((c) => c.bulk) && this.#cohorts.some((c) => !c.bulk);
        for (const cohort of stepping) {
          const started = performance.now();
          await this.#step(cohort);
          const ms = performance.now() - started;
          if (cohort.bulk) this.#contention.bulkMs += ms;
          else this.#contention.interactiveMs += ms;
          if (contended && cohort.bulk) this.#stats.contendedBulkMs += ms;
          else if (contended) this.#stats.contendedInteractiveMs += ms;
        }
        this.#dropEmpty();
        await this.#coalesce();
        if (stepping.length > 0) this.#onStep?.();
        for (const task of this.#boundaryTasks.splice(0)) await task(this.#generating);
      }
    } catch (err) {
      // A run that failed for the batch as a whole (no sequence failed alone, and the retry failed too) leaves
      // the cohorts' tensors unusable: fail the rows in flight. Sequences still pending were not part of it; the
      // loop restarts for them (see #ensureLoop).
      this.#sequences.rejectGenerating(err instanceof Error ? err : new Error(String(err)));
      for (const cohort of this.#cohorts) this.#ctx.memory.retire(cohort);
      this.#cohorts = [];
    }
  }

  /**
   * The cohorts that step at this boundary: per class, what the catch-up plan picks (planSteps needs distinct
   * step counts: #coalesce merged equal ones, and admission adds at most one cohort at 0 steps per class); and
   * while both classes have cohorts to step, the bulk ones only while under their share of the time (module doc).
   */
  #plan(): Cohort[] {
    const plan = (cohorts: Cohort[]) => {
      const stepping = this.#ctx.joinable ? cohorts : planSteps(cohorts);
      this.#stats.pauses += cohorts.length - stepping.length;
      return stepping;
    };
    const interactive = plan(this.#cohorts.filter((c) => !c.bulk));
    const bulkCohorts = this.#cohorts.filter((c) => c.bulk);
    if (interactive.length === 0 || bulkCohorts.length === 0) this.#contention = { bulkMs: 0, interactiveMs: 0 };
    const { bulkMs, interactiveMs } = this.#contention;
    const bulkTurn = interactive.length === 0 || bulkMs < BULK_SHARE * (bulkMs + interactiveMs);
    // Not its turn: the bulk cohorts wait whole, without spending their catch-up budgets.
    return bulkTurn ? [...interactive, ...plan(bulkCohorts)] : interactive;
  }

  /**
   * Encode what may start of the pending sequences, each class as its own new cohort (0 steps taken), interactive
   * first. Rows fit within `maxBatchRows`; on a non-joinable graph a class's rows also wait while `maxCohorts` of
   * its cohorts run and none of them can wait for newcomers to catch up (an idle engine always takes the first
   * sequence, however wide its beam).
   */
  async #admit(): Promise<Cohort[]> {
    const fresh: Cohort[] = [];
    let live = this.liveRows;
    for (const bulk of [false, true]) {
      if (this.#sequences.waitingOf(bulk) === 0) continue;
      const mine = this.#cohorts.filter((c) => (c.bulk ?? false) === bulk);
      if (!this.#ctx.joinable && mine.length >= this.#maxCohorts && !(this.#catchUpSteps > 0 && reachable(mine))) {
        continue;
      }
      const admitted = this.#sequences.admit(this.#maxBatchRows - live, live === 0, bulk);
      if (admitted.length === 0) continue;
      live += admitted.reduce((n, a) => n + a.state.settings.numBeams, 0);
      const { sessions } = this.#ctx;
      const { cohort, failed } =
        sessions.kind === 'host'
          ? await encodeCohort(this.#ctx, admitted, this.#catchUpSteps)
          : await encodeOnDevice(this.#ctx, sessions, admitted, this.#catchUpSteps);
      for (const { state, error } of failed) this.#sequences.reject(state, error);
      if (cohort === null) continue;
      cohort.bulk = bulk;
      fresh.push(cohort);
    }
    return fresh;
  }

  /**
   * Merge the cohorts of one class that can share decoder runs from now on, each into the earliest-started of its group:
   * with a joinable graph every cohort that has stepped; otherwise those with equal step counts (equal cache
   * lengths: no padding, true positions). A merged cohort keeps the smaller pause budget.
   */
  async #coalesce(): Promise<void> {
    const groups = [false, true].flatMap((bulk) => {
      const stepped = this.#cohorts.filter((c) => c.steps > 0 && (c.bulk ?? false) === bulk);
      return this.#ctx.joinable ? [stepped] : equalStepGroups(stepped);
    });
    for (const [into, ...rest] of groups) {
      if (into === undefined || rest.length === 0) continue;
      // One re-layout for the whole group: merging pairwise would copy the growing tensors once per cohort.
      const merging = performance.now();
      await mergeCohorts(this.#ctx, into, rest);
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
      // A run that failed changed nothing (step.ts): drop the sequences it fails on alone, run the rest. When none
      // fails alone this retries the whole cohort once, and a second failure fails every row in flight (#run).
      const failing = await failingSequences(ctx, cohort, err);
      await removeRows(ctx, cohort, failing);
      for (const [state, error] of failing) this.#sequences.reject(state, error);
      if (cohort.rows.length === 0) return;
      run = await runDecoder(ctx, cohort);
    }
    const n = cohort.rows.length;
    const decision = stepCohort(ctx, cohort, run);
    for (const state of decision.done) this.#sequences.finish(state);
    const sources = decision.next.map((s) => s.source);
    const rows = decision.next.map((s) => s.row);
    if (sources.length === n && sources.every((source, i) => source === i)) {
      cohort.rows = rows;
      return;
    }
    const gathering = performance.now();
    await gatherRows(ctx, cohort, sources, rows);
    this.#stats.layoutMs += performance.now() - gathering;
  }
}
