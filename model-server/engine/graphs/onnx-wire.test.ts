import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../../tools/demo-model/index.js';
import { joinModel, renamedWeight, splitModel, varint, weightName, wireFields } from './onnx-wire.js';

const root = mkdtempSync(path.join(tmpdir(), 'onnx-wire-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

describe('onnx-wire', () => {
  it('varints round-trip through the field reader, past 32 bits', () => {
    for (const value of [0, 1, 127, 128, 300, 2 ** 31 + 5, 2 ** 40 + 3]) {
      const bytes = Uint8Array.from([0x08, ...varint(value)]);
      const [field] = wireFields(bytes);
      expect(field).toMatchObject({ field: 1, wire: 0, start: 0, end: bytes.length });
      expect(Number(onnxProto.onnx.TensorProto.decode(bytes).dims[0])).toEqual(value);
    }
  });

  it('splits an inline-weight model into its weights (views of the file) and the rest, and joins it back equal', () => {
    makeDemoModel('tiny', root);
    const bytes = new Uint8Array(readFileSync(path.join(root, 'onnx/decoder_model_merged.onnx')));
    const { model, weights } = splitModel(bytes);
    expect(model.graph!.initializer).toEqual([]);
    expect(model.graph!.node!.length).toBeGreaterThan(100);
    expect(weights.every((w) => w.buffer === bytes.buffer)).toBe(true);
    const weightBytes = weights.reduce((sum, w) => sum + w.length, 0);
    expect(weightBytes / bytes.length).toBeGreaterThan(0.9);
    const joined = joinModel(model, weights);
    expect(joined.length).toBe(bytes.length);
    const { onnx } = onnxProto;
    expect(onnx.ModelProto.toObject(onnx.ModelProto.decode(joined))).toEqual(
      onnx.ModelProto.toObject(onnx.ModelProto.decode(bytes)),
    );
  });

  it('renames a weight entry without touching its data', () => {
    makeDemoModel('tiny', root);
    const { weights } = splitModel(new Uint8Array(readFileSync(path.join(root, 'onnx/encoder_model.onnx'))));
    const entry = weights.find((w) => w.length > 1000)!;
    const renamed = renamedWeight(entry, 'encoder/x');
    expect(weightName(renamed)).toBe('encoder/x');
    const decode = (w: Uint8Array) => onnxProto.onnx.TensorProto.decode(w.subarray(wireFields(w)[0]!.value));
    const [before, after] = [decode(entry), decode(renamed)];
    expect(after.rawData).toEqual(before.rawData);
    expect(after.dims).toEqual(before.dims);
    expect(after.dataType).toBe(before.dataType);
  });

  it('refuses bytes that are not one model with one graph', () => {
    expect(() => splitModel(Uint8Array.of(0x3a, 0x05, 0x00))).toThrow(/runs past its message/);
    expect(() => splitModel(Uint8Array.of(0x08, 0x07))).toThrow(/expected one graph in the model, found 0/);
  });
});
