/**
 * @module engine/float16 — fp16 graphs behind a float32 boundary, and an fp32 → fp16 graph converter.
 *
 * The step loop keeps every tensor as float32 (its caches, pools and search code); an fp16 export
 * (`*_fp16.onnx`) takes and returns float16. `float32Boundary` wraps a session so that float32 feeds of a float16
 * input are converted on the way in and float16 outputs on the way out (onnxruntime-node passes float16 as
 * `Uint16Array` bits; Node 20 has no Float16Array). The cost is one pass over what crosses — on CUDA that is
 * copied to and from the host anyway.
 *
 * `convertModelToFloat16` turns an fp32 graph into the fp16 layout of the published `_fp16` files (weights,
 * inputs, outputs and casts in float16), for generated models and tests.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import onnxProto from 'onnx-proto';
import type * as ort from 'onnxruntime-node';
import { Tensor } from 'onnxruntime-node';
import { joinModel, splitModel } from './graphs/onnx-wire.js';
import { FLOAT, FLOAT16 } from './graphs/onnx-wire.js';

/** What the step loop needs of a session (the float32 boundary provides the same). */
export interface EngineSession {
  readonly inputNames: readonly string[];
  readonly outputNames: readonly string[];
  run(feeds: ort.InferenceSession.FeedsType): Promise<ort.InferenceSession.ReturnType>;
  run(feeds: ort.InferenceSession.FeedsType, fetches: string[]): Promise<ort.InferenceSession.ReturnType>;
  release(): Promise<void>;
}

const F32 = new Float32Array(1);
const U32 = new Uint32Array(F32.buffer);

/** IEEE half bits of `value`, rounded to nearest even (overflow → ±inf, as a float32 → float16 cast). */
export function float16Bits(value: number): number {
  F32[0] = value;
  const x = U32[0]!;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    const half = 1 << (shift - 1);
    const rest = mantissa & ((1 << shift) - 1);
    let bits = mantissa >>> shift;
    if (rest > half || (rest === half && (bits & 1) === 1)) bits++;
    return sign | bits;
  }
  let bits = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (bits & 1) === 1)) bits++;
  return sign | bits;
}

/** The float value of IEEE half `bits`. */
export function float16Value(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const exponent = (bits >>> 10) & 0x1f;
  const mantissa = bits & 0x3ff;
  if (exponent === 0) return sign * mantissa * 2 ** -24;
  if (exponent === 0x1f) return mantissa !== 0 ? Number.NaN : sign * Infinity;
  return sign * (1 + mantissa / 1024) * 2 ** (exponent - 15);
}

export function toFloat16(values: Float32Array): Uint16Array {
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; i++) out[i] = float16Bits(values[i]!);
  return out;
}

export function fromFloat16(bits: Uint16Array): Float32Array {
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; i++) out[i] = float16Value(bits[i]!);
  return out;
}

/** `session` itself when nothing crosses as float16, else a session that converts at its inputs and outputs. */
export function float32Boundary(session: ort.InferenceSession): EngineSession {
  const halfInputs = new Set(
    session.inputMetadata.filter((m) => m.isTensor && m.type === 'float16').map((m) => m.name),
  );
  const halfOutputs = session.outputMetadata.some((m) => !m.isTensor || m.type === 'float16');
  if (halfInputs.size === 0 && !halfOutputs) return session;
  return {
    inputNames: session.inputNames,
    outputNames: session.outputNames,
    release: () => session.release(),
    async run(feeds: ort.InferenceSession.FeedsType, fetches?: string[]) {
      const converted: Record<string, ort.Tensor> = {};
      for (const [name, tensor] of Object.entries(feeds)) {
        converted[name] =
          halfInputs.has(name) && tensor.type === 'float32'
            ? new Tensor('float16', toFloat16(tensor.data as Float32Array), tensor.dims)
            : tensor;
      }
      const out = fetches === undefined ? await session.run(converted) : await session.run(converted, fetches);
      const result: Record<string, ort.Tensor> = {};
      for (const [name, tensor] of Object.entries(out)) {
        result[name] =
          tensor.type === 'float16'
            ? new Tensor('float32', fromFloat16(tensor.data as Uint16Array), tensor.dims)
            : tensor;
      }
      return result;
    },
  };
}

const { onnx } = onnxProto;
/** Largest finite half: fp32 constants beyond it (attention masks' −1e9) are clamped, not turned into inf. */
const HALF_MAX = 65504;

/**
 * Convert an fp32 ONNX file to fp16: float weights and constants (clamped to ±65504), float inputs, outputs and
 * value types, and `Cast(to = FLOAT)` nodes become float16, in every subgraph. Layer norms and softmax then run in
 * float16 as they do in the published `_fp16` files.
 */
export function convertModelToFloat16(source: string, output: string): void {
  const { model, weights } = splitModel(readFileSync(source));
  const halfTensor = (t: onnxProto.onnx.ITensorProto) => {
    if (t.dataType !== FLOAT) return t;
    if (t.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
      throw new Error(`${source}: weight ${t.name} is in external data; convert inline-weight graphs only`);
    }
    const raw =
      t.rawData && t.rawData.length > 0 ? t.rawData : new Uint8Array(Float32Array.from(t.floatData ?? []).buffer);
    const aligned = new Float32Array(raw.length / 4);
    new Uint8Array(aligned.buffer).set(raw);
    const half = toFloat16(aligned.map((v) => Math.max(-HALF_MAX, Math.min(HALF_MAX, v))));
    return { ...t, dataType: FLOAT16, floatData: [], rawData: new Uint8Array(half.buffer) };
  };
  const halfType = (v: onnxProto.onnx.IValueInfoProto) => {
    if (v.type?.tensorType?.elemType === FLOAT) v.type.tensorType.elemType = FLOAT16;
  };
  const walk = (g: onnxProto.onnx.IGraphProto) => {
    g.initializer = (g.initializer ?? []).map(halfTensor);
    for (const v of [...(g.input ?? []), ...(g.output ?? []), ...(g.valueInfo ?? [])]) halfType(v);
    for (const node of g.node ?? []) {
      for (const attr of node.attribute ?? []) {
        if (node.opType === 'Cast' && attr.name === 'to' && Number(attr.i) === FLOAT) attr.i = FLOAT16;
        if (attr.t) attr.t = halfTensor(attr.t);
        if (attr.g) walk(attr.g);
        for (const sub of attr.graphs ?? []) walk(sub);
      }
    }
  };
  walk(model.graph!);
  const halfWeights = weights.map((entry) => {
    const tensor = onnx.TensorProto.decode(entry.subarray(lengthPrefixEnd(entry)));
    const encoded = onnx.TensorProto.encode(halfTensor(tensor)).finish();
    return onnx.GraphProto.encode({ initializer: [onnx.TensorProto.decode(encoded)] }).finish();
  });
  writeFileSync(output, joinModel(model, halfWeights));
}

/** Where the payload of a length-delimited entry (one-byte tag, varint length) starts. */
function lengthPrefixEnd(entry: Uint8Array): number {
  let at = 1;
  while (entry[at]! >= 0x80) at++;
  return at + 1;
}
