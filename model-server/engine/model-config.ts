/**
 * @module engine/model-config — what the engine needs from a model folder's JSON files
 * (`config.json`, `generation_config.json`, `tokenizer_config.json`), read and validated once.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ServeError } from '../../common/errors.js';

export interface ModelConfig {
  modelType: string;
  dModel: number;
  decoderLayers: number;
  encoderHeads: number;
  decoderHeads: number;
  /**
   * The decoder's vocabulary: its embedding and output head, so the ids it starts, pads, ends and is forced with.
   * A Marian model with its own target embeddings (`share_encoder_decoder_embeddings: false`) has
   * `decoder_vocab_size`; every other model shares `vocab_size` with the encoder.
   */
  vocabSize: number;
  /** The encoder's vocabulary (`vocab_size`): the ids a source is encoded to. */
  sourceVocabSize: number;
  /** Positions the model can embed; inputs are truncated to fit and generation stops before it runs out. */
  maxPositions: number;
  decoderStartTokenId: number;
  eosTokenId: number;
  padTokenId: number;
  /** Tokens never generated: generation_config.json's `bad_words_ids` (Marian's `<pad>`, which starts decoding). */
  suppressTokenIds: readonly number[];
  /**
   * generation_config.json's `forced_eos_token_id`: the token a row's last allowed step writes (HF's
   * ForcedEOSTokenLogitsProcessor: a row cut at its cap still ends with `</s>`); null where the file names none.
   */
  forcedEosTokenId: number | null;
  /** Longest tokenized input, special tokens included (min of tokenizer and position limits). */
  maxInputTokens: number;
  generation: GenerationDefaults;
}

/** Defaults from generation_config.json (HF names in comments); every one can be overridden per call. */
export interface GenerationDefaults {
  /** `max_length` − 1: generated tokens after `decoder_start_token_id`, the forced language token included. */
  maxNewTokens: number;
  /** `num_beams` */
  numBeams: number;
  /** `length_penalty`: beam scores are sum(logprob) / length^lengthPenalty. */
  lengthPenalty: number;
  /** `early_stopping`: true stops a beam search once numBeams hypotheses are finished. */
  earlyStopping: boolean;
}

