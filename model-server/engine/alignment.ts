/**
 * @module engine/alignment — which source characters each word of a translation comes from, read from the model's
 * own cross-attention (as Marian and Firefox's Bergamot place tags): row i of a middle layer's cross-attention,
 * averaged over heads (graphs/cross-attention.ts), is what the decoder attended to when it wrote tᵢ. Each target
 * token is linked to the source token it attends to most, special and language tokens left out on both sides.
 *
 * Where the rows come from:
 * - a row generated with `align` on the host path (greedy or beams) keeps them from its own steps: the step loop's
 *   graph carries the layer's attention as an output, a step fetches it only for cohorts holding such a row, and each
 *   hypothesis carries its trail (loop/step.ts, decoding.ts `Hypothesis.attention`); the row is answered at its last
 *   step, no pass, no encoder states kept;
 * - any other row (the search graph's, the device path's, one generated without `align`, or a model whose step
 *   graph could not be given the output) takes one teacher-forced decoder pass over the tokens it generated: the
 *   decoder is fed `[start, t₀ … tₙ₋₂]` in one run with an empty self-attention cache, which gives the same rows.
 *
 * The pass's cost, paid only by rows that take it, after their generation: one run of T decoder positions through
 * the layers up to the one read, its cross-attention graph joined in front (the keys and values never cross to the
 * host), in a session of its own (a graph cut down to what computes the attention: no layers above it, no LM head),
 * run at a step boundary with no decoder step beside it, for every row that asked since (padded, `MAX_ALIGN_ROWS` at
 * a time) once `MIN_ALIGN_ROWS` have gathered, the oldest has waited `MAX_ALIGN_WAIT_MS`, or the loop stops. The
 * encoder does not run again for a row generated with `align` whose steps gave no attention (engine-options.ts): its
 * cohort hands it a copy of the row's own `[S, d_model]` states (loop/encode.ts), kept until its pass; that was most
 * of the pass (an encoder run costs ~2× the decoder run of the same rows on bench-mid). Rows without them (the search
 * graph's, the device path's: loop/encode-device.ts) are encoded in the pass. What is left is mostly the decoder
 * run's attention over T positions.
 */
import * as ort from 'onnxruntime-node';
import { CROSS_ATTENTION_OUTPUT } from './graphs/cross-attention.js';
import type { ModelConfig } from './model-config.js';
import type { AlignmentOpener, AlignmentSessions } from './session.js';
import type { TranslationTokenizer } from './tokens/tokenizer.js';

/**
 * Links from a translation's characters to its source's, flat: per target token `targetStart, targetEnd,
 * sourceStart, sourceEnd` (UTF-16 offsets, ends exclusive), in target order. Tokens whose characters could not be
 * placed are left out.
 */
export type WordAlignment = number[];

/** What a translation generated with `align` brings to its alignment (engine.ts): either spares work. */
export interface AlignmentSource {
  /** Per generated token, the read layer's cross-attention over its source (`[S]`, S its `inputIds`): no pass. */
  attention?: readonly Float32Array[];
  /** The source's encoder states from its generation (`[S, d_model]`): the pass does not encode it again. */
  states?: Float32Array;
}

/** A row waiting for the next alignment batch. */
interface Pending {
  inputIds: readonly number[];
  tokenIds: readonly number[];
  /** The source's encoder states from its generation (`[S, d_model]`); absent: the pass encodes it. */
  states: Float32Array | undefined;
  askedAt: number;
  resolve(attention: Float32Array | null): void;
  reject(err: unknown): void;
}

/** The alignment passes since load (`engine.alignmentStats()`). */
export interface AlignmentStats {
  /** Rows aligned from their own steps' attention, with no pass. */
  stepRows: number;
  /** Passes run (each up to `MAX_ALIGN_ROWS` rows). */
  runs: number;
  rows: number;
  /** Rows whose source the pass encoded again: generated without their states kept. */
  encodedRows: number;
  /** Time in the passes (their runs and the feeds they pack), ms. */
  ms: number;
}

/** Rows aligned in one run at most. */
const MAX_ALIGN_ROWS = 64;
/** Rows a pass waits to gather while the step loop runs on; fewer go at once when it stops. */
const MIN_ALIGN_ROWS = 16;
/** Longest a row waits for others to gather, ms: an interactive sentence among a document's rows is not held long. */
const MAX_ALIGN_WAIT_MS = 200;

export class Aligner {
  readonly #opener: AlignmentOpener;
  readonly #config: ModelConfig;
  readonly #tokenizer: TranslationTokenizer;
  readonly #atBoundary: (task: (generating: boolean) => Promise<void>) => Promise<void>;
  /** Rows asked for and not yet in a run; a run is scheduled while it is not empty. */
  #pending: Pending[] = [];
  #scheduled = false;
  readonly #stats: AlignmentStats = { stepRows: 0, runs: 0, rows: 0, encodedRows: 0, ms: 0 };

