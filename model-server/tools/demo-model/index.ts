/**
 * @module tools/demo-model — writes a complete model folder in the Hugging Face ONNX export layout
 * (what transformers.js and our engine load) with random, fixed-seed weights:
 *
 * ```
 * {outDir}/config.json  generation_config.json  tokenizer.json  tokenizer_config.json  README.md
 * {outDir}/onnx/encoder_model.onnx  decoder_model_merged.onnx  [decoder_model.onnx]  [*.onnx_data]
 * {outDir}/onnx/encoder_model_quantized.onnx  decoder_model_merged_quantized.onnx            (q8)
 * {outDir}/onnx/encoder_model_quantized_rows.onnx  decoder_model_merged_quantized_rows.onnx  (q8-rows)
 * ```
 *
 * Weights are inline, as in the published export, unless the preset asks for external data; the int8 files are
 * made from the fp32 ones by quantize.ts, as a user's own export would be.
 *
 * The output is byte-identical for a given preset. These models are stand-ins: their "translations" are
 * random token strings; their shapes (and so their cost) are the real model's.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { checkCopyShape, copyWeight } from './copy-weights.js';
import { buildDecoder, buildEncoder } from './graphs.js';
import { quantizeModelDir, QUANTIZED_GRAPHS, QUANTIZED_SUFFIX } from '../quantize.js';
import { encodeModel, GraphBuilder, WeightSink } from './onnx-builder.js';
import { decoderVocabSize, DEMO_LANGUAGES, type DemoPreset, parameterCount, presetNamed } from './presets.js';
import { FAMILIES, familyConfigKeys, familyGenerationKeys, specialIds, tokenizerConfigJson } from './families.js';
import { separateVocabFiles, targetSourceIds, tokenizerJson } from './vocab.js';

export { DEMO_LANGUAGES, PRESETS, parameterCount, presetNamed, type DemoPreset } from './presets.js';
export { FAMILIES, type Family } from './families.js';

export interface DemoModelSummary {
  preset: string;
  outDir: string;
  /** Trainable parameters by the formula (tied embedding counted once). */
  parameters: number;
  /** Parameters actually written: distinct weight tensors over all files, buffers (positions, stop bias) excluded. */
  writtenParameters: number;
  files: string[];
  buildMs: number;
}

/** HF-style config.json for a preset (its family's keys; transformers.js needs model_type, is_encoder_decoder, decoder_layers). */
export function configJson(p: DemoPreset): Record<string, unknown> {
  // The ids the decoder starts, pads and ends with are the target's.
  const ids = specialIds(p.family, decoderVocabSize(p));
  return {
    _name_or_path: `mt-serve/demo-${p.name}`,
    ...familyConfigKeys(p.family),
    ...(p.activation === undefined ? {} : { activation_function: p.activation }),
    is_encoder_decoder: true,
    vocab_size: p.vocabSize,
    ...(p.targetVocabSize === undefined
      ? {}
      : { share_encoder_decoder_embeddings: false, decoder_vocab_size: p.targetVocabSize }),
    d_model: p.dModel,
    encoder_layers: p.encoderLayers,
    decoder_layers: p.decoderLayers,
    encoder_attention_heads: p.heads,
    decoder_attention_heads: p.heads,
    encoder_ffn_dim: p.ffnDim,
    decoder_ffn_dim: p.ffnDim,
    max_position_embeddings: p.maxPositions,
    tie_word_embeddings: p.tieEmbeddings,
    use_cache: true,
    pad_token_id: ids.pad,
    bos_token_id: ids.bos,
    eos_token_id: ids.eos,
    decoder_start_token_id: p.family === 'marian' ? ids.pad : ids.eos,
    torch_dtype: 'float32',
    mt_serve_demo: {
      preset: p.name,
      seed: p.seed,
      parameters: parameterCount(p),
      note: 'Generated stand-in with random weights: the architecture and cost of the real model, not its translations.',
    },
  };
}

export function generationConfigJson(p: DemoPreset): Record<string, unknown> {
  return familyGenerationKeys(p.family, decoderVocabSize(p), Math.min(200, p.maxPositions - 1));
}

function writeGraph(p: DemoPreset, file: string, doc: string, build: (g: GraphBuilder) => void): Map<string, number> {
  if (p.construction === 'copy') checkCopyShape(p);
  const sink = new WeightSink(
    p.seed,
    p.externalData ? { path: `${file}_data`, location: `${path.basename(file)}_data` } : undefined,
    p.construction === 'copy' ? (name, dims) => copyWeight(p, name, dims) : undefined,
  );
  try {
    const g = new GraphBuilder(sink);
    build(g);
    writeFileSync(file, encodeModel(g.graph(path.basename(file, '.onnx')), doc));
    return sink.written;
  } finally {
    sink.close();
  }
}

