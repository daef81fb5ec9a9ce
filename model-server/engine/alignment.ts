/**
 * @module engine/alignment — which source characters each word of a translation comes from, read from the model's
 * own cross-attention in one teacher-forced decoder pass over the tokens it generated (as Marian and Firefox's
 * Bergamot place tags): the decoder is fed `[start, t₀ … tₙ₋₂]` in one run with an empty self-attention cache, and
 * row i of a middle layer's cross-attention, averaged over heads (graphs/cross-attention.ts), is what it attended to
 * when it wrote tᵢ. Each target token is linked to the source token it attends to most, special and language tokens
 * left out on both sides.
 *
 * Cost: only rows that ask pay, after their generation: one encoder run, one cross-attention graph run and one
 * decoder run of T positions, in sessions of their own (the step loop's graph is never given the extra output,
 * since onnxruntime runs every node of a graph whatever a run fetches), run at the step loop's next boundary with
 * no decoder step beside it, for every row that asked since (padded, `MAX_ALIGN_ROWS` at a time).
 */
import * as ort from 'onnxruntime-node';
import { CROSS_ATTENTION_OUTPUT } from './graphs/cross-attention.js';
import type { ModelConfig } from './model-config.js';
import type { AlignmentOpener } from './session.js';
import type { TranslationTokenizer } from './tokenizer.js';

/**
 * Links from a translation's characters to its source's, flat: per target token `targetStart, targetEnd,
 * sourceStart, sourceEnd` (UTF-16 offsets, ends exclusive), in target order. Tokens whose characters could not be
 * placed are left out.
 */
export type WordAlignment = number[];

const int64 = (values: readonly number[], dims: number[]) =>
  new ort.Tensor(
    'int64',
    BigInt64Array.from(values, (v) => BigInt(v)),
    dims,
  );

/** A row waiting for the next alignment batch. */
interface Pending {
  inputIds: readonly number[];
  tokenIds: readonly number[];
  resolve(attention: Float32Array | null): void;
  reject(err: unknown): void;
}

/** Rows aligned in one run at most. */
const MAX_ALIGN_ROWS = 64;

export class Aligner {
  readonly #opener: AlignmentOpener;
  readonly #config: ModelConfig;
  readonly #tokenizer: TranslationTokenizer;
  readonly #atBoundary: (task: () => Promise<void>) => Promise<void>;
  /** Rows asked for and not yet in a run; a run is scheduled while it is not empty. */
  #pending: Pending[] = [];
  #scheduled = false;

  /**
   * @param atBoundary runs a task at the step loop's next boundary, alone (loop/generate.ts `atBoundary`): a pass
   *   beside a decoder step would share its cores, and slow both
   */
  constructor(
    opener: AlignmentOpener,
    config: ModelConfig,
    tokenizer: TranslationTokenizer,
    atBoundary: (task: () => Promise<void>) => Promise<void>,
  ) {
    this.#opener = opener;
    this.#config = config;
    this.#tokenizer = tokenizer;
    this.#atBoundary = atBoundary;
  }

  /** Why this model gives no alignment, or null when it does (opens the sessions). */
  async unavailable(): Promise<string | null> {
    const sessions = await this.#opener.open();
    return 'reason' in sessions ? sessions.reason : null;
  }