  /**
   * @param atBoundary runs a task at the step loop's next boundary, alone (loop/generate.ts `atBoundary`): a pass
   *   beside a decoder step would share its cores, and slow both
   */
  constructor(
    opener: AlignmentOpener,
    config: ModelConfig,
    tokenizer: TranslationTokenizer,
    atBoundary: (task: (generating: boolean) => Promise<void>) => Promise<void>,
  ) {
    this.#opener = opener;
    this.#config = config;
    this.#tokenizer = tokenizer;
    this.#atBoundary = atBoundary;
  }

  stats(): Readonly<AlignmentStats> {
    return { ...this.#stats };
  }

  /** Why this model gives no alignment, or null when it does (opens the sessions). */
  async unavailable(): Promise<string | null> {
    const sessions = await this.#opener.open();
    return 'reason' in sessions ? sessions.reason : null;
  }

  /**
   * The links of `target` (decoded from `tokenIds`, the generated ids) to `source` (encoded as `inputIds`); null when
   * the model's decoder offers no cross-attention to read. `from.attention`, one row per token, is read at once;
   * else rows asking before the step loop's next boundary share one pass there, which runs the encoder on the
   * source unless `from.states` brings it (`[S, d_model]`, S the length of `inputIds`).
   */
  async align(
    source: string,
    inputIds: readonly number[],
    target: string,
    tokenIds: readonly number[],
    from: AlignmentSource = {},
  ): Promise<WordAlignment | null> {
    if (tokenIds.length === 0) return [];
    const steps = from.attention;
    if (steps !== undefined) {
      this.#stats.stepRows++;
      const S = inputIds.length;
      const attention = new Float32Array(steps.length * S);
      steps.forEach((row, t) => attention.set(row, t * S));
      return this.#links(source, inputIds, target, tokenIds, attention);
    }
    const { states } = from;
    const attention = await new Promise<Float32Array | null>((resolve, reject) => {
      this.#pending.push({ inputIds, tokenIds, states, askedAt: performance.now(), resolve, reject });
      this.#schedule();
    });
    return attention === null ? null : this.#links(source, inputIds, target, tokenIds, attention);
  }

  #links(
    source: string,
    inputIds: readonly number[],
    target: string,
    tokenIds: readonly number[],
    attention: Float32Array,
  ): WordAlignment {
    return links(attention, this.#tokenizer.spans(source, inputIds), this.#tokenizer.targetSpans(target, tokenIds));
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    void this.#atBoundary(this.#pass);
  }

  /**
   * At a boundary: the pending rows' passes, or nothing yet while the step loop runs on and few rows have waited
   * briefly (each pass pays a run's fixed cost and its small kernels use the cores poorly; rows of a document finish a
   * few per step).
   */
  readonly #pass = async (generating: boolean): Promise<void> => {
    // The task is scheduled only while a row waits (#schedule), and only it takes rows out.
    const waited = performance.now() - this.#pending[0]!.askedAt;
    if (generating && this.#pending.length < MIN_ALIGN_ROWS && waited < MAX_ALIGN_WAIT_MS) {
      void this.#atBoundary(this.#pass);
      return;
    }
    // Rows that ask while a run is under way join the next run of this task; #scheduled clears only once none
    // is left, with no await between that check and the clearing.
    while (this.#pending.length > 0) {
      const rows = this.#pending.splice(0, MAX_ALIGN_ROWS);
      try {
        const attention = await this.#run(rows);
        rows.forEach((row, i) => row.resolve(attention?.[i] ?? null));
      } catch (err) {
        rows.forEach((row) => row.reject(err));
      }
    }
    this.#scheduled = false;
  };

