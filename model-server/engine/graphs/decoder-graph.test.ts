import onnxProto from 'onnx-proto';
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import {
  appendedOutputName,
  BEAM_TOPK,
  exposeBeamTopK,
  exposeCacheAppends,
  exposeGreedyTop2,
  TOP2_OUTPUTS,
} from './decoder-graph.js';
import { ElemType, encodeModel, GraphBuilder, WeightSink } from '../../tools/demo-model/onnx-builder.js';

const { onnx } = onnxProto;
const DIMS = ['batch_size', 2, 'past', 3];

/**
 * One layer's self-attention cache in the Hugging Face merged-export layout: `If(use_cache_branch)`, the
 * then-branch `Concat(past, 2·x)` (through an Identity, as exporters often leave), the else-branch `3·x`.
 */
function ifLayoutModel(): Uint8Array {
  const g = new GraphBuilder(new WeightSink(1));
  const x = g.input('x', ElemType.FLOAT, ['batch_size', 2, 1, 3]);
  const useCache = g.input('use_cache_branch', ElemType.BOOL, [1]);
  const past = ['key', 'value'].map((part) => g.input(`past_key_values.0.decoder.${part}`, ElemType.FLOAT, DIMS));
  const withPast = g.branch();
  const noPast = g.branch();
  ['key', 'value'].forEach((part, j) => {
    const concat = withPast.op('Concat', [past[j]!, withPast.op('Mul', [x, withPast.float(2)])], { axis: { i: 2 } });
    withPast.output(withPast.op('Identity', [concat]), `with_past_${part}`, ElemType.FLOAT, DIMS);
    noPast.output(noPast.op('Mul', [x, noPast.float(3)]), `no_past_${part}`, ElemType.FLOAT, DIMS);
  });
  const presents = ['key', 'value'].map((part) => `present.0.decoder.${part}`);
  g.opN(
    'If',
    [useCache],
    { then_branch: { g: withPast.graph('with_past') }, else_branch: { g: noPast.graph('no_past') } },
    presents,
  );
  for (const name of presents) g.outputs.push({ name, type: { tensorType: { elemType: ElemType.FLOAT } } });
  return encodeModel(g.graph('if_layout'), 'test');
}

describe('exposeCacheAppends', () => {
  it('exposes what each If branch appends (Hugging Face merged layout), leaving present as it was', async () => {
    const model = onnx.ModelProto.decode(ifLayoutModel());
    const exposed = exposeCacheAppends(model, 1);
    expect(exposed).toEqual({ ok: true, outputs: [appendedOutputName(0, 'key'), appendedOutputName(0, 'value')] });
    const session = await ort.InferenceSession.create(onnx.ModelProto.encode(model).finish());
    try {
      const x = Float32Array.from({ length: 6 }, (_, i) => i + 1);
      const past = Float32Array.from({ length: 12 }, (_, i) => -i);
      for (const [cache, factor, P] of [
        [true, 2, 2],
        [false, 3, 0],
      ] as const) {
        const pastData = cache ? past : new Float32Array(0);
        const out = await session.run({
          x: new ort.Tensor('float32', x, [1, 2, 1, 3]),
          use_cache_branch: new ort.Tensor('bool', Uint8Array.of(cache ? 1 : 0), [1]),
          'past_key_values.0.decoder.key': new ort.Tensor('float32', pastData, [1, 2, P, 3]),
          'past_key_values.0.decoder.value': new ort.Tensor('float32', pastData, [1, 2, P, 3]),
        });
        for (const part of ['key', 'value'] as const) {
          const appended = out[appendedOutputName(0, part)]!;
          expect(appended.dims).toEqual([1, 2, 1, 3]);
          expect(Array.from(appended.data as Float32Array)).toEqual(Array.from(x, (v) => v * factor));
          expect(out[`present.0.decoder.${part}`]!.dims).toEqual([1, 2, P + 1, 3]);
        }
      }
    } finally {
      await session.release();
    }
  });

  it('exposes a top-level Concat tail under its own name, adding no node (an Identity would copy it every step)', async () => {
    const g = new GraphBuilder(new WeightSink(1));
    const x = g.input('x', ElemType.FLOAT, ['batch_size', 2, 1, 3]);
    ['key', 'value'].forEach((part) => {
      const past = g.input(`past_key_values.0.decoder.${part}`, ElemType.FLOAT, DIMS);
      const tail = g.op('Mul', [x, g.float(2)], {}, [`tail_${part}`]);
      g.output(g.op('Concat', [past, tail], { axis: { i: 2 } }), `present.0.decoder.${part}`, ElemType.FLOAT, DIMS);
    });
    const model = onnx.ModelProto.decode(encodeModel(g.graph('top_level'), 'test'));
    const nodes = model.graph!.node!.length;
    expect(exposeCacheAppends(model, 1)).toEqual({ ok: true, outputs: ['tail_key', 'tail_value'] });
    expect(model.graph!.node).toHaveLength(nodes);
    const session = await ort.InferenceSession.create(onnx.ModelProto.encode(model).finish());
    try {
      const past = new ort.Tensor('float32', new Float32Array(12), [1, 2, 2, 3]);
      const out = await session.run({
        x: new ort.Tensor(
          'float32',
          Float32Array.from({ length: 6 }, (_, i) => i),
          [1, 2, 1, 3],
        ),
        'past_key_values.0.decoder.key': past,
        'past_key_values.0.decoder.value': past,
      });
      expect(Array.from(out.tail_key!.data as Float32Array)).toEqual([0, 2, 4, 6, 8, 10]);
    } finally {
      await session.release();
    }
  });

  it('leaves a graph it does not recognise untouched and says why', () => {
    const g = new GraphBuilder(new WeightSink(1));
    const past = g.input('past_key_values.0.decoder.key', ElemType.FLOAT, DIMS);
    g.output(g.op('Add', [past, g.float(1)]), 'present.0.decoder.key', ElemType.FLOAT, DIMS);
    g.output(g.op('Concat', [past, past], { axis: { i: 2 } }), 'present.0.decoder.value', ElemType.FLOAT, DIMS);
    const model = onnx.ModelProto.decode(encodeModel(g.graph('other'), 'test'));
    const before = onnx.ModelProto.encode(model).finish();
    const result = exposeCacheAppends(model, 1);
    expect(result).toEqual({ ok: false, reason: expect.stringContaining('present.0.decoder.key comes from Add') });
    expect(onnx.ModelProto.encode(model).finish()).toEqual(before);
  });
});

