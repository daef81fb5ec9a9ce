import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import '../ort-env.js';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { crossCacheOutputs, splitCrossAttention } from './decoder-split.js';
import { ElemType, encodeModel, GraphBuilder, WeightSink } from '../../tools/demo-model/onnx-builder.js';
import { joinModel, splitModel, weightName } from './onnx-wire.js';
import { makeDemoModel } from '../../tools/demo-model/index.js';

const { onnx } = onnxProto;
const B = 'batch_size';

/**
 * A one-layer decoder in the optimum merged layout: one `If(use_cache_branch)` around the whole decoder. The
 * cache branch appends `2·x` to the self-attention past and passes the cross-attention past through; the other
 * branch computes both (the cross cache from the encoder's states). `logits` mixes the two caches, so a wrong
 * cache shows.
 */
function optimumLayoutModel(): Uint8Array {
  const g = new GraphBuilder(new WeightSink(1));
  const x = g.input('input_ids', ElemType.FLOAT, [B, 1, 1, 2]);
  const states = g.input('encoder_hidden_states', ElemType.FLOAT, [B, 1, 'S', 2]);
  const useCache = g.input('use_cache_branch', ElemType.BOOL, [1]);
  const past = (kind: string, part: string) =>
    g.input(`past_key_values.0.${kind}.${part}`, ElemType.FLOAT, [B, 1, kind === 'decoder' ? 'P' : 'S', 2]);
  const selfPast = [past('decoder', 'key'), past('decoder', 'value')];
  const crossPast = [past('encoder', 'key'), past('encoder', 'value')];
  const outputs = [
    'logits',
    ...['decoder', 'encoder'].flatMap((k) => ['key', 'value'].map((p) => `present.0.${k}.${p}`)),
  ];
  const branch = (cached: boolean) => {
    const b = g.branch();
    const selfCache = [0, 1].map((j) =>
      cached
        ? b.op('Concat', [selfPast[j]!, b.op('Mul', [x, b.float(2 + j)])], { axis: { i: 2 } })
        : b.op('Mul', [x, b.float(2 + j)]),
    );
    const crossCache = [0, 1].map((j) =>
      cached ? b.op('Identity', [crossPast[j]!]) : b.op('Mul', [states, b.float(5 + j)]),
    );
    const logits = b.op('Concat', [...selfCache, ...crossCache], { axis: { i: 2 } });
    [logits, ...selfCache, ...crossCache].forEach((value, k) =>
      b.output(value, `${cached ? 'with' : 'no'}_past_${k}`, ElemType.FLOAT, [B, 1, 'L', 2]),
    );
    return b.graph(cached ? 'with_past' : 'no_past');
  };
  g.opN('If', [useCache], { then_branch: { g: branch(true) }, else_branch: { g: branch(false) } }, outputs);
  for (const name of outputs) g.outputs.push({ name, type: { tensorType: { elemType: ElemType.FLOAT } } });
  return encodeModel(g.graph('optimum_layout'), 'test');
}