  /**
   * One padded run for `rows`: sources right-padded (masked), decoder inputs right-padded (a causal decoder's earlier
   * positions never see later ones). Per row its `[T, S]` attention, unpadded; null when there is none to read.
   */
  async #run(rows: readonly Pending[]): Promise<(Float32Array | null)[] | null> {
    const sessions = await this.#opener.open();
    if ('reason' in sessions) return null;
    const started = performance.now();
    const n = rows.length;
    const S = Math.max(...rows.map((r) => r.inputIds.length));
    const T = Math.max(...rows.map((r) => r.tokenIds.length));
    const { dModel, decoderHeads: H, decoderLayers, decoderStartTokenId, padTokenId } = this.#config;
    const mask = new BigInt64Array(n * S);
    const decoderIds = new BigInt64Array(n * T).fill(BigInt(padTokenId));
    // Padding stays zero, as in the step loop's cohorts: the mask hides it from every attention.
    const hidden = new Float32Array(n * S * dModel);
    rows.forEach(({ inputIds, tokenIds, states: own }, r) => {
      mask.fill(1n, r * S, r * S + inputIds.length);
      if (own !== undefined) hidden.set(own, r * S * dModel);
      decoderIds[r * T] = BigInt(decoderStartTokenId);
      for (let t = 1; t < tokenIds.length; t++) decoderIds[r * T + t] = BigInt(tokenIds[t - 1]!);
    });
    const unencoded = rows.flatMap((row, r) => (row.states === undefined ? [r] : []));
    if (unencoded.length > 0) await this.#encode(sessions.encoder, rows, unencoded, hidden, S);
    const encoderMask = new ort.Tensor('int64', mask, [n, S]);
    const states = new ort.Tensor('float32', hidden, [n, S, dModel]);
    const feeds: Record<string, ort.Tensor> = {};
    const inputs = new Set(sessions.step.inputNames);
    const offer = (name: string, tensor: ort.Tensor) => {
      if (inputs.has(name)) feeds[name] = tensor;
    };
    offer('input_ids', new ort.Tensor('int64', decoderIds, [n, T]));
    offer('encoder_attention_mask', encoderMask);
    offer('encoder_hidden_states', states);
    offer('decoder_attention_mask', new ort.Tensor('int64', new BigInt64Array(n * T).fill(1n), [n, T]));
    const empty = new ort.Tensor('float32', new Float32Array(0), [n, H, 0, dModel / H]);
    for (let i = 0; i < decoderLayers; i++) {
      for (const part of ['key', 'value']) offer(`past_key_values.${i}.decoder.${part}`, empty);
    }
    const out = await sessions.step.run(feeds, [CROSS_ATTENTION_OUTPUT]);
    const attention = out[CROSS_ATTENTION_OUTPUT]!.data as Float32Array;
    this.#stats.runs++;
    this.#stats.rows += n;
    this.#stats.encodedRows += unencoded.length;
    this.#stats.ms += performance.now() - started;
    return rows.map(({ inputIds, tokenIds }, r) => {
      const own = new Float32Array(tokenIds.length * inputIds.length);
      for (let t = 0; t < tokenIds.length; t++) {
        own.set(attention.subarray((r * T + t) * S, (r * T + t) * S + inputIds.length), t * inputIds.length);
      }
      return own;
    });
  }

  /**
   * The encoder run for rows `which` of `rows` (those generated without their states kept: by the search graph, on
   * the device path, or not asked for with `align`), padded among themselves; each row's states go to its place in
   * `hidden` (`[n, S, d_model]`).
   */
  async #encode(
    encoder: AlignmentSessions['encoder'],
    rows: readonly Pending[],
    which: readonly number[],
    hidden: Float32Array,
    S: number,
  ): Promise<void> {
    const d = this.#config.dModel;
    const m = which.length;
    const Sm = Math.max(...which.map((r) => rows[r]!.inputIds.length));
    const ids = new BigInt64Array(m * Sm).fill(BigInt(this.#config.padTokenId));
    const mask = new BigInt64Array(m * Sm);
    which.forEach((r, j) => {
      rows[r]!.inputIds.forEach((id, s) => (ids[j * Sm + s] = BigInt(id)));
      mask.fill(1n, j * Sm, j * Sm + rows[r]!.inputIds.length);
    });
    const out = await encoder.run({
      input_ids: new ort.Tensor('int64', ids, [m, Sm]),
      attention_mask: new ort.Tensor('int64', mask, [m, Sm]),
    });
    const states = out.last_hidden_state!.data as Float32Array;
    which.forEach((r, j) => {
      hidden.set(states.subarray(j * Sm * d, (j * Sm + rows[r]!.inputIds.length) * d), r * S * d);
    });
  }
}

/** Each placed target token linked to the placed source token it attends to most (`attention`: `[T, S]`). */
export function links(
  attention: Float32Array,
  sourceSpans: readonly ([number, number] | null)[],
  targetSpans: readonly ([number, number] | null)[],
): WordAlignment {
  const S = sourceSpans.length;
  const out: WordAlignment = [];
  targetSpans.forEach((target, t) => {
    if (target === null) return;
    let best = -1;
    for (let s = 0; s < S; s++) {
      if (sourceSpans[s] !== null && (best < 0 || attention[t * S + s]! > attention[t * S + best]!)) best = s;
    }
    if (best >= 0) out.push(target[0], target[1], sourceSpans[best]![0], sourceSpans[best]![1]);
  });
  return out;
}
