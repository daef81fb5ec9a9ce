/**
 * @module tools/demo-model/presets — the generated models' families and shapes, and their parameter count.
 */
import { FAMILIES, type Family, type FamilyTraits } from './families.js';

/** The 14 languages of setup_config.json, in its order. */
export const DEMO_LANGUAGES = [
  'ko',
  'en',
  'zh',
  'es',
  'fr',
  'ru',
  'id',
  'ja',
  'vi',
  'de',
  'it',
  'hi',
  'ar',
  'pt',
] as const;

export interface DemoPreset {
  name: string;
  /** Which family's architecture, tokenizer and files (families.ts). */
  family: Family;
  /** NLLB's legacy placement of the source-language token (after `</s>`) in the tokenizer's template. */
  legacyLanguagePlacement?: boolean;
  /** A Marian model's one pair (tokenizer_config.json's source_lang and target_lang). */
  pair?: { source: string; target: string };
  /** A multilingual Marian model's target codes (`>>fra<<` tokens; its pair's target then names the group, `roa`). */
  marianTargets?: readonly string[];
  /**
   * The feed-forward activation where a published model differs from its family's usual one (mBART-50's
   * many-to-many fine-tune: ReLU, where mBART's pretraining used GELU).
   */
  activation?: FamilyTraits['activation'];
  dModel: number;
  encoderLayers: number;
  decoderLayers: number;
  heads: number;
  ffnDim: number;
  /** Total vocabulary, language tokens included (the encoder's, where the target has its own). */
  vocabSize: number;
  /**
   * A Marian model's separate target vocabulary: its size (config.json's `decoder_vocab_size`, at most
   * `vocabSize`), its pieces the source's in another order (vocab.ts `targetSourceIds`), the decoder's embedding and
   * LM head over it, written as HF's MarianTokenizer keeps it (`target_vocab.json`, `target.spm`). Unset: one
   * vocabulary, shared.
   */
  targetVocabSize?: number;
  /** Positions the model can embed (sinusoidal table rows, plus M2M100's offset of 2). */
  maxPositions: number;
  /** LM head shares the token embedding (M2M100 does; random tied weights make a tiny model repeat itself). */
  tieEmbeddings: boolean;
  /**
   * Added to the `</s>` logit per decoder position, so a random model learns to stop: 0 adds no node
   * (the benchmark preset keeps M2M100's exact computation).
   */
  eosBiasPerPosition: number;
  /**
   * Give the decoder a `decoder_attention_mask` input (not in the HF export; transformers.js cannot run
   * such a model) so the engine can merge rows joining mid-generation into the running batch.
   */
  decoderSelfMask: boolean;
  /** Spread of query/key weights relative to 1/√fan_in: sharper random attention, more input-dependent output. */
  attentionGain: number;
  /** Also write `onnx/decoder_model.onnx` (the export's decoder without cache), for tests of the fallback. */
  withNoCacheDecoder: boolean;
  /** Stream weights to `*.onnx_data` (needed past protobuf's 2 GB; kept off for small models). */
  externalData: boolean;
  /**
   * Weights built by construction instead of drawn: `copy` (copy-weights.ts) writes the source back, its
   * cross-attention on the copied position. Unset: random weights from `seed`.
   */
  construction?: 'copy';
  seed: number;
}

/** The tests' and `npm start`'s model. */
const TINY: DemoPreset = {
  name: 'tiny',
  family: 'm2m100',
  dModel: 32,
  encoderLayers: 2,
  decoderLayers: 2,
  heads: 4,
  ffnDim: 64,
  vocabSize: 512,
  maxPositions: 128,
  tieEmbeddings: false,
  eosBiasPerPosition: 0.12,
  attentionGain: 3,
  decoderSelfMask: false,
  withNoCacheDecoder: true,
  externalData: false,
  seed: 20240611,
};

/** What a benchmark preset keeps of the real model: its exact computation (no stopping bias), tied embeddings. */
const REAL_MODEL = {
  tieEmbeddings: true,
  eosBiasPerPosition: 0,
  attentionGain: 1,
  decoderSelfMask: false,
  withNoCacheDecoder: false,
  externalData: false,
} as const;

/** What makes a copy model (copy-weights.ts): weights built by construction on a network wide enough to carry them. */
const COPY = {
  dModel: 256,
  heads: 4,
  eosBiasPerPosition: 0,
  attentionGain: 1,
  withNoCacheDecoder: false,
  construction: 'copy',
} as const;