const root = mkdtempSync(path.join(tmpdir(), 'decoder-split-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const tensor = (data: number[], dims: number[]) => new ort.Tensor('float32', Float32Array.from(data), dims);
const values = (t: ort.Tensor | undefined) => Array.from(t!.data as Float32Array);

describe('splitCrossAttention', () => {
  it('splits an If around the whole decoder into a cross graph and a cache-branch step graph with equal results', async () => {
    const bytes = optimumLayoutModel();
    const split = splitCrossAttention(onnx.ModelProto.decode(bytes), 1);
    if (!split.ok) throw new Error(split.reason);
    expect(split.step.model.graph!.input!.map((i) => i.name)).not.toContain('use_cache_branch');
    expect(split.step.model.graph!.output!.map((o) => o.name)).toEqual([
      'logits',
      'present.0.decoder.key',
      'present.0.decoder.value',
    ]);
    expect(split.cross.model.graph!.input!.map((i) => i.name)).toEqual(['encoder_hidden_states']);
    const encode = (m: onnxProto.onnx.IModelProto) => onnx.ModelProto.encode(m).finish();
    const [merged, step, cross] = await Promise.all(
      [bytes, encode(split.step.model), encode(split.cross.model)].map((b) => ort.InferenceSession.create(b)),
    );
    try {
      const x = [tensor([1, 2], [1, 1, 1, 2]), tensor([3, 4], [1, 1, 1, 2])];
      const states = tensor([1, 1, 2, 2, 3, 3], [1, 1, 3, 2]);
      const empty = () => tensor([], [1, 1, 0, 2]);
      // Merged: first step without the cache, second with what the first returned.
      const first = await merged.run({
        input_ids: x[0]!,
        encoder_hidden_states: states,
        use_cache_branch: new ort.Tensor('bool', Uint8Array.of(0), [1]),
        'past_key_values.0.decoder.key': empty(),
        'past_key_values.0.decoder.value': empty(),
        'past_key_values.0.encoder.key': empty(),
        'past_key_values.0.encoder.value': empty(),
      });
      const second = await merged.run({
        input_ids: x[1]!,
        encoder_hidden_states: states,
        use_cache_branch: new ort.Tensor('bool', Uint8Array.of(1), [1]),
        'past_key_values.0.decoder.key': first['present.0.decoder.key']!,
        'past_key_values.0.decoder.value': first['present.0.decoder.value']!,
        'past_key_values.0.encoder.key': first['present.0.encoder.key']!,
        'past_key_values.0.encoder.value': first['present.0.encoder.value']!,
      });
      // Split: the cross graph once, then the step graph from an empty self-attention past.
      const crossCache = await cross.run({ encoder_hidden_states: states });
      expect(values(crossCache['present.0.encoder.key'])).toEqual(values(first['present.0.encoder.key']));
      const crossFeeds = {
        'past_key_values.0.encoder.key': crossCache['present.0.encoder.key']!,
        'past_key_values.0.encoder.value': crossCache['present.0.encoder.value']!,
      };
      const stepFirst = await step.run({
        input_ids: x[0]!,
        'past_key_values.0.decoder.key': empty(),
        'past_key_values.0.decoder.value': empty(),
        ...crossFeeds,
      });
      const stepSecond = await step.run({
        input_ids: x[1]!,
        'past_key_values.0.decoder.key': stepFirst['present.0.decoder.key']!,
        'past_key_values.0.decoder.value': stepFirst['present.0.decoder.value']!,
        ...crossFeeds,
      });
      for (const [a, b] of [
        [first, stepFirst],
        [second, stepSecond],
      ] as const) {
        for (const name of ['logits', 'present.0.decoder.key', 'present.0.decoder.value']) {
          expect(b[name]!.dims).toEqual(a[name]!.dims);
          expect(values(b[name])).toEqual(values(a[name]));
        }
      }
    } finally {
      await Promise.all([merged, step, cross].map((s) => s.release()));
    }
  });

  it('refuses a graph that reads the condition outside a cache If, and one whose cross cache needs the past', () => {
    const g = new GraphBuilder(new WeightSink(1));
    const useCache = g.input('use_cache_branch', ElemType.BOOL, [1]);
    g.output(g.op('Not', [useCache]), 'present.0.encoder.key', ElemType.BOOL, [1]);
    g.output(g.op('Not', [useCache]), 'present.0.encoder.value', ElemType.BOOL, [1]);
    const model = onnx.ModelProto.decode(encodeModel(g.graph('other'), 'test'));
    expect(splitCrossAttention(model, 1)).toEqual({ ok: false, reason: expect.stringContaining('is read by Not') });

    const h = new GraphBuilder(new WeightSink(1));
    h.input('use_cache_branch', ElemType.BOOL, [1]);
    for (const part of ['key', 'value']) {
      const pastSelf = h.input(`past_key_values.0.decoder.${part}`, ElemType.FLOAT, [1]);
      h.output(h.op('Neg', [pastSelf]), `present.0.encoder.${part}`, ElemType.FLOAT, [1]);
    }
    const needsPast = onnx.ModelProto.decode(encodeModel(h.graph('needs_past'), 'test'));
    expect(splitCrossAttention(needsPast, 1)).toEqual({
      ok: false,
      reason: 'the cross-attention cache depends on past_key_values.0.decoder.key',
    });
  });

  it('on the generated model, gives each weight to one graph only', async () => {
    const dir = path.join(root, 'tiny');
    makeDemoModel('tiny', dir);
    const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as { decoder_layers: number };
    const { model, weights } = splitModel(readFileSync(path.join(dir, 'onnx', 'decoder_model_merged.onnx')));
    const split = splitCrossAttention(model, config.decoder_layers);
    if (!split.ok) throw new Error(split.reason);
    const names = weights.map(weightName);
    const step = names.filter((n) => split.step.uses.has(n));
    const cross = names.filter((n) => split.cross.uses.has(n));
    expect(cross.length).toBeGreaterThan(0);
    expect(step.filter((n) => cross.includes(n))).toEqual([]);
    expect(split.cross.model.graph!.output!.map((o) => o.name)).toEqual(crossCacheOutputs(config.decoder_layers));
    // Both load as they are cut (every value they read is an input, an initializer or made by a node).
    for (const [graph, uses] of [
      [split.step.model, split.step.uses],
      [split.cross.model, split.cross.uses],
    ] as const) {
      const session = await ort.InferenceSession.create(
        joinModel(
          graph,
          weights.filter((w) => uses.has(weightName(w))),
        ),
      );
      await session.release();
    }
  });
});
