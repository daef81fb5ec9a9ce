/**
 * @module bench/lib/matmul-ceiling — the machine's own GEMM ceiling: onnxruntime-node MatMul GFLOP/s on given
 * weight shapes at given row counts, on small ONNX graphs built here with onnx-proto (opset 17).
 *
 * Each graph holds `copies` independent MatMuls of the same [K, N] weight, all reading the same input [rows, K],
 * with enough copies that the weights exceed 64 MB: in the model every weight is read once per decoder step and
 * ~1.6 GB of them never stay in cache, so a ceiling measured on one cache-resident 4 MB weight would overstate
 * what the machine can do at small batch. Weights are graph initializers, as in the model, so onnxruntime
 * pre-packs them the same way. The session uses the engine's intra-op thread setting.
 *
 * `weights: 'int8'` measures the int8 ceiling instead: each copy is the q8 files' pattern (tools/quantize.ts:
 * DynamicQuantizeLinear of X → MatMulInteger with int8 per-column weights → Cast → Mul by the scales), which
 * onnxruntime fuses into one com.microsoft DynamicQuantizeMatMul per copy; FLOPs are counted as for float.
 */
import { performance } from 'node:perf_hooks';
import { intraOpThreadCount } from '../../model-server/engine/engine-options.js';
import '../../model-server/engine/ort-env.js';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import { median } from './stats.js';

const { onnx } = onnxProto;

/** Weight bytes per graph below which more copies are added (defeats the last-level cache). */
const MIN_GRAPH_WEIGHT_BYTES = 64 * 2 ** 20;

export interface MatmulCase {
  key: string;
  k: number;
  n: number;
}

/** Float32 MatMul, or the q8 files' dynamic int8 product (DynamicQuantizeMatMul once fused). */
export type MatmulWeights = 'fp32' | 'int8';

export interface MatmulMeasurement {
  key: string;
  /** Absent in results from before int8 ceilings existed: fp32. */
  weights?: MatmulWeights;
  k: number;
  n: number;
  rows: number;
  copies: number;
  /** Median seconds of one session.run (all copies). */
  runSeconds: number;
  runs: number;
  gflops: number;
}

/** The `matmul` kind of bench/probe.ts: each group's cases at each of its row counts. */
export interface MatmulProbeRequest extends MatmulOptions {
  kind: 'matmul';
  groups: { cases: MatmulCase[]; rows: number[] }[];
}

export interface MatmulOptions {
  /** onnxruntime intra-op threads; 0 leaves onnxruntime's default (every core), as the engine does. */
  intraOpThreads: number;
  /** Minimum measured time per (shape, rows), ms; at least 3 runs are timed after 2 warm-up runs. */
  minTimeMs: number;
  /** Default fp32. */
  weights?: MatmulWeights;
}

/** Deterministic pseudo-random floats in [-0.05, 0.05) (xorshift32), so every run builds the same graphs. */
function fillWeights(out: Float32Array, seed: number): void {
  let x = seed >>> 0 || 1;
  for (let i = 0; i < out.length; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    out[i] = (x / 0x1_0000_0000 - 0.5) * 0.1;
  }
}

/**
 * Encode a graph `Y_i = MatMul(X, W_i)` for i < copies, X of shape [rows (symbolic), k]; with `int8` weights each
 * product is DynamicQuantizeLinear(X) → MatMulInteger(·, W_i int8, ·, zero points) → Cast → Mul(x_scale · w_scale).
 */