  /**
   * The links of `target` (decoded from `tokenIds`, the generated ids) to `source` (encoded as `inputIds`); null when
   * the model's decoder offers no cross-attention to read. Rows asking before the step loop's next boundary share
   * one run there.
   */
  async align(
    source: string,
    inputIds: readonly number[],
    target: string,
    tokenIds: readonly number[],
  ): Promise<WordAlignment | null> {
    if (tokenIds.length === 0) return [];
    const attention = await new Promise<Float32Array | null>((resolve, reject) => {
      this.#pending.push({ inputIds, tokenIds, resolve, reject });
      this.#schedule();
    });
    if (attention === null) return null;
    return links(attention, this.#tokenizer.spans(source, inputIds), this.#tokenizer.targetSpans(target, tokenIds));
  }

  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    void this.#atBoundary(async () => {
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
    });
  }

  /**
   * One padded run for `rows`: sources right-padded (masked), decoder inputs right-padded (a causal decoder's earlier
   * positions never see later ones). Per row its `[T, S]` attention, unpadded; null when there is none to read.
   */
  async #run(rows: readonly Pending[]): Promise<(Float32Array | null)[] | null> {
    const sessions = await this.#opener.open();
    if ('reason' in sessions) return null;
    const n = rows.length;
    const S = Math.max(...rows.map((r) => r.inputIds.length));
    const T = Math.max(...rows.map((r) => r.tokenIds.length));
    const { dModel, decoderHeads: H, decoderLayers, decoderStartTokenId, padTokenId } = this.#config;
    const ids = new BigInt64Array(n * S).fill(BigInt(padTokenId));
    const mask = new BigInt64Array(n * S);
    const decoderIds = new BigInt64Array(n * T).fill(BigInt(padTokenId));
    rows.forEach(({ inputIds, tokenIds }, r) => {
      inputIds.forEach((id, s) => {
        ids[r * S + s] = BigInt(id);
        mask[r * S + s] = 1n;
      });
      decoderIds[r * T] = BigInt(decoderStartTokenId);
      for (let t = 1; t < tokenIds.length; t++) decoderIds[r * T + t] = BigInt(tokenIds[t - 1]!);
    });
    const encoderMask = new ort.Tensor('int64', mask, [n, S]);
    const encoded = await sessions.encoder.run({
      input_ids: new ort.Tensor('int64', ids, [n, S]),
      attention_mask: encoderMask,
    });
    const states = encoded.last_hidden_state!;
    const feeds: Record<string, ort.Tensor> = {};
    const inputs = new Set(sessions.step.inputNames);
    const offer = (name: string, tensor: ort.Tensor) => {
      if (inputs.has(name)) feeds[name] = tensor;
    };
    offer('input_ids', new ort.Tensor('int64', decoderIds, [n, T]));
    offer('encoder_attention_mask', encoderMask);
    offer('encoder_hidden_states', states);
    offer('decoder_attention_mask', new ort.Tensor('int64', new BigInt64Array(n * T).fill(1n), [n, T]));
    offer('use_cache_branch', new ort.Tensor('bool', Uint8Array.of(sessions.cross === null ? 0 : 1), [1]));
    const dh = dModel / H;
    const empty = new ort.Tensor('float32', new Float32Array(0), [n, H, 0, dh]);
    let cross: ort.InferenceSession.ReturnType = {};
    if (sessions.cross !== null) {
      const crossFeeds: Record<string, ort.Tensor> = { encoder_hidden_states: states };
      if (sessions.cross.inputNames.includes('encoder_attention_mask')) crossFeeds.encoder_attention_mask = encoderMask;
      cross = await sessions.cross.run(crossFeeds);
    }
    for (let i = 0; i < decoderLayers; i++) {
      for (const part of ['key', 'value']) {
        offer(`past_key_values.${i}.decoder.${part}`, empty);
        offer(`past_key_values.${i}.encoder.${part}`, cross[`present.${i}.encoder.${part}`] ?? empty);
      }
    }
    const out = await sessions.step.run(feeds, [CROSS_ATTENTION_OUTPUT]);
    const attention = out[CROSS_ATTENTION_OUTPUT]!.data as Float32Array;
    return rows.map(({ inputIds, tokenIds }, r) => {
      const own = new Float32Array(tokenIds.length * inputIds.length);
      for (let t = 0; t < tokenIds.length; t++) {
        own.set(attention.subarray((r * T + t) * S, (r * T + t) * S + inputIds.length), t * inputIds.length);
      }
      return own;
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
