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
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { ServeError } from '../../common/errors.js';
import {
  decideStep,
  type Hypothesis,
  type Row,
  SearchState,
  type SearchSettings,
  type StepScores,
} from './decoding.js';
import { equalStepGroups, planSteps, reachable } from './catch-up.js';
import { CacheBufferPool, CacheBuffers } from './kv-cache.js';
import type { ModelConfig } from './model-config.js';
import { relayoutRows, type RowSource } from './row-layout.js';
import { sourceBuckets } from './source-buckets.js';
import type { EngineSessions } from './session.js';

/** Most cache positions a cohort's buffers are sized for up front (see #expectedCacheLength). */
const EXPECTED_CACHE_CAP = 32;

/**
 * Room a new pooled row tensor gets beyond what it needs, so the next batch's (a source a few tokens longer)
 * still fits in it instead of allocating again.
 */
const ROW_TENSOR_HEADROOM = 1.25;

export interface GenerationRequest {
  /** Encoder input: `[__src__] tokens </s>`. */
  inputIds: readonly number[];
  settings: SearchSettings;
}

export interface GeneratorStats {
  /** Decoder runs. */
  decoderRuns: number;
  /** Sum over decoder runs of the rows in the run (beams count once each). */
  decoderRows: number;
  /** Admitted groups encoded (each starts one cohort). */
  encoderRuns: number;
  /** onnxruntime encoder calls (an admitted group is encoded in groups of similar source length). */
  encoderCalls: number;
  encodedRows: number;
  /** Cohorts merged into another (rows that joined mid-generation, or caught up with an older cohort). */
  merges: number;
  /** Cohort-steps skipped so that a younger cohort could catch up (catch-up.ts). */
  pauses: number;
  /** Wall time inside encoder runs, decoder runs, search decisions and tensor re-layouts, cache appends included (ms). */
  encoderMs: number;
  decoderMs: number;
  searchMs: number;
  layoutMs: number;
}

interface Waiter {
  request: GenerationRequest;
  state: SearchState;
  resolve: (hyp: Hypothesis) => void;
  reject: (err: Error) => void;
}

/** Batched tensors of one cohort (see module doc for layouts). */
interface Cohort {
  rows: Row[];
  /** `[n, S, d]` encoder output, right-padded. */
  encoderStates: Float32Array;
  /** `[n, S]` 1 for real source tokens. */
  encoderMask: BigInt64Array;
  /** Real source length per row. */
  encoderLengths: number[];
  encoderLength: number;
  /** Per layer `[key, value]` of the cross-attention cache `[n, H, S, dh]`; null before the first step. */
  crossCache: Float32Array[] | null;
  /** Per layer `[key, value]` of the self-attention cache `[n, H, P, dh]`. */
  selfCache: Float32Array[] | null;
  /** Where the cache is built step by step when the decoder returns only appended entries (else null). */
  cacheBuffers: CacheBuffers | null;
  pastLength: number;
  /** `[n, P]` 1 for real cache positions (joinable graphs only). */
  selfMask: BigInt64Array | null;
  /** Decoder steps taken by every row of the cohort (rows of one cohort always have taken the same number). */
  steps: number;
  /** Steps this cohort may still pause for a younger one to catch up (catch-up.ts). */
  pauseBudget: number;
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
}

