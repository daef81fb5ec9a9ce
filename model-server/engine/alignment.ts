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
 * since onnxruntime runs every node of a graph whatever a run fetches).
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

export class Aligner {
  readonly #opener: AlignmentOpener;
  readonly #config: ModelConfig;
  readonly #tokenizer: TranslationTokenizer;

  constructor(opener: AlignmentOpener, config: ModelConfig, tokenizer: TranslationTokenizer) {
    this.#opener = opener;
    this.#config = config;
    this.#tokenizer = tokenizer;
  }

  /** Why this model gives no alignment, or null when it does (opens the sessions). */
  async unavailable(): Promise<string | null> {
    const sessions = await this.#opener.open();
    return 'reason' in sessions ? sessions.reason : null;
  }

  /**
   * The links of `target` (decoded from `tokenIds`, the generated ids) to `source` (encoded as `inputIds`); null when
   * the model's decoder offers no cross-attention to read.
   */
  async align(
    source: string,
    inputIds: readonly number[],
    target: string,
    tokenIds: readonly number[],
  ): Promise<WordAlignment | null> {
    const sessions = await this.#opener.open();
    if ('reason' in sessions) return null;
    if (tokenIds.length === 0) return [];
    const S = inputIds.length;
    const T = tokenIds.length;
    const { dModel, decoderHeads: H, decoderLayers, decoderStartTokenId } = this.#config;
    const encoderMask = int64(new Array<number>(S).fill(1), [1, S]);
    const encoded = await sessions.encoder.run({ input_ids: int64(inputIds, [1, S]), attention_mask: encoderMask });
    const states = encoded.last_hidden_state!;
    const feeds: Record<string, ort.Tensor> = {};
    const inputs = new Set(sessions.step.inputNames);
    const offer = (name: string, tensor: ort.Tensor) => {
      if (inputs.has(name)) feeds[name] = tensor;
    };
    offer('input_ids', int64([decoderStartTokenId, ...tokenIds.slice(0, -1)], [1, T]));
    offer('encoder_attention_mask', encoderMask);
    offer('encoder_hidden_states', states);
    offer('decoder_attention_mask', int64(new Array<number>(T).fill(1), [1, T]));
    offer('use_cache_branch', new ort.Tensor('bool', Uint8Array.of(sessions.cross === null ? 0 : 1), [1]));
    const dh = dModel / H;
    const empty = new ort.Tensor('float32', new Float32Array(0), [1, H, 0, dh]);
    let cross: ort.InferenceSession.ReturnType = {};
    if (sessions.cross !== null) {
      const crossFeeds: Record<string, ort.Tensor> = { encoder_hidden_states: states };
      if (sessions.cross.inputNames.includes('encoder_attention_mask')) crossFeeds.encoder_attention_mask = encoderMask;
      cross = await sessions.cross.run(crossFeeds);
    }
    for (let i = 0; i < decoderLayers; i++) {
      for (const part of ['key', 'value']) {
        offer(`past_key_values.${i}.decoder.${part}`, empty);
        const made = cross[`present.${i}.encoder.${part}`];
        offer(
          `past_key_values.${i}.encoder.${part}`,
          made ?? new ort.Tensor('float32', new Float32Array(0), [1, H, 0, dh]),
        );
      }
    }
    const out = await sessions.step.run(feeds, [CROSS_ATTENTION_OUTPUT]);
    const attention = out[CROSS_ATTENTION_OUTPUT]!.data as Float32Array;
    return links(attention, this.#tokenizer.spans(source, inputIds), this.#tokenizer.spans(target, tokenIds));
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
