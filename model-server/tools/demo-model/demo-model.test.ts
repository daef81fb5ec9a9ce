import { createHash } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import '../../engine/ort-env.js';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { configJson, DEMO_LANGUAGES, makeDemoModel, parameterCount, PRESETS } from './index.js';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'demo-model-'));
  dirs.push(dir);
  return dir;
};
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** sha256 over every file (sorted relative paths and contents). */
function folderHash(dir: string): string {
  const hash = createHash('sha256');
  const walk = (rel: string): string[] =>
    readdirSync(path.join(dir, rel), { withFileTypes: true }).flatMap((e) =>
      e.isDirectory() ? walk(path.join(rel, e.name)) : [path.join(rel, e.name)],
    );
  for (const file of walk('').sort()) hash.update(file).update(readFileSync(path.join(dir, file)));
  return hash.digest('hex');
}

describe('makeDemoModel', () => {
  it('writes the HF ONNX export layout for tiny, fast and byte-identical every time', () => {
    const a = tempDir();
    const b = tempDir();
    const summary = makeDemoModel('tiny', a);
    makeDemoModel('tiny', b);
    expect(summary.buildMs).toBeLessThan(1000);
    expect(summary.files.sort()).toEqual(
      [
        'README.md',
        'config.json',
        'generation_config.json',
        'tokenizer.json',
        'tokenizer_config.json',
        'onnx/decoder_model.onnx',
        'onnx/decoder_model_merged.onnx',
        'onnx/encoder_model.onnx',
        'onnx/decoder_model_merged_quantized.onnx',
        'onnx/encoder_model_quantized.onnx',
        'onnx/decoder_model_merged_quantized_rows.onnx',
        'onnx/encoder_model_quantized_rows.onnx',
      ].sort(),
    );
    expect(folderHash(a)).toBe(folderHash(b));
    const size = summary.files.reduce((sum, f) => sum + readFileSync(path.join(a, f)).length, 0);
    expect(size).toBeLessThan(4 * 1024 * 1024);
  });

  it('writes a separate-vocabulary Marian export as HF saves one, byte-identical every time', () => {
    const [a, b] = [tempDir(), tempDir()];
    const summary = makeDemoModel('tiny-opus-mt-en-es-separate', a, { quantize: false });
    makeDemoModel('tiny-opus-mt-en-es-separate', b, { quantize: false });
    expect(folderHash(a)).toBe(folderHash(b));
    expect(summary.files).toEqual(
      expect.arrayContaining(['tokenizer.json', 'vocab.json', 'target_vocab.json', 'source.spm', 'target.spm']),
    );
    const json = (name: string) => JSON.parse(readFileSync(path.join(a, name), 'utf8')) as Record<string, unknown>;
    expect(json('config.json')).toMatchObject({
      vocab_size: 512,
      decoder_vocab_size: 480,
      share_encoder_decoder_embeddings: false,
      pad_token_id: 479,
      decoder_start_token_id: 479,
    });
    expect(json('generation_config.json')).toMatchObject({ bad_words_ids: [[479]], eos_token_id: 0 });
    expect(json('tokenizer_config.json')).toMatchObject({ tokenizer_class: 'MarianTokenizer', separate_vocabs: true });
    const [source, target] = [json('vocab.json'), json('target_vocab.json')];
    expect(Object.keys(source)).toHaveLength(512);
    expect(Object.keys(target)).toHaveLength(480);
    // Every target token is a source piece, most at another id.
    expect(Object.keys(target).every((token) => token in source)).toBe(true);
    expect(Object.keys(target).filter((token) => target[token] !== source[token]).length).toBeGreaterThan(400);
  });

  it('declares the inputs and outputs transformers.js and the engine rely on', async () => {
    const dir = tempDir();
    makeDemoModel('tiny', dir);
    const encoder = await ort.InferenceSession.create(path.join(dir, 'onnx/encoder_model.onnx'));
    const decoder = await ort.InferenceSession.create(path.join(dir, 'onnx/decoder_model_merged.onnx'));
    expect(encoder.inputNames).toEqual(['input_ids', 'attention_mask']);
    expect(encoder.outputNames).toEqual(['last_hidden_state']);
    const layers = PRESETS.tiny!.decoderLayers;
    const past = Array.from({ length: layers }, (_, i) => [
      `past_key_values.${i}.decoder.key`,
      `past_key_values.${i}.decoder.value`,
    ]).flat();
    const pastEncoder = Array.from({ length: layers }, (_, i) => [
      `past_key_values.${i}.encoder.key`,
      `past_key_values.${i}.encoder.value`,
    ]).flat();
    expect(decoder.inputNames).toEqual([
      'input_ids',
      'encoder_attention_mask',
      'encoder_hidden_states',
      ...past,
      ...pastEncoder,
      'use_cache_branch',
    ]);
    expect(decoder.outputNames).toContain('logits');
    expect(decoder.outputNames).toContain(`present.${layers - 1}.encoder.value`);
    await encoder.release();
    await decoder.release();
  });

  it('tiny-joinable differs from tiny only by the decoder_attention_mask input', async () => {
    const dir = tempDir();
    makeDemoModel('tiny-joinable', dir);
    const decoder = await ort.InferenceSession.create(path.join(dir, 'onnx/decoder_model_merged.onnx'));
    expect(decoder.inputNames).toContain('decoder_attention_mask');
    await decoder.release();
  });

  it('m2m100-418m has M2M100-418M shapes and ≈484M parameters (tied embeddings)', () => {
    const p = PRESETS['m2m100-418m']!;
    const config = configJson(p);
    expect(config).toMatchObject({
      model_type: 'm2m_100',
      d_model: 1024,
      encoder_layers: 12,
      decoder_layers: 12,
      encoder_attention_heads: 16,
      decoder_attention_heads: 16,
      encoder_ffn_dim: 4096,
      decoder_ffn_dim: 4096,
      vocab_size: 128112,
      tie_word_embeddings: true,
      is_encoder_decoder: true,
    });
    const params = parameterCount(p);
    expect(Math.abs(params - 484e6) / 484e6).toBeLessThan(0.01);
    // HF's own count for facebook/m2m100_418M (model.num_parameters()): 483,905,536.
    expect(params).toBe(483_905_536);
    // Inline, as published: the larger file (the decoder: embedding + 12 layers) stays under protobuf's 2 GB.
    expect(p.externalData).toBe(false);
    const d = p.dModel;
    const decoderLayer = 4 * (d * d + d) + 4 * (d * d + d) + (d * p.ffnDim + p.ffnDim) + (p.ffnDim * d + d) + 6 * d;
    expect((p.vocabSize * d + p.decoderLayers * decoderLayer) * 4).toBeLessThan(2 ** 31);
  });

  it('opus-mt-en-de has Helsinki-NLP/opus-mt-en-de shapes and ≈74.4M parameters (frozen sinusoids counted)', () => {
    const p = PRESETS['opus-mt-en-de']!;
    expect(configJson(p)).toMatchObject({
      model_type: 'marian',
      d_model: 512,
      encoder_layers: 6,
      decoder_layers: 6,
      vocab_size: 58101,
      pad_token_id: 58100,
      decoder_start_token_id: 58100,
      eos_token_id: 0,
    });
    // 73,886,208 trainable + 2 × 512 × 512 frozen sinusoids (HF's model card rounds it to 74.4M).
    expect(parameterCount(p)).toBe(74_410_496);
  });

  // The published config.json values of each model (huggingface.co/facebook/<model>/blob/main/config.json), and the
  // parameters HF's num_parameters() reports. Only the numbers are checked: these presets are written when asked.
  it.each([
    {
      preset: 'nllb-200-distilled-600m',
      published: { model_type: 'm2m_100', d_model: 1024, layers: 12, heads: 16, ffn: 4096, vocab_size: 256206 },
      activation: 'relu',
      parameters: 615_073_792,
    },
    {
      preset: 'nllb-200-1.3b',
      published: { model_type: 'm2m_100', d_model: 1024, layers: 24, heads: 16, ffn: 8192, vocab_size: 256206 },
      activation: 'relu',
      parameters: 1_370_638_336,
    },
    {
      preset: 'nllb-200-3.3b',
      published: { model_type: 'm2m_100', d_model: 2048, layers: 24, heads: 16, ffn: 8192, vocab_size: 256206 },
      activation: 'relu',
      parameters: 3_344_863_232,
    },
    {
      preset: 'mbart-large-50-many-to-many-mmt',
      published: { model_type: 'mbart', d_model: 1024, layers: 12, heads: 16, ffn: 4096, vocab_size: 250054 },
      activation: 'relu',
      parameters: 610_879_488,
    },
    {
      preset: 'm2m100-1.2b',
      published: { model_type: 'm2m_100', d_model: 1024, layers: 24, heads: 16, ffn: 8192, vocab_size: 128112 },
      activation: 'relu',
      parameters: 1_239_470_080,
    },
  ])('$preset has the published config.json numbers', ({ preset, published, activation, parameters }) => {
    const p = PRESETS[preset]!;
    const { layers, heads, ffn, ...rest } = published;
    expect(configJson(p)).toMatchObject({
      ...rest,
      encoder_layers: layers,
      decoder_layers: layers,
      encoder_attention_heads: heads,
      decoder_attention_heads: heads,
      encoder_ffn_dim: ffn,
      decoder_ffn_dim: ffn,
      max_position_embeddings: 1024,
      activation_function: activation,
      scale_embedding: true,
      pad_token_id: 1,
      bos_token_id: 0,
      eos_token_id: 2,
      decoder_start_token_id: 2,
      tie_word_embeddings: true,
      is_encoder_decoder: true,
    });
    expect(parameterCount(p)).toBe(parameters);
    // A graph past protobuf's 2 GB needs its weights in external data: the decoder (embedding + layers) is the larger.
    const d = p.dModel;
    const decoderLayer = 8 * (d * d + d) + (d * p.ffnDim + p.ffnDim) + (p.ffnDim * d + d) + 6 * d;
    expect(p.externalData).toBe((p.vocabSize * d + p.decoderLayers * decoderLayer) * 4 >= 2 ** 31);
  });

  it('writes exactly the parameters the formula counts', () => {
    for (const preset of [
      'tiny',
      'tiny-joinable',
      'tiny-nllb',
      'tiny-mbart50',
      'tiny-opus-mt-en-de',
      'tiny-opus-mt-en-roa',
      'tiny-opus-mt-en-es-separate',
    ]) {
      const summary = makeDemoModel(preset, tempDir());
      expect(summary.writtenParameters).toBe(parameterCount(PRESETS[preset]!));
    }
  });

  it('covers the 14 languages of setup_config.json', () => {
    const setup = JSON.parse(readFileSync(path.join(import.meta.dirname, '../../../setup_config.json'), 'utf8')) as {
      cuda_id: Record<string, string>;
    };
    expect([...DEMO_LANGUAGES].sort()).toEqual(Object.keys(setup.cuda_id).sort());
  });
});
