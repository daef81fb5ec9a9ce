import { existsSync, openSync, readdirSync, readFileSync, readSync, closeSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureModel } from './models.js';
import { tempDir } from '../../harness/process-registry.js';

const { onnx } = onnxProto;

/** Every initializer's bytes by name: inline raw data, the slice of its external data file, or the encoded tensor. */
function initializerBytes(file: string): Map<string, Buffer> {
  const model = onnx.ModelProto.decode(readFileSync(file));
  const out = new Map<string, Buffer>();
  for (const tensor of model.graph!.initializer ?? []) {
    const external = Object.fromEntries((tensor.externalData ?? []).map((e) => [e.key, e.value]));
    if (external.location !== undefined) {
      const bytes = Buffer.alloc(Number(external.length));
      const fd = openSync(path.join(path.dirname(file), String(external.location)), 'r');
      try {
        readSync(fd, bytes, 0, bytes.length, Number(external.offset ?? 0));
      } finally {
        closeSync(fd);
      }
      out.set(tensor.name!, bytes);
    } else if (tensor.rawData && tensor.rawData.length > 0) {
      out.set(tensor.name!, Buffer.from(tensor.rawData));
    } else {
      out.set(tensor.name!, Buffer.from(onnx.TensorProto.encode({ ...tensor, name: '' }).finish()));
    }
  }
  return out;
}

describe('bench models: the external-data twin', () => {
  const work = tempDir('models-test');
  let inlineDir = '';
  let externalDir = '';
  beforeAll(async () => {
    inlineDir = await ensureModel('tiny', work.dir, () => {});
    externalDir = await ensureModel('tiny-external', work.dir, () => {});
  });
  afterAll(() => work.remove());

  it('keeps the fp32 graphs with their weights in *.onnx_data files, and no int8 files', () => {
    expect(readdirSync(path.join(externalDir, 'onnx')).sort()).toEqual([
      'decoder_model.onnx',
      'decoder_model.onnx_data',
      'decoder_model_merged.onnx',
      'decoder_model_merged.onnx_data',
      'encoder_model.onnx',
      'encoder_model.onnx_data',
    ]);
    expect(existsSync(path.join(inlineDir, 'onnx', 'encoder_model.onnx_data'))).toBe(false);
    for (const file of ['config.json', 'generation_config.json', 'tokenizer.json', 'tokenizer_config.json'])
      expect(readFileSync(path.join(externalDir, file), 'utf8')).toBe(readFileSync(path.join(inlineDir, file), 'utf8'));
  });

  it('holds the same weights, byte for byte, as the inline model', () => {
    for (const graph of ['encoder_model', 'decoder_model_merged', 'decoder_model']) {
      const inline = initializerBytes(path.join(inlineDir, 'onnx', `${graph}.onnx`));
      const external = initializerBytes(path.join(externalDir, 'onnx', `${graph}.onnx`));
      expect([...external.keys()].sort()).toEqual([...inline.keys()].sort());
      expect(inline.size).toBeGreaterThan(10);
      for (const [name, bytes] of inline) expect(external.get(name)!.equals(bytes), `${graph}: ${name}`).toBe(true);
    }
  });
});