export interface DemoModelOptions {
  /** The fp32 graphs to write (default both); the rest of the folder is written either way. */
  graphs?: readonly ('encoder' | 'decoder')[];
  /** Also write the int8 files (default true; needs both fp32 graphs). */
  quantize?: boolean;
}

/**
 * Build `preset` (a name from `PRESETS` or a preset object) into `outDir`, creating it. `tiny` takes tens
 * of milliseconds; `m2m100-418m` writes ~2.5 GB of fp32 weights inline (two files, each with the embedding) and
 * ~1.4 GB of int8 files in a few minutes. `options` leave parts out (the GPU benchmark writes the two fp32 graphs
 * in parallel processes and no int8 files).
 */
export function makeDemoModel(
  preset: string | DemoPreset,
  outDir: string,
  options: DemoModelOptions = {},
): DemoModelSummary {
  const started = performance.now();
  const p = typeof preset === 'string' ? presetNamed(preset) : preset;
  const onnxDir = path.join(outDir, 'onnx');
  mkdirSync(onnxDir, { recursive: true });
  const files: string[] = [];
  const json = (name: string, value: unknown) => {
    writeFileSync(path.join(outDir, name), `${JSON.stringify(value, null, 2)}\n`);
    files.push(name);
  };
  const maxLength = p.maxPositions;
  json('config.json', configJson(p));
  json('generation_config.json', generationConfigJson(p));
  const languageToken = FAMILIES[p.family].languageToken;
  const languageTokens = languageToken === null ? [] : DEMO_LANGUAGES.map(languageToken);
  const tokenizer = tokenizerJson(
    p.vocabSize,
    p.family,
    DEMO_LANGUAGES,
    p.legacyLanguagePlacement,
    p.marianTargets ?? [],
  );
  json('tokenizer.json', tokenizer);
  const separate = p.targetVocabSize !== undefined;
  json('tokenizer_config.json', tokenizerConfigJson(p.family, maxLength, languageTokens, p.pair ?? null, separate));
  if (separate) {
    const targetIds = targetSourceIds(p.vocabSize, p.targetVocabSize!, p.seed);
    for (const [name, bytes] of Object.entries(separateVocabFiles(tokenizer, targetIds))) {
      writeFileSync(path.join(outDir, name), bytes);
      files.push(name);
    }
  }
  writeFileSync(
    path.join(outDir, 'README.md'),
    `# mt-serve demo model \`${p.name}\`\n\nGenerated by \`scripts/make-demo-model ${p.name}\` (seed ${p.seed}). ` +
      `${FAMILIES[p.family].label}'s architecture and file layout with random weights: it runs like the real ` +
      `model but its output is not a translation. See docs/engine.md to serve a real export.\n`,
  );
  files.push('README.md');

  const doc = `mt-serve demo model ${p.name} (random weights, seed ${p.seed})`;
  const parts = options.graphs ?? ['encoder', 'decoder'];
  const graphs: [string, (g: GraphBuilder) => void][] = [];
  if (parts.includes('encoder')) graphs.push(['encoder_model.onnx', (g) => buildEncoder(g, p)]);
  if (parts.includes('decoder')) {
    graphs.push(['decoder_model_merged.onnx', (g) => buildDecoder(g, p, 'merged')]);
    if (p.withNoCacheDecoder) graphs.push(['decoder_model.onnx', (g) => buildDecoder(g, p, 'no-cache')]);
  }
  const weights = new Map<string, number>();
  for (const [name, build] of graphs) {
    for (const [tensor, count] of writeGraph(p, path.join(onnxDir, name), doc, build)) weights.set(tensor, count);
    files.push(`onnx/${name}`);
    if (p.externalData) files.push(`onnx/${name}_data`);
  }
  for (const activations of options.quantize === false ? [] : (['tensor', 'row'] as const)) {
    quantizeModelDir(outDir, { activations });
    for (const name of QUANTIZED_GRAPHS) files.push(`onnx/${name}${QUANTIZED_SUFFIX[activations]}.onnx`);
  }
  const sinusoidBuffer = FAMILIES[p.family].positions === 'sinusoidal-offset';
  const isBuffer = (tensor: string) =>
    (sinusoidBuffer && tensor.includes('embed_positions')) ||
    tensor === 'eos_position_bias' ||
    tensor === 'final_logits_bias';
  const writtenParameters = [...weights].reduce((sum, [tensor, count]) => sum + (isBuffer(tensor) ? 0 : count), 0);
  return {
    preset: p.name,
    outDir,
    parameters: parameterCount(p),
    writtenParameters,
    files,
    buildMs: performance.now() - started,
  };
}
