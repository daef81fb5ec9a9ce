/**
 * decoder-fuse.ts: the fused step graph computes what the graph as made computes — logits and the present cache —
 * on the CPU provider (which implements the same `com.microsoft` operators) and, where lavapipe offers an adapter,
 * on the WebGPU provider the fusion is for; from an empty past (a cohort's first step) to a past longer than the
 * providers' attention tiles, with padded encoder rows.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../../tools/demo-model/index.js';
import { Mulberry32 } from '../../tools/demo-model/prng.js';
import { type FuseOptions, floatMaskInput, fuseDecoderGraph } from './decoder-fuse.js';
import { splitCrossAttention } from './decoder-split.js';
import { joinModel, smallFloatWeights, splitModel, weightDims, weightName } from './onnx-wire.js';
import { restrictVulkanDrivers, webgpuDrivers } from '../vulkan-drivers.js';

const root = mkdtempSync(path.join(tmpdir(), 'decoder-fuse-'));
const dir = path.join(root, 'tiny');
makeDemoModel('tiny', dir, { quantize: false });
afterAll(() => rmSync(root, { recursive: true, force: true }));
const config = JSON.parse(readFileSync(path.join(dir, 'config.json'), 'utf8')) as Record<string, number>;
const layers = config.decoder_layers!;
const heads = config.decoder_attention_heads!;
const d = config.d_model!;

/**
 * The merged decoder's step graph, fused or as made, and what the fusion did; `device`: as the device-state path
 * prepares it (one query per row, one q/k/v projection, the encoder mask read as float).
 */
function stepGraph(fuse: boolean, device = false) {
  const { model, weights } = splitModel(readFileSync(path.join(dir, 'onnx', 'decoder_model_merged.onnx')));
  const split = splitCrossAttention(model, layers);
  if (!split.ok) throw new Error(split.reason);
  const kept = weights.filter((w) => split.step.uses.has(weightName(w)));
  const graph = split.step.model.graph!;
  graph.node = [...(graph.node ?? [])];
  const options: FuseOptions = device ? { singleQuery: true, weightDims: weightDims(kept) } : {};
  const result = fuse ? fuseDecoderGraph(graph, heads, smallFloatWeights(kept, d), options) : null;
  const floatMask = device && floatMaskInput(graph, 'encoder_attention_mask');
  const nodes = graph.node ?? [];
  return { bytes: joinModel(split.step.model, kept), result, floatMask, nodes, ops: nodes.map((n) => n.opType) };
}

const drivers = webgpuDrivers(true);
if (drivers.ok) restrictVulkanDrivers(drivers.manifests);
const providers: [string, ort.InferenceSession.ExecutionProviderConfig][] = [['cpu', 'cpu']];
if (drivers.ok) providers.push(['webgpu', { name: 'webgpu' } as ort.InferenceSession.ExecutionProviderConfig]);
else if (process.env.CI !== 'true') console.warn(`decoder-fuse.test.ts: WebGPU part skipped: ${drivers.reason}`);

/** Random feeds for 3 rows, `past` cached positions, `source` encoder positions (the later rows padded). */
function feeds(names: readonly string[], past: number, source: number): Record<string, ort.Tensor> {
  const rng = new Mulberry32(past * 31 + source);
  const rows = 3;
  const floats = (dims: number[]) =>
    new ort.Tensor(
      'float32',
      Float32Array.from({ length: dims.reduce((a, b) => a * b, 1) }, () => rng.next() - 0.5),
      dims,
    );
  const out: Record<string, ort.Tensor> = {};
  for (const name of names) {
    if (name === 'input_ids') out[name] = new ort.Tensor('int64', BigInt64Array.of(5n, 9n, 13n), [rows, 1]);
    else if (name === 'encoder_attention_mask')
      out[name] = new ort.Tensor(
        'int64',
        BigInt64Array.from({ length: rows * source }, (_, i) =>
          i % source < source - Math.floor(i / source) * 2 ? 1n : 0n,
        ),
        [rows, source],
      );
    else if (name === 'decoder_attention_mask')
      out[name] = new ort.Tensor('int64', new BigInt64Array(rows * (past + 1)).fill(1n), [rows, past + 1]);
    else if (name.includes('.decoder.')) out[name] = floats([rows, heads, past, d / heads]);
    else if (name.includes('.encoder.')) out[name] = floats([rows, heads, source, d / heads]);
    else throw new Error(`unexpected input ${name}`);
  }
  return out;
}