export function buildMatmulModel(k: number, n: number, copies: number, weights: MatmulWeights = 'fp32'): Uint8Array {
  const floatType = (dims: (number | string)[]) => ({
    tensorType: {
      elemType: onnx.TensorProto.DataType.FLOAT,
      shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
    },
  });
  const initializer = [];
  const node = [];
  const output = [];
  const { FLOAT, INT8 } = onnx.TensorProto.DataType;
  const bytes = (data: ArrayBufferView) => new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  for (let i = 0; i < copies; i++) {
    const w = new Float32Array(k * n);
    fillWeights(w, 0x9e3779b9 + i);
    if (weights === 'fp32') {
      initializer.push({ name: `W${i}`, dims: [k, n], dataType: FLOAT, rawData: bytes(w) });
      node.push({ opType: 'MatMul', input: ['X', `W${i}`], output: [`Y${i}`], name: `matmul${i}` });
    } else {
      // Values in ±0.05: 7-bit weights (the q8 files' reduce_range) with one scale per column.
      // A loop, not Int8Array.from(w, f): that collects an iterable into a JS array first (131M numbers for the LM head).
      const q = new Int8Array(k * n);
      for (let j = 0; j < q.length; j++) q[j] = Math.round((w[j]! / 0.05) * 64);
      initializer.push(
        { name: `W${i}`, dims: [k, n], dataType: INT8, rawData: bytes(q) },
        { name: `S${i}`, dims: [n], dataType: FLOAT, rawData: bytes(new Float32Array(n).fill(0.05 / 64)) },
        { name: `Z${i}`, dims: [n], dataType: INT8, rawData: bytes(new Int8Array(n)) },
      );
      const cast = { name: 'to', type: onnx.AttributeProto.AttributeType.INT, i: FLOAT };
      node.push(
        { opType: 'DynamicQuantizeLinear', input: ['X'], output: [`Xq${i}`, `Xs${i}`, `Xz${i}`], name: `quantize${i}` },
        { opType: 'MatMulInteger', input: [`Xq${i}`, `W${i}`, `Xz${i}`, `Z${i}`], output: [`A${i}`], name: `mmi${i}` },
        { opType: 'Cast', input: [`A${i}`], output: [`F${i}`], name: `cast${i}`, attribute: [cast] },
        { opType: 'Mul', input: [`Xs${i}`, `S${i}`], output: [`C${i}`], name: `scales${i}` },
        { opType: 'Mul', input: [`F${i}`, `C${i}`], output: [`Y${i}`], name: `rescale${i}` },
      );
    }
    output.push({ name: `Y${i}`, type: floatType(['rows', n]) });
  }
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'mt-serve-bench',
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name: `matmul_${weights}_${k}x${n}`,
      node,
      initializer,
      input: [{ name: 'X', type: floatType(['rows', k]) }],
      output,
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/** Copies of a [k, n] weight needed to pass MIN_GRAPH_WEIGHT_BYTES (at most 64: tiny test shapes stay small). */
export function copiesFor(k: number, n: number, bytesPerWeight = 4): number {
  return Math.min(64, Math.max(1, Math.ceil(MIN_GRAPH_WEIGHT_BYTES / (k * n * bytesPerWeight))));
}

/** Measure GFLOP/s of every case at every row count. One session per shape, created and released here. */
export async function measureMatmuls(
  cases: readonly MatmulCase[],
  rowCounts: readonly number[],
  options: MatmulOptions,
): Promise<MatmulMeasurement[]> {
  const results: MatmulMeasurement[] = [];
  const weights = options.weights ?? 'fp32';
  for (const c of cases) {
    const copies = copiesFor(c.k, c.n, weights === 'int8' ? 1 : 4);
    // The engine's CPU session settings (model-server/engine/session.ts), so both see the same thread pool.
    const sessionOptions: ort.InferenceSession.SessionOptions = {
      executionProviders: ['cpu'],
      graphOptimizationLevel: 'all',
      executionMode: 'sequential',
      intraOpNumThreads: intraOpThreadCount(options.intraOpThreads),
      interOpNumThreads: 1,
      enableCpuMemArena: true,
      enableMemPattern: true,
      logSeverityLevel: 3,
    };
    const session = await ort.InferenceSession.create(buildMatmulModel(c.k, c.n, copies, weights), sessionOptions);
    try {
      for (const rows of rowCounts) {
        const x = new Float32Array(rows * c.k);
        fillWeights(x, rows);
        const feeds = { X: new ort.Tensor('float32', x, [rows, c.k]) };
        for (let i = 0; i < 2; i++) await session.run(feeds);
        const times: number[] = [];
        const start = performance.now();
        while (times.length < 3 || performance.now() - start < options.minTimeMs) {
          const t = performance.now();
          await session.run(feeds);
          times.push((performance.now() - t) / 1000);
        }
        const runSeconds = median(times);
        results.push({
          key: c.key,
          weights,
          k: c.k,
          n: c.n,
          rows,
          copies,
          runSeconds,
          runs: times.length,
          gflops: (2 * rows * c.k * c.n * copies) / runSeconds / 1e9,
        });
      }
    } finally {
      await session.release();
    }
  }
  return results;
}