export const PRESETS: Record<string, DemoPreset> = {
  tiny: TINY,
  /** `tiny`'s weights with a joinable decoder: rows arriving mid-generation share the running batch. */
  'tiny-joinable': { ...TINY, name: 'tiny-joinable', decoderSelfMask: true },
  /**
   * The copy model: its translation is its input, token for token, and its cross-attention peaks on the source token
   * each target token copies (copy-weights.ts), so tests can check word alignment exactly.
   */
  'tiny-copy': { ...TINY, name: 'tiny-copy', ...COPY },
  /** NLLB-200's tokenizer and codes (`eng_Latn`) on tiny's network. */
  'tiny-nllb': { ...TINY, name: 'tiny-nllb', family: 'nllb', seed: 200 },
  /** NLLB with the legacy template: the source language after `</s>`. */
  'tiny-nllb-legacy': { ...TINY, name: 'tiny-nllb-legacy', family: 'nllb', legacyLanguagePlacement: true, seed: 200 },
  'tiny-mbart50': { ...TINY, name: 'tiny-mbart50', family: 'mbart50', seed: 50 },
  /** A Marian opus-mt model of one pair, en→de. */
  'tiny-opus-mt-en-de': {
    ...TINY,
    name: 'tiny-opus-mt-en-de',
    family: 'marian',
    pair: { source: 'en', target: 'de' },
    seed: 75,
  },
  /**
   * A Marian model with separate vocabularies (`separate_vocabs`): the target's 480 tokens are source pieces in
   * another order, so decoding with the source's would write other words.
   */
  'tiny-opus-mt-en-es-separate': {
    ...TINY,
    name: 'tiny-opus-mt-en-es-separate',
    family: 'marian',
    pair: { source: 'en', target: 'es' },
    targetVocabSize: 480,
    seed: 77,
  },
  /**
   * The copy model as a Marian export with separate vocabularies: its target vocabulary is its source's in another
   * order, so its output is its input only when decoded with the target's.
   */
  'tiny-copy-separate': {
    ...TINY,
    name: 'tiny-copy-separate',
    family: 'marian',
    pair: { source: 'en', target: 'de' },
    targetVocabSize: 512,
    ...COPY,
    seed: 78,
  },
  /** A multilingual Marian model as opus-mt-en-roa: one source, the target named by `>>xx<<` before the text. */
  'tiny-opus-mt-en-roa': {
    ...TINY,
    name: 'tiny-opus-mt-en-roa',
    family: 'marian',
    pair: { source: 'en', target: 'roa' },
    marianTargets: ['fra', 'ita', 'por', 'ron', 'spa'],
    seed: 76,
  },
  'm2m100-418m': {
    name: 'm2m100-418m',
    family: 'm2m100',
    dModel: 1024,
    encoderLayers: 12,
    decoderLayers: 12,
    heads: 16,
    ffnDim: 4096,
    vocabSize: 128112,
    maxPositions: 1024,
    ...REAL_MODEL,
    // Inline like the published export (1.1 and 1.3 GB files, under protobuf's 2 GB).
    externalData: false,
    seed: 418,
  },
  /** Helsinki-NLP/opus-mt-en-de's shapes (6+6 layers of 512, 58101 tokens, tied embeddings): ≈74M parameters. */
  'opus-mt-en-de': {
    name: 'opus-mt-en-de',
    family: 'marian',
    pair: { source: 'en', target: 'de' },
    dModel: 512,
    encoderLayers: 6,
    decoderLayers: 6,
    heads: 8,
    ffnDim: 2048,
    vocabSize: 58101,
    maxPositions: 512,
    ...REAL_MODEL,
    seed: 75,
  },
  /**
   * facebook/nllb-200-distilled-600M's shapes (M2M100's network, 256206 tokens): 615M parameters. Inline as
   * published: the decoder (embedding + 12 layers, 1.85 GB) stays under protobuf's 2 GB.
   */
  'nllb-200-distilled-600m': {
    name: 'nllb-200-distilled-600m',
    family: 'nllb',
    dModel: 1024,
    encoderLayers: 12,
    decoderLayers: 12,
    heads: 16,
    ffnDim: 4096,
    vocabSize: 256206,
    maxPositions: 1024,
    ...REAL_MODEL,
    seed: 600,
  },
  /** facebook/nllb-200-1.3B's (and its distilled sibling's) shapes: 24+24 layers, ffn 8192; 1.37B parameters. */
  'nllb-200-1.3b': {
    name: 'nllb-200-1.3b',
    family: 'nllb',
    dModel: 1024,
    encoderLayers: 24,
    decoderLayers: 24,
    heads: 16,
    ffnDim: 8192,
    vocabSize: 256206,
    maxPositions: 1024,
    ...REAL_MODEL,
    // Each fp32 graph passes 2 GB (encoder 2.6 GB, decoder 3.5 GB): external data, as the published export has.
    externalData: true,
    seed: 1300,
  },
  /** facebook/nllb-200-3.3B's shapes: d_model 2048, 24+24 layers, ffn 8192; 3.3B parameters. */
  'nllb-200-3.3b': {
    name: 'nllb-200-3.3b',
    family: 'nllb',
    dModel: 2048,
    encoderLayers: 24,
    decoderLayers: 24,
    heads: 16,
    ffnDim: 8192,
    vocabSize: 256206,
    maxPositions: 1024,
    ...REAL_MODEL,
    externalData: true,
    seed: 3300,
  },
  /** facebook/mbart-large-50-many-to-many-mmt's shapes (learned positions, embedding norm): 611M parameters. */
  'mbart-large-50-many-to-many-mmt': {
    name: 'mbart-large-50-many-to-many-mmt',
    family: 'mbart50',
    activation: 'relu',
    dModel: 1024,
    encoderLayers: 12,
    decoderLayers: 12,
    heads: 16,
    ffnDim: 4096,
    vocabSize: 250054,
    maxPositions: 1024,
    ...REAL_MODEL,
    seed: 5050,
  },
  /** facebook/m2m100_1.2B's shapes: 24+24 layers, ffn 8192, M2M100's 128112 tokens; 1.24B parameters. */
  'm2m100-1.2b': {
    name: 'm2m100-1.2b',
    family: 'm2m100',
    dModel: 1024,
    encoderLayers: 24,
    decoderLayers: 24,
    heads: 16,
    ffnDim: 8192,
    vocabSize: 128112,
    maxPositions: 1024,
    ...REAL_MODEL,
    externalData: true,
    seed: 1200,
  },
};

