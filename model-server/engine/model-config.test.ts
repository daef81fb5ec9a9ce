/**
 * model-config.ts: config.json is read and checked once per engine; the network's dimensions, which the graphs are
 * prepared from (session-graphs.ts), must be positive integers, and a folder that lacks one is refused naming it.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { loadModelConfig } from './model-config.js';

const root = mkdtempSync(path.join(tmpdir(), 'model-config-'));
const dir = path.join(root, 'tiny');
makeDemoModel('tiny', dir, { quantize: false });
const file = path.join(dir, 'config.json');
const original = readFileSync(file, 'utf8');
afterAll(() => rmSync(root, { recursive: true, force: true }));

/** loadModelConfig over config.json changed by `edit`. */
function withConfig(edit: (config: Record<string, unknown>) => void) {
  const config = JSON.parse(original) as Record<string, unknown>;
  edit(config);
  writeFileSync(file, JSON.stringify(config));
  try {
    return loadModelConfig(dir);
  } finally {
    writeFileSync(file, original);
  }
}

describe('loadModelConfig', () => {
  it("reads the network's dimensions, both attention heads among them", () => {
    const config = JSON.parse(original) as Record<string, number>;
    expect(withConfig(() => {})).toMatchObject({
      dModel: config.d_model,
      decoderLayers: config.decoder_layers,
      encoderHeads: config.encoder_attention_heads,
      decoderHeads: config.decoder_attention_heads,
      vocabSize: config.vocab_size,
    });
  });

  it.each([
    ['d_model', 0],
    ['decoder_layers', 0],
    ['encoder_attention_heads', undefined],
    ['decoder_attention_heads', 2.5],
    ['vocab_size', -1],
  ])('refuses %s = %s, naming it', (key, value) => {
    expect(() =>
      withConfig((config) => {
        if (value === undefined) delete config[key];
        else config[key] = value;
      }),
    ).toThrow(
      expect.objectContaining({
        code: 'WORKER_START_FAILED',
        message: expect.stringContaining(`"${key}" must be a positive integer`),
      }),
    );
  });
});

describe("loadModelConfig: the decoder's vocabulary", () => {
  it('is decoder_vocab_size where the embeddings are not shared (HF MarianMTModel), the encoder keeping vocab_size', () => {
    const separate = withConfig((c) =>
      Object.assign(c, { share_encoder_decoder_embeddings: false, decoder_vocab_size: 480 }),
    );
    expect(separate).toMatchObject({ vocabSize: 480, sourceVocabSize: 512 });
    const shared = withConfig((c) => Object.assign(c, { decoder_vocab_size: 480 }));
    expect(shared).toMatchObject({ vocabSize: 512, sourceVocabSize: 512 });
  });

  it('refuses a pad_token_id past either vocabulary: encoder rows are padded with it too', () => {
    expect(() =>
      withConfig((c) =>
        Object.assign(c, { share_encoder_decoder_embeddings: false, decoder_vocab_size: 480, pad_token_id: 500 }),
      ),
    ).toThrow(
      expect.objectContaining({
        code: 'WORKER_START_FAILED',
        message: 'config.json: "pad_token_id" 500 is past the encoder\'s or decoder\'s vocabulary (512, 480).',
      }),
    );
  });
});