const logitsModel = (width: number) => {
  const g = new GraphBuilder(new WeightSink(1));
  const x = g.input('x', ElemType.FLOAT, ['batch_size', 'length', width]);
  g.output(g.op('Identity', [x]), 'logits', ElemType.FLOAT, ['batch_size', 'length', width]);
  return onnx.ModelProto.decode(encodeModel(g.graph('logits'), 'test'));
};

/** The same refusal from each head that reads the logits. */
const refusesAWrongVocabulary = (expose: typeof exposeBeamTopK | typeof exposeGreedyTop2) =>
  it('refuses logits whose last axis is not exactly the vocabulary', () => {
    expect(expose(logitsModel(6), 5)).toEqual({
      ok: false,
      reason: "logits' last axis is 6, not vocab_size 5",
    });
  });

describe('exposeBeamTopK', () => {
  it("switched on, gives beam-head.ts' top-k (int32 ids, ties to the lower id) and log-softmax normaliser; off, nothing", async () => {
    const model = logitsModel(5);
    expect(exposeBeamTopK(model, 5)).toEqual({ ok: true });
    const session = await ort.InferenceSession.create(onnx.ModelProto.encode(model).finish());
    const x = Float32Array.of(0.1, 0.9, 0.3, 0.9, -1, /* row 2 */ 5, 4, 3, 2, 1);
    const run = (on: boolean) =>
      session.run(
        {
          x: new ort.Tensor('float32', x, [2, 1, 5]),
          [BEAM_TOPK.on]: new ort.Tensor('bool', Uint8Array.of(on ? 1 : 0), [1]),
          [BEAM_TOPK.k]: new ort.Tensor('int64', BigInt64Array.of(3n), [1]),
        },
        [BEAM_TOPK.values, BEAM_TOPK.ids, BEAM_TOPK.logSumExp],
      );
    try {
      const on = await run(true);
      expect(on[BEAM_TOPK.ids]!.dims).toEqual([2, 1, 3]);
      expect(Array.from(on[BEAM_TOPK.ids]!.data as Int32Array)).toEqual([1, 3, 2, 0, 1, 2]);
      expect(Array.from(on[BEAM_TOPK.values]!.data as Float32Array)).toEqual([0.9, 0.9, 0.3, 5, 4, 3].map(Math.fround));
      const lse = (row: number[]) => Math.log(row.reduce((sum, v) => sum + Math.exp(v), 0));
      const got = Array.from(on[BEAM_TOPK.logSumExp]!.data as Float32Array);
      expect(got[0]).toBeCloseTo(lse([0.1, 0.9, 0.3, 0.9, -1]), 5);
      expect(got[1]).toBeCloseTo(lse([5, 4, 3, 2, 1]), 5);
      const off = await run(false);
      for (const name of [BEAM_TOPK.values, BEAM_TOPK.ids, BEAM_TOPK.logSumExp]) expect(off[name]!.size).toBe(0);
    } finally {
      await session.release();
    }
  });

  refusesAWrongVocabulary(exposeBeamTopK);
});

describe('exposeGreedyTop2', () => {
  it('adds the top-2 of the last axis, best first, ties to the lower id', async () => {
    const model = logitsModel(5);
    expect(exposeGreedyTop2(model, 5)).toEqual({ ok: true, ...TOP2_OUTPUTS });
    const session = await ort.InferenceSession.create(onnx.ModelProto.encode(model).finish());
    try {
      const x = Float32Array.of(0.1, 0.9, 0.3, 0.9, -1, /* row 2 */ 5, 4, 3, 2, 1);
      const out = await session.run({ x: new ort.Tensor('float32', x, [2, 1, 5]) }, [
        TOP2_OUTPUTS.values,
        TOP2_OUTPUTS.ids,
      ]);
      expect(out[TOP2_OUTPUTS.ids]!.dims).toEqual([2, 1, 2]);
      expect(Array.from(out[TOP2_OUTPUTS.ids]!.data as BigInt64Array, Number)).toEqual([1, 3, 0, 1]);
      expect(Array.from(out[TOP2_OUTPUTS.values]!.data as Float32Array)).toEqual([0.9, 0.9, 5, 4].map(Math.fround));
    } finally {
      await session.release();
    }
  });

  refusesAWrongVocabulary(exposeGreedyTop2);
});