/** The decoder's vocabulary: the target's where it has its own. */
export const decoderVocabSize = (p: DemoPreset): number => p.targetVocabSize ?? p.vocabSize;

export function presetNamed(name: string): DemoPreset {
  const preset = PRESETS[name];
  if (preset === undefined) {
    throw new Error(`unknown preset "${name}"; known presets: ${Object.keys(PRESETS).join(', ')}`);
  }
  return preset;
}

/**
 * Parameters as `model.num_parameters()` reports them, a tied embedding once: M2M100's sinusoidal positions and
 * Marian's final_logits_bias are buffers, not counted; mBART's learned positions and Marian's frozen sinusoids are.
 * M2M100-418M: 483.9M; opus-mt-en-de: 74.4M.
 */
export function parameterCount(p: DemoPreset): number {
  const d = p.dModel;
  const linear = (inDim: number, outDim: number) => inDim * outDim + outDim;
  const layerNorm = 2 * d;
  const attention = 4 * linear(d, d);
  const ffn = linear(d, p.ffnDim) + linear(p.ffnDim, d);
  const encoderLayer = attention + ffn + 2 * layerNorm;
  const decoderLayer = 2 * attention + ffn + 3 * layerNorm;
  const embedding = (p.vocabSize + (p.targetVocabSize ?? 0)) * d;
  const lmHead = p.tieEmbeddings ? 0 : decoderVocabSize(p) * d;
  const traits = FAMILIES[p.family];
  const extras =
    (traits.finalNorm ? 2 * layerNorm : 0) +
    (traits.embeddingNorm ? 2 * layerNorm : 0) +
    (traits.positions === 'learned' ? 2 * (p.maxPositions + 2) * d : 0) +
    // Marian's sinusoids are frozen parameters in HF (counted), fairseq's a buffer (not).
    (traits.positions === 'sinusoidal' ? 2 * p.maxPositions * d : 0);
  return embedding + lmHead + p.encoderLayers * encoderLayer + p.decoderLayers * decoderLayer + extras;
}
