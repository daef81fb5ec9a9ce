/**
 * @module tools/demo-model/presets — the generated models' shapes, and their parameter count.
 */

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
  dModel: number;
  encoderLayers: number;
  decoderLayers: number;
  heads: number;
  ffnDim: number;
  /** Total vocabulary, language tokens included. */
  vocabSize: number;
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
  seed: number;
}

/** The tests' and `npm start`'s model. */
const TINY: DemoPreset = {
  name: 'tiny',
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

export const PRESETS: Record<string, DemoPreset> = {
  tiny: TINY,
  /** `tiny`'s weights with a joinable decoder: rows arriving mid-generation share the running batch. */
  'tiny-joinable': { ...TINY, name: 'tiny-joinable', decoderSelfMask: true },
  'm2m100-418m': {
    name: 'm2m100-418m',
    dModel: 1024,
    encoderLayers: 12,
    decoderLayers: 12,
    heads: 16,
    ffnDim: 4096,
    vocabSize: 128112,
    maxPositions: 1024,
    tieEmbeddings: true,
    eosBiasPerPosition: 0,
    attentionGain: 1,
    decoderSelfMask: false,
    withNoCacheDecoder: false,
    // Inline like the published export (1.1 and 1.3 GB files, under protobuf's 2 GB).
    externalData: false,
    seed: 418,
  },
};

export function presetNamed(name: string): DemoPreset {
  const preset = PRESETS[name];
  if (preset === undefined) {
    throw new Error(`unknown preset "${name}"; known presets: ${Object.keys(PRESETS).join(', ')}`);
  }
  return preset;
}

/**
 * Trainable parameters of an M2M100-shaped model, counting a tied embedding once (what
 * `model.num_parameters()` reports; sinusoidal positions are a buffer, not parameters).
 * M2M100-418M: 483.9M.
 */
export function parameterCount(p: DemoPreset): number {
  const d = p.dModel;
  const linear = (inDim: number, outDim: number) => inDim * outDim + outDim;
  const layerNorm = 2 * d;
  const attention = 4 * linear(d, d);
  const ffn = linear(d, p.ffnDim) + linear(p.ffnDim, d);
  const encoderLayer = attention + ffn + 2 * layerNorm;
  const decoderLayer = 2 * attention + ffn + 3 * layerNorm;
  const embedding = p.vocabSize * d;
  const lmHead = p.tieEmbeddings ? 0 : p.vocabSize * d;
  return embedding + lmHead + p.encoderLayers * encoderLayer + p.decoderLayers * decoderLayer + 2 * layerNorm;
}