export class Generator {
  readonly #sessions: EngineSessions;
  readonly #config: ModelConfig;
  readonly #maxBatchRows: number;
  readonly #catchUpSteps: number;
  readonly #maxCohorts: number;
  readonly #heads: number;
  readonly #headDim: number;
  readonly #layers: number;
  /** Whether rows with different cache lengths can share a decoder run. */
  readonly #joinable: boolean;
  readonly #feedsEncoderMask: boolean;
  readonly #pending: Waiter[] = [];
  readonly #waiters = new Map<SearchState, Waiter>();
  /** Self-attention cache memory shared by the cohorts (two cohorts' worth kept between batches). */
  readonly #cachePool: CacheBufferPool;
  /**
   * Memory of re-laid-out row tensors (encoder states, cross-attention cache, self cache after a gather or a
   * merge): one cohort's worth kept. A merge of a 64-row wave re-lays ~300 MB of cross-attention cache; into
   * fresh arrays that took 0.2–1.1 s here (first-touch page faults), into reused memory ~30 ms.
   */
  readonly #rowPool: CacheBufferPool;
  #cohorts: Cohort[] = [];
  #loop: Promise<void> | null = null;
  #closed = false;
  readonly #stats: GeneratorStats = {
    decoderRuns: 0,
    decoderRows: 0,
    encoderRuns: 0,
    encoderCalls: 0,
    encodedRows: 0,
    merges: 0,
    pauses: 0,
    encoderMs: 0,
    decoderMs: 0,
    searchMs: 0,
    layoutMs: 0,
  };

  constructor(options: GeneratorOptions) {
    this.#sessions = options.sessions;
    this.#config = options.config;
    this.#maxBatchRows = Math.max(1, options.maxBatchRows);
    this.#catchUpSteps = Math.max(0, Math.floor(options.catchUpSteps ?? 8));
    this.#maxCohorts = Math.max(1, Math.floor(options.maxCohorts ?? 2));
    this.#heads = options.config.decoderHeads;
    this.#headDim = options.config.dModel / options.config.decoderHeads;
    this.#layers = options.config.decoderLayers;
    const inputs = options.sessions.decoderInputs;
    this.#joinable = options.sessions.decoderKind === 'merged' && inputs.has('decoder_attention_mask');
    this.#feedsEncoderMask = inputs.has('encoder_attention_mask');
    this.#cachePool = new CacheBufferPool(2 * 2 * 2 * this.#layers);
    this.#rowPool = new CacheBufferPool(1 + 2 * 2 * this.#layers);
  }

  /** True when rows arriving mid-generation merge into the running batch (see module doc). */
  get joinable(): boolean {
    return this.#joinable;
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
   * soon as it finishes, whatever else is running.
   */
  submit(request: GenerationRequest): Promise<Hypothesis> {
    if (this.#closed) return Promise.reject(new ServeError('SHUTTING_DOWN', 'Translation engine is closed.'));
    return new Promise<Hypothesis>((resolve, reject) => {
      this.#pending.push({ request, state: new SearchState(request.settings), resolve, reject });
      this.#ensureLoop();
    });
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
        const fresh = await this.#admit();
        if (fresh !== null) this.#cohorts.push(fresh);
        // planSteps needs distinct step counts: #coalesce merged equal ones, and admit adds one cohort at 0 steps.
        const stepping = this.#joinable ? this.#cohorts : planSteps(this.#cohorts);
        this.#stats.pauses += this.#cohorts.length - stepping.length;
        for (const cohort of stepping) await this.#step(cohort);
        for (const gone of this.#cohorts.filter((c) => c.rows.length === 0)) this.#retire(gone);
        this.#cohorts = this.#cohorts.filter((c) => c.rows.length > 0);
        this.#coalesce();
      }
    } catch (err) {
      // A failed run leaves the cohorts' tensors unusable: fail the rows in flight. Sequences still
      // pending were not part of it; the loop restarts for them (see #ensureLoop).
      const error = err instanceof Error ? err : new Error(String(err));
      for (const waiter of this.#waiters.values()) waiter.reject(error);
      this.#waiters.clear();
      for (const cohort of this.#cohorts) this.#retire(cohort);
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
      !this.#joinable &&
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
    return this.#encode(admitted);
  }

  /**
   * Merge the cohorts that can share decoder runs from now on, each into the earliest-started of its group:
   * with a joinable graph every cohort that has stepped; otherwise those with equal step counts (equal cache
   * lengths: no padding, true positions). A merged cohort keeps the smaller pause budget.
   */
  #coalesce(): void {
    const groups = this.#joinable
      ? [this.#cohorts.filter((c) => c.steps > 0)]
      : equalStepGroups(this.#cohorts.filter((c) => c.steps > 0));
    for (const [into, ...rest] of groups) {
      if (into === undefined || rest.length === 0) continue;
      // One re-layout for the whole group: merging pairwise would copy the growing tensors once per cohort.
      const merging = performance.now();
      this.#merge(into, rest);
      for (const joining of rest) {
        into.pauseBudget = Math.min(into.pauseBudget, joining.pauseBudget);
        // Its rows now live in `into`'s tensors: its memory is free.
        this.#retire(joining);
        joining.rows = [];
      }
      this.#stats.layoutMs += performance.now() - merging;
      this.#stats.merges += rest.length;
    }
    this.#cohorts = this.#cohorts.filter((c) => c.rows.length > 0);
  }

  /**
   * Encode the admitted rows in groups of similar source length (source-buckets.ts), scattering each
   * group's states into one right-padded `[n, S, d]` cohort tensor in admission order.
   */
  async #encode(admitted: Waiter[]): Promise<Cohort> {
    const n = admitted.length;
    const d = this.#config.dModel;
    const lengths = admitted.map((w) => w.request.inputIds.length);
    const S = Math.max(...lengths);
    const mask = new BigInt64Array(n * S);
    lengths.forEach((length, r) => mask.fill(1n, r * S, r * S + length));
    const encoderStates = this.#pooled(n * S * d).fill(0);
    for (const group of sourceBuckets(lengths)) {
      const m = group.length;
      const Sg = Math.max(...group.map((r) => lengths[r]!));
      const ids = new BigInt64Array(m * Sg).fill(BigInt(this.#config.padTokenId));
      const groupMask = new BigInt64Array(m * Sg);
      group.forEach((r, j) => {
        admitted[r]!.request.inputIds.forEach((id, t) => (ids[j * Sg + t] = BigInt(id)));
        groupMask.fill(1n, j * Sg, j * Sg + lengths[r]!);
      });
      const started = performance.now();
      const out = await this.#sessions.encoder.run({
        input_ids: new ort.Tensor('int64', ids, [m, Sg]),
        attention_mask: new ort.Tensor('int64', groupMask, [m, Sg]),
      });
      this.#stats.encoderMs += performance.now() - started;
      this.#stats.encoderCalls++;
      const states = out.last_hidden_state?.data as Float32Array | undefined;
      if (states === undefined) throw new Error('encoder returned no last_hidden_state');
      // Real positions only; the padding stays zero (masked everywhere downstream).
      group.forEach((r, j) => encoderStates.set(states.subarray(j * Sg * d, (j * Sg + lengths[r]!) * d), r * S * d));
    }
    this.#stats.encoderRuns++;
    this.#stats.encodedRows += n;
    return {
      rows: admitted.map((w) => ({ state: w.state, hyp: { tokens: [], logprob: 0 } })),
      encoderStates,
      encoderMask: mask,
      encoderLengths: lengths,
      encoderLength: S,
      crossCache: null,
      selfCache: null,
      cacheBuffers:
        this.#sessions.decoderOutputs.appendedCache !== null
          ? new CacheBuffers(this.#cachePool, 2 * this.#layers, this.#expectedCacheLength(admitted))
          : null,
      pastLength: 0,
      selfMask: this.#joinable ? new BigInt64Array(0) : null,
      steps: 0,
      pauseBudget: this.#catchUpSteps,
    };
  }

  /**
   * Cache length to size new cache buffers for: the start token plus every token but the last, for the
   * longest allowed output, capped so a large maxNewTokens that rows rarely reach does not reserve memory
   * for it (past the cap buffers grow ×1.5).
   */
  #expectedCacheLength(admitted: Waiter[]): number {
    return Math.min(EXPECTED_CACHE_CAP, Math.max(...admitted.map((w) => w.state.settings.maxNewTokens)));
  }

  /** An exact-length view of pooled memory for a row tensor; its old contents are the caller's to overwrite. */
  #pooled(length: number): Float32Array {
    if (length === 0) return new Float32Array(0);
    return this.#rowPool.take(length, Math.ceil(length * ROW_TENSOR_HEADROOM)).subarray(0, length);
  }

  /**
   * Give `cohort`'s row tensors back to the pools (its rows are gone or live in other tensors now) and leave it
   * holding none, so it cannot give them twice. Row tensors first: `holds` must see the cache buffers.
   */
  #retire(cohort: Cohort): void {
    this.#recycleRowTensors(cohort);
    cohort.cacheBuffers?.release();
  }

  #recycleRowTensors(cohort: Cohort): void {
    this.#rowPool.recycle(cohort.encoderStates);
    for (const tensor of cohort.crossCache ?? []) this.#rowPool.recycle(tensor);
    cohort.selfCache?.forEach((tensor, k) => this.#recycleLoose(cohort, k, tensor));
    cohort.encoderStates = new Float32Array(0);
    cohort.crossCache = null;
    cohort.selfCache = null;
  }

  /** Recycle self-cache tensor `k` unless it is a view of the cohort's cache buffers (those are only released). */
  #recycleLoose(cohort: Cohort, k: number, tensor: Float32Array): void {
    if (!(cohort.cacheBuffers?.holds(k, tensor) ?? false)) this.#rowPool.recycle(tensor);
  }

  /** One decoder run for `cohort`, then its rows' successors; finished sequences resolve here. */
  async #step(cohort: Cohort): Promise<void> {
    const { rows } = cohort;
    const n = rows.length;
    const d = this.#config.dModel;
    const S = cohort.encoderLength;
    const cached = this.#sessions.decoderKind === 'merged';
    const start = this.#config.decoderStartTokenId;
    // With the cache a step feeds each row's last token; without it, the whole prefix again.
    const T = cached ? 1 : 1 + rows[0]!.hyp.tokens.length;
    const ids = new BigInt64Array(n * T);
    rows.forEach((row, r) => {
      const tokens = row.hyp.tokens;
      if (cached) ids[r] = BigInt(tokens.length === 0 ? start : tokens[tokens.length - 1]!);
      else for (let t = 0; t < T; t++) ids[r * T + t] = BigInt(t === 0 ? start : tokens[t - 1]!);
    });
    const feeds: Record<string, ort.Tensor> = {
      input_ids: new ort.Tensor('int64', ids, [n, T]),
      encoder_hidden_states: new ort.Tensor('float32', cohort.encoderStates, [n, S, d]),
    };
    if (this.#feedsEncoderMask) feeds.encoder_attention_mask = new ort.Tensor('int64', cohort.encoderMask, [n, S]);
    const P = cohort.pastLength;
    let selfMask: BigInt64Array | null = null;
    if (this.#sessions.decoderInputs.has('decoder_attention_mask')) {
      // Cached: the row's cache mask plus the new position. Uncached: every fed position is real.
      selfMask = new BigInt64Array(n * (P + T)).fill(1n);
      if (cohort.selfMask !== null && P > 0) {
        for (let r = 0; r < n; r++) selfMask.set(cohort.selfMask.subarray(r * P, (r + 1) * P), r * (P + 1));
      }
      feeds.decoder_attention_mask = new ort.Tensor('int64', selfMask, [n, P + T]);
    }
    const H = this.#heads;
    const dh = this.#headDim;
    const first = cohort.crossCache === null;
    const { appendedCache, greedyTop2 } = this.#sessions.decoderOutputs;
    // All-greedy steps fetch the decoder's top-2 (4 values per row) instead of vocab logits per row.
    const top2 = greedyTop2 !== null && rows.every((r) => r.state.settings.strategy === 'greedy') ? greedyTop2 : null;
    const fetches = top2 !== null ? [top2.values, top2.ids] : ['logits'];
    if (this.#sessions.decoderInputs.has('use_cache_branch')) {
      feeds.use_cache_branch = new ort.Tensor('bool', Uint8Array.of(cached && !first ? 1 : 0), [1]);
      const empty = new Float32Array(0);
      for (let i = 0; i < this.#layers; i++) {
        ['key', 'value'].forEach((part, j) => {
          const self = cached && cohort.selfCache !== null ? cohort.selfCache[2 * i + j]! : empty;
          feeds[`past_key_values.${i}.decoder.${part}`] = new ort.Tensor('float32', self, [
            n,
            H,
            self === empty ? 0 : P,
            dh,
          ]);
          const cross = cached && !first ? cohort.crossCache![2 * i + j]! : empty;
          feeds[`past_key_values.${i}.encoder.${part}`] = new ort.Tensor('float32', cross, [
            n,
            H,
            cross === empty ? 0 : S,
            dh,
          ]);
          if (cached) {
            fetches.push(appendedCache?.[2 * i + j] ?? `present.${i}.decoder.${part}`);
            if (first) fetches.push(`present.${i}.encoder.${part}`);
          }
        });
      }
    }
    const started = performance.now();
    const out = await this.#sessions.decoder.run(feeds, fetches);
    const ran = performance.now();
    this.#stats.decoderMs += ran - started;
    this.#stats.decoderRuns++;
    this.#stats.decoderRows += n;
    cohort.steps++;

    const decision = decideStep(rows, this.#scores(out, top2), this.#config.eosTokenId);
    this.#stats.searchMs += performance.now() - ran;

    if (cached) {
      const building = performance.now();
      const past = cohort.selfCache;
      const buffers = cohort.cacheBuffers;
      cohort.selfCache = [];
      for (let i = 0; i < this.#layers; i++) {
        ['key', 'value'].forEach((part, j) => {
          const k = 2 * i + j;
          if (appendedCache === null || buffers === null) {
            cohort.selfCache!.push(out[`present.${i}.decoder.${part}`]!.data as Float32Array);
            return;
          }
          // One copy of the cache per step, into a buffer the past is not in (kv-cache.ts).
          const appended = out[appendedCache[k]!]!.data as Float32Array;
          cohort.selfCache!.push(buffers.append(k, past?.[k] ?? new Float32Array(0), appended, n * H, P, dh));
          // A past re-laid out by a gather or merge was copied in: its memory is free.
          if (past?.[k] !== undefined) this.#recycleLoose(cohort, k, past[k]);
        });
      }
      this.#stats.layoutMs += performance.now() - building;
      if (first) {
        cohort.crossCache = [];
        for (let i = 0; i < this.#layers; i++) {
          for (const part of ['key', 'value'])
            cohort.crossCache.push(out[`present.${i}.encoder.${part}`]!.data as Float32Array);
        }
      }
      cohort.pastLength = P + 1;
      cohort.selfMask = selfMask;
    }

    for (const state of decision.done) {
      const waiter = this.#waiters.get(state);
      this.#waiters.delete(state);
      waiter?.resolve(state.best());
    }
    const identity = decision.next.length === n && decision.next.every((s, i) => s.source === i);
    if (identity) {
      cohort.rows = decision.next.map((s) => s.row);
      return;
    }
    const gathering = performance.now();
    this.#gather(
      cohort,
      decision.next.map((s) => s.source),
      decision.next.map((s) => s.row),
    );
    this.#stats.layoutMs += performance.now() - gathering;
  }

  /** The last position's scores per row from a decoder run: its top-2 outputs or its logits. */
  #scores(out: ort.InferenceSession.ReturnType, top2: { values: string; ids: string } | null): StepScores {
    if (top2 !== null) {
      const values = out[top2.values];
      const ids = out[top2.ids];
      if (values === undefined || ids === undefined) throw new Error('decoder returned no top-2 outputs');
      const stride = values.dims[1]! * 2;
      return {
        kind: 'top2',
        values: values.data as Float32Array,
        ids: ids.data as BigInt64Array,
        stride,
        offset: stride - 2,
      };
    }
    const logits = out.logits;
    if (logits === undefined) throw new Error('decoder returned no logits');
    const stride = logits.dims[1]! * logits.dims[2]!;
    return {
      kind: 'logits',
      data: logits.data as Float32Array,
      stride,
      offset: stride - logits.dims[2]!,
      vocab: Math.min(this.#config.vocabSize, logits.dims[2]!),
    };
  }

  /**
   * Rebuild `cohort` from rows `sources` of itself (rows left, beams reordered), trimming padding that
   * no remaining row needs.
   */
  #gather(cohort: Cohort, sources: number[], rows: Row[]): void {
    cohort.rows = rows;
    if (rows.length === 0) return;
    const encoderLengths = sources.map((s) => cohort.encoderLengths[s]!);
    const S = Math.max(...encoderLengths);
    // A row's cache holds the tokens fed so far: the start token and all its tokens but the newest.
    const P = cohort.selfCache === null ? 0 : Math.max(...rows.map((r) => r.hyp.tokens.length));
    this.#relayout(cohort, [{ cohort, rows: sources }], S, P);
    cohort.encoderLengths = encoderLengths;
  }

  /** Append the `joining` cohorts' rows to `running` (all have had their first step), padding to common lengths. */
  #merge(running: Cohort, joining: readonly Cohort[]): void {
    const all = [running, ...joining];
    const S = Math.max(...all.map((c) => c.encoderLength));
    const P = Math.max(...all.map((c) => c.pastLength));
    this.#relayout(
      running,
      all.map((cohort) => ({ cohort, rows: cohort.rows.map((_, i) => i) })),
      S,
      P,
    );
    running.rows = all.flatMap((c) => c.rows);
    running.encoderLengths = all.flatMap((c) => c.encoderLengths);
  }

  /** Replace `target`'s tensors with the listed rows of the given cohorts, at lengths S (encoder) and P (cache). */
  #relayout(target: Cohort, parts: { cohort: Cohort; rows: number[] }[], S: number, P: number): void {
    const d = this.#config.dModel;
    const H = this.#heads;
    const dh = this.#headDim;
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
      this.#pooled(rows * S * d),
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
          this.#pooled(rows * H * S * dh),
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
          this.#pooled(rows * H * P * dh),
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
    for (const cohort of new Set(parts.map((p) => p.cohort))) this.#recycleRowTensors(cohort);
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
}