function readJson(file: string, required: boolean): Record<string, unknown> {
  if (!existsSync(file)) {
    if (required) throw new ServeError('WORKER_START_FAILED', `Model file missing: ${file}`);
    return {};
  }
  try {
    const value: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Record<string, unknown>;
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `Cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** Load and validate a model folder's configuration. @throws ServeError WORKER_START_FAILED naming the file and key. */
export function loadModelConfig(modelDir: string): ModelConfig {
  const configFile = path.join(modelDir, 'config.json');
  const config = readJson(configFile, true);
  const generation = readJson(path.join(modelDir, 'generation_config.json'), false);
  const tokenizer = readJson(path.join(modelDir, 'tokenizer_config.json'), false);

  const int = (source: Record<string, unknown>, file: string, key: string, fallback?: number, least = 0): number => {
    const value = source[key] ?? fallback;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < least) {
      const what = least === 0 ? 'a non-negative integer' : 'a positive integer';
      throw new ServeError('WORKER_START_FAILED', `${file}: "${key}" must be ${what} (got ${JSON.stringify(value)}).`);
    }
    return value;
  };
  /** A dimension of the network (the graphs are prepared from these: session-graphs.ts). */
  const size = (key: string) => int(config, 'config.json', key, undefined, 1);
  if (config.is_encoder_decoder !== true) {
    throw new ServeError(
      'WORKER_START_FAILED',
      `${configFile}: not an encoder-decoder model (is_encoder_decoder must be true).`,
    );
  }
  const maxPositions = int(config, 'config.json', 'max_position_embeddings');
  const modelMaxLength = tokenizer.model_max_length;
  // HF writes a huge sentinel (1e30) when a tokenizer has no limit of its own.
  const tokenizerLimit =
    typeof modelMaxLength === 'number' && modelMaxLength > 0 && modelMaxLength < 1e9 ? modelMaxLength : maxPositions;
  const eosTokenId = int(config, 'config.json', 'eos_token_id', 2);
  const maxLength = int(
    generation,
    'generation_config.json',
    'max_length',
    int(config, 'config.json', 'max_length', 200),
  );
  const numBeams = int(generation, 'generation_config.json', 'num_beams', 1);
  const sourceVocabSize = size('vocab_size');
  // As HF's MarianMTModel sizes its decoder; decoder_vocab_size is ignored where the embeddings are shared.
  const vocabSize =
    config.share_encoder_decoder_embeddings === false
      ? int(config, 'config.json', 'decoder_vocab_size', sourceVocabSize, 1)
      : sourceVocabSize;
  const padTokenId = int(config, 'config.json', 'pad_token_id', 1);
  // The encoder's rows are padded with it too (as in HF, whose two embeddings both take it as padding_idx).
  if (padTokenId >= Math.min(vocabSize, sourceVocabSize)) {
    throw new ServeError(
      'WORKER_START_FAILED',
      `config.json: "pad_token_id" ${padTokenId} is past the encoder's or decoder's vocabulary (${sourceVocabSize}, ${vocabSize}).`,
    );
  }
  const suppressTokenIds = badWords(generation.bad_words_ids ?? config.bad_words_ids, vocabSize);
  const forcedEos = generation.forced_eos_token_id ?? null;
  if (
    forcedEos !== null &&
    (typeof forcedEos !== 'number' || !Number.isInteger(forcedEos) || forcedEos < 0 || forcedEos >= vocabSize)
  ) {
    throw new ServeError(
      'WORKER_START_FAILED',
      `generation_config.json: "forced_eos_token_id" must be a token id below vocab_size ${vocabSize} (got ${JSON.stringify(forcedEos)}).`,
    );
  }
  const lengthPenalty = generation.length_penalty ?? 1.0;
  if (typeof lengthPenalty !== 'number') {
    throw new ServeError('WORKER_START_FAILED', 'generation_config.json: "length_penalty" must be a number.');
  }
  return Object.freeze({
    modelType: String(config.model_type ?? 'unknown'),
    dModel: size('d_model'),
    decoderLayers: size('decoder_layers'),
    encoderHeads: size('encoder_attention_heads'),
    decoderHeads: size('decoder_attention_heads'),
    vocabSize,
    sourceVocabSize,
    maxPositions,
    decoderStartTokenId: int(
      generation,
      'generation_config.json',
      'decoder_start_token_id',
      int(config, 'config.json', 'decoder_start_token_id', eosTokenId),
    ),
    eosTokenId,
    padTokenId,
    suppressTokenIds,
    forcedEosTokenId: forcedEos,
    maxInputTokens: Math.min(tokenizerLimit, maxPositions),
    generation: Object.freeze({
      maxNewTokens: Math.max(1, Math.min(maxLength, maxPositions) - 1),
      numBeams: Math.max(1, numBeams),
      lengthPenalty,
      earlyStopping: generation.early_stopping === true,
    }),
  });
}

/** One-token `bad_words_ids` as ids. @throws ServeError WORKER_START_FAILED for a longer bad word, which no family uses. */
function badWords(value: unknown, vocabSize: number): readonly number[] {
  if (value === undefined || value === null) return Object.freeze([]);
  const where = 'generation_config.json: "bad_words_ids"';
  if (!Array.isArray(value)) throw new ServeError('WORKER_START_FAILED', `${where} must be a list of token id lists.`);
  return Object.freeze(
    value.map((word: unknown) => {
      const id: unknown = Array.isArray(word) && word.length === 1 ? word[0] : undefined;
      if (typeof id !== 'number' || !Number.isInteger(id) || id < 0 || id >= vocabSize) {
        throw new ServeError(
          'WORKER_START_FAILED',
          `${where}: ${JSON.stringify(word)} is not one token id below vocab_size ${vocabSize} (bad words of several tokens are not supported).`,
        );
      }
      return id;
    }),
  );
}