describe('decoder-fuse', () => {
  it.runIf(!drivers.ok && process.env.CI === 'true')('has its WebGPU part on CI', () => {
    expect.fail(`CI must run the WebGPU part: ${drivers.ok ? '' : drivers.reason}`);
  });

  it('makes every attention block one MultiHeadAttention and every residual layer norm one SkipLayerNormalization', () => {
    const { result, ops, nodes } = stepGraph(true);
    expect(result!.attention).toBe(2 * layers);
    // Three residual + norm pairs per layer; the first layer's first norm has no residual before it.
    expect(result!.skipLayerNorm).toBe(3 * layers);
    expect(ops.filter((op) => op === 'Softmax')).toHaveLength(0);
    expect(ops.filter((op) => op === 'Transpose')).toHaveLength(0);
    expect(result!.nodesAfter).toBeLessThan(0.7 * result!.nodesBefore);
    // Self-attention's query/key/value biases ride in the operator's packed bias input.
    const packed = nodes.filter((n) => n.opType === 'MultiHeadAttention' && (n.input?.[3] ?? '') !== '');
    expect(packed).toHaveLength(layers);
  });

  it('for the device path: no self-attention bias arithmetic, no mask Cast, one q/k/v projection per layer', () => {
    const plain = stepGraph(true);
    const device = stepGraph(true, true);
    expect(device.floatMask).toBe(true);
    expect(device.result!.packedProjections).toBe(layers);
    const count = (ops: readonly unknown[], op: string) => ops.filter((o) => o === op).length;
    expect(count(device.ops, 'MatMul')).toBe(count(plain.ops, 'MatMul') - 2 * layers);
    expect(count(device.ops, 'Split')).toBe(layers);
    for (const op of ['Where', 'LessOrEqual', 'And', 'Range', 'Cast']) {
      expect(device.ops.filter((o) => o === op).length, op).toBeLessThan(plain.ops.filter((o) => o === op).length);
    }
  });

  for (const [label, provider] of providers) {
    it(`${label}: the fused step graph gives the logits and present cache of the graph as made`, async () => {
      const options = { executionProviders: [provider], logSeverityLevel: 3 as const };
      const plain = await ort.InferenceSession.create(stepGraph(false).bytes, options);
      const fused = await ort.InferenceSession.create(stepGraph(true).bytes, options);
      const device = await ort.InferenceSession.create(stepGraph(true, true).bytes, options);
      try {
        for (const [past, source] of [
          [0, 5],
          [5, 7],
          [40, 37],
        ] as const) {
          const input = feeds(plain.inputNames, past, source);
          const a = await plain.run(input);
          const mask = input.encoder_attention_mask!;
          const floatMask = new ort.Tensor('float32', Float32Array.from(mask.data as BigInt64Array, Number), mask.dims);
          for (const [variant, out] of [
            ['fused', await fused.run(input)],
            ['device', await device.run({ ...input, encoder_attention_mask: floatMask })],
          ] as const) {
            for (const name of fused.outputNames) {
              expect(out[name]!.dims, name).toEqual(a[name]!.dims);
              const x = a[name]!.data as Float32Array;
              const y = out[name]!.data as Float32Array;
              let worst = 0;
              for (let i = 0; i < x.length; i++) worst = Math.max(worst, Math.abs(x[i]! - y[i]!));
              expect(worst, `${variant} ${name} at past ${past}, source ${source}`).toBeLessThan(1e-4);
            }
          }
        }
      } finally {
        await plain.release();
        await fused.release();
        await device.release();
      }
    });
  }
});
