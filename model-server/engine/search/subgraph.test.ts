import onnxProto from 'onnx-proto';
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { FLOAT, INT32, INT64 } from '../graphs/onnx-wire.js';
import { SubgraphBuilder } from './subgraph.js';

const VOCAB = 12;
const EOS = 2;

/** The first step's scores alone, as a model: ids [batch] and a tensor of the subgraph's rows in, logits out. */
async function forcedLogits(ids: number[], rows: number): Promise<Float32Array> {
  const b = new SubgraphBuilder();
  b.input('ids', INT32, ['batch']);
  b.input('like', INT64, ['rows', 1]);
  b.output('logits', b.forcedLogits('ids', 'like', VOCAB, EOS, FLOAT), FLOAT, ['rows', 1, VOCAB]);
  const bytes = onnxProto.onnx.ModelProto.encode({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 17 }],
    graph: b.graph('forced'),
  }).finish();
  const session = await ort.InferenceSession.create(bytes);
  const out = await session.run({
    ids: new ort.Tensor('int32', Int32Array.from(ids), [ids.length]),
    like: new ort.Tensor('int64', new BigInt64Array(rows), [rows, 1]),
  });
  await session.release();
  return out.logits!.data as Float32Array;
}

describe("the first step forced to each row's language token", () => {
  it("scores 0 at the row's token and lowest at </s>, repeated for each of a row's beams", async () => {
    const logits = await forcedLogits([5, 7], 4);
    const forced = [5, 5, 7, 7];
    for (let r = 0; r < 4; r++) {
      const row = Array.from(logits.subarray(r * VOCAB, (r + 1) * VOCAB));
      expect(row[forced[r]!]).toBe(0);
      // </s> below every other token: no runner-up of the first step can be a finished hypothesis.
      const others = row.filter((_, id) => id !== forced[r] && id !== EOS);
      expect(others.every((v) => v > row[EOS]! && v < -1e8)).toBe(true);
    }
  });
});
