/**
 * @module tools/quantize-graph — the graph rewrite of int8 quantization (quantize.ts reads and writes the files):
 * onnxruntime's `quantize_dynamic` with the settings transformers.js publishes its `q8` files with.
 *
 * What is quantized:
 * - `MatMul(x, W)` with W a constant 2-D float weight → `DynamicQuantizeLinear(x)` → `MatMulInteger` → `Cast`
 *   → `Mul(x_scale · w_scale)`; onnxruntime fuses this into one DynamicQuantizeMatMul on the CPU.
 * - `Gemm(x, W, transB = 1)` with no C (a tied LM head written as one GEMM against the embedding) is the same
 *   product against Wᵀ and is quantized like MatMul, so the largest single weight of M2M100 is int8 whichever
 *   way an exporter spelled the head.
 * - `Gather(W, ids)` with W a constant float table (token embeddings) → `Gather` on int8 → `DequantizeLinear`:
 *   onnxruntime's GatherQuant (per-tensor scale).
 * Everything else (layer norms, softmax, attention's activation×activation products, biases) stays float32.
 *
 * Two activation modes:
 * - `tensor` (the published recipe): `DynamicQuantizeLinear` picks one scale and zero point per tensor, so a
 *   row's numbers depend on the other rows of its batch.
 * - `row`: each row (last axis) gets its own symmetric scale (`absmax / 127`, zero point 128 in uint8), so a
 *   row quantizes the same alone or in any batch; the integer product is exact and the rescale elementwise,
 *   so the output of a row does not depend on what it is batched with.
 */
import onnxProto from 'onnx-proto';
import { ATTR, ElemType } from '../engine/graphs/onnx-wire.js';
import type { SourceWeight, WeightReader } from './onnx-weights.js';

type INodeProto = onnxProto.onnx.INodeProto;
type IGraphProto = onnxProto.onnx.IGraphProto;
type ITensorProto = onnxProto.onnx.ITensorProto;
type IAttributeProto = onnxProto.onnx.IAttributeProto;

export type ActivationQuantization = 'tensor' | 'row';

/** A quantized weight's initializers. */
interface QuantizedWeight {
  q: string;
  scale: string;
  zeroPoint: string;
}

/** What the rewrite added: the new initializers, and the nodes replaced by op type (MatMul, Gemm, Gather). */
export interface GraphQuantization {
  added: ITensorProto[];
  quantized: Record<string, number>;
}

/**
 * Rewrite `graph` and its subgraphs in place, reading the float weights of `weights` (and of each subgraph's own
 * initializers) through `reader`; `qmax` bounds the int8 weights (64 with reduce_range, else 127).
 */
export function quantizeGraph(
  graph: IGraphProto,
  weights: Map<string, SourceWeight>,
  reader: WeightReader,
  { activations, qmax }: { activations: ActivationQuantization; qmax: number },
): GraphQuantization {
  const quantized: Record<string, number> = {};
  const added: ITensorProto[] = [];
  /** Quantized forms made so far, by source weight and layout (a weight used twice is quantized once). */
  const made = new Map<string, QuantizedWeight>();
  let counter = 0;
  const fresh = (base: string) => `${base}/mt_serve_q${counter++}`;
  const quantizedWeight = (key: string, base: string, make: (names: QuantizedWeight) => ITensorProto[]) => {
    let q = made.get(key);
    if (q === undefined) {
      q = { q: `${base}_quantized`, scale: `${base}_scale`, zeroPoint: `${base}_zero_point` };
      added.push(...make(q));
      made.set(key, q);
    }
    return q;
  };

  /** An embedding table quantized per tensor (onnxruntime's GatherQuant: full int8 range, symmetric). */
  const gatherTable = (w: SourceWeight) =>
    quantizedWeight(`${w.proto.name}|gather`, `${w.proto.name}_gather`, (q) => {
      const values = reader.floats(w.proto);
      let absMax = 0;
      for (const v of values) absMax = Math.max(absMax, Math.abs(v));
      const scale = absMax / 127;
      const data = new Int8Array(values.length);
      for (let i = 0; i < values.length; i++) data[i] = quantizeValue(values[i]!, scale, 127);
      return [
        tensor(q.q, w.proto.dims!.map(Number), ElemType.INT8, data),
        tensor(q.scale, [], ElemType.FLOAT, Float32Array.of(scale)),
        tensor(q.zeroPoint, [], ElemType.INT8, new Int8Array(1)),
      ];
    });

  /** W (or Wᵀ of a Gemm) as a [K, N] right-hand side: N output channels, each with its own symmetric scale. */
  const weightPerColumn = (w: SourceWeight, transposed: boolean) => {
    const key = `${w.proto.name}|${transposed ? 'T' : 'N'}|cols`;
    return quantizedWeight(key, `${w.proto.name}${transposed ? '_transposed' : ''}`, (q) => {
      const [rows, cols] = w.proto.dims!.map(Number) as [number, number];
      const values = reader.floats(w.proto);
      const K = transposed ? cols : rows;
      const N = transposed ? rows : cols;
      const at = transposed
        ? (k: number, n: number) => values[n * cols + k]!
        : (k: number, n: number) => values[k * cols + n]!;
      const scales = new Float32Array(N);
      for (let k = 0; k < K; k++) for (let n = 0; n < N; n++) scales[n] = Math.max(scales[n]!, Math.abs(at(k, n)));
      for (let n = 0; n < N; n++) scales[n] = scales[n]! / qmax;
      const data = new Int8Array(K * N);
      for (let k = 0; k < K; k++) {
        for (let n = 0; n < N; n++) data[k * N + n] = quantizeValue(at(k, n), scales[n]!, qmax);
      }
      return [
        tensor(q.q, [K, N], ElemType.INT8, data),
        tensor(q.scale, [N], ElemType.FLOAT, scales),
        tensor(q.zeroPoint, [N], ElemType.INT8, new Int8Array(N)),
      ];
    });
  };

  const rewrite = (g: IGraphProto, scope: Map<string, SourceWeight>): void => {
    const inScope = new Map(scope);
    for (const init of g.initializer ?? []) if (init.name) inScope.set(init.name, { proto: init, entry: null });
    const floatWeight = (name: string | undefined): SourceWeight | null => {
      const w = name === undefined ? undefined : inScope.get(name);
      return w && w.proto.dataType === ElemType.FLOAT && w.proto.dims?.length === 2 ? w : null;
    };
    /** Quantized activations per input value and scope (q, k, v projections of one input share it). */
    const activationsOf = new Map<string, string[]>();
    const nodes: INodeProto[] = [];
    const emit = (node: INodeProto) => nodes.push(node);
    /** Emit a node of one output, named fresh from `name`. */
    const op = (opType: string, input: string[], output: string, name: string, attribute?: IAttributeProto[]) =>
      emit({ opType, input, output: [output], name: fresh(name), ...(attribute && { attribute }) });

    const quantizedActivation = (x: string): string[] => {
      let out = activationsOf.get(x);
      if (out !== undefined) return out;
      if (activations === 'tensor') {
        out = [fresh(`${x}_quantized`), fresh(`${x}_scale`), fresh(`${x}_zero_point`)];
        emit({ opType: 'DynamicQuantizeLinear', input: [x], output: out, name: fresh(`${x}_QuantizeLinear`) });
      } else {
        // Per row: scale = max(|x|, tiny) / 127 over the last axis; x_q = round(x / scale) + 128 in [1, 255].
        const v = (what: string) => fresh(`${x}_row_${what}`);
        const names = 'abs absmax absmax_clamped scale scaled rounded shifted quantized'.split(' ').map(v);
        const [abs, absMax, clamped, scale, scaled, rounded, shifted, q] = names;
        const floor = constant(added, fresh('row_floor'), ElemType.FLOAT, Float32Array.of(1e-30));
        const divisor = constant(added, fresh('row_qmax'), ElemType.FLOAT, Float32Array.of(127));
        const offset = constant(added, fresh('row_offset'), ElemType.FLOAT, Float32Array.of(128));
        const steps: [string, string[], string, IAttributeProto[]?][] = [
          ['Abs', [x], abs],
          ['ReduceMax', [abs], absMax, [{ name: 'axes', type: ATTR.INTS, ints: [-1] }, intAttribute('keepdims', 1)]],
          ['Max', [absMax, floor], clamped],
          ['Div', [clamped, divisor], scale],
          ['Div', [x, scale], scaled],
          ['Round', [scaled], rounded],
          ['Add', [rounded, offset], shifted],
          ['Cast', [shifted], q, [intAttribute('to', ElemType.UINT8)]],
        ];
        for (const [opType, input, output, attribute] of steps) op(opType, input, output, opType, attribute ?? []);
        out = [q, scale, constant(added, fresh('row_zero_point'), ElemType.UINT8, Uint8Array.of(128))];
      }
      activationsOf.set(x, out);
      return out;
    };

    const integerProduct = (x: string, w: QuantizedWeight, y: string, name: string) => {
      const [xq, xScale, xZero] = quantizedActivation(x);
      const acc = fresh(`${y}_int32`);
      const accFloat = fresh(`${y}_float`);
      op('MatMulInteger', [xq!, w.q, xZero!, w.zeroPoint], acc, `${name}_quant`);
      op('Cast', [acc], accFloat, `${name}_cast`, [intAttribute('to', ElemType.FLOAT)]);
      if (activations === 'tensor') {
        const scales = fresh(`${name}_scales_mul`);
        op('Mul', [xScale!, w.scale], scales, `${name}_scales_mul`);
        op('Mul', [accFloat, scales], y, `${name}_output_scale_mul`);
      } else {
        const perColumn = fresh(`${y}_column_scaled`);
        op('Mul', [accFloat, w.scale], perColumn, `${name}_column_scale`);
        op('Mul', [perColumn, xScale!], y, `${name}_row_scale`);
      }
    };

    for (const node of g.node ?? []) {
      for (const sub of subgraphs(node)) rewrite(sub, inScope);
      const name = node.name || node.output![0]!;
      const count = (op: string) => (quantized[op] = (quantized[op] ?? 0) + 1);
      // Gemm(x, W, transB = 1) is the product against Wᵀ.
      const transposed = node.opType === 'Gemm' && gemmIsPlainTransB(node);
      if ((node.opType === 'MatMul' || transposed) && node.input?.length === 2) {
        const w = floatWeight(node.input[1]);
        if (w) {
          integerProduct(node.input[0]!, weightPerColumn(w, transposed), node.output![0]!, name);
          count(transposed ? 'Gemm' : 'MatMul');
          continue;
        }
      }
      if (node.opType === 'Gather' && intAttr(node, 'axis', 0) === 0) {
        const w = floatWeight(node.input?.[0]);
        if (w) {
          const q = gatherTable(w);
          const gathered = fresh(`${node.output![0]}_quantized`);
          op('Gather', [q.q, node.input![1]!], gathered, `${name}_quant`, [intAttribute('axis', 0)]);
          op('DequantizeLinear', [gathered, q.scale, q.zeroPoint], node.output![0]!, `${name}_dequantize`);
          count('Gather');
          continue;
        }
      }
      emit(node);
    }
    g.node = nodes;
  };
  rewrite(graph, weights);
  return { added, quantized };
}

/** The graphs a node holds in its attributes (If branches, Loop and Scan bodies). */
function subgraphs(node: INodeProto): IGraphProto[] {
  return (node.attribute ?? []).flatMap((attr) => [...(attr.g ? [attr.g] : []), ...(attr.graphs ?? [])]);
}

/** Every value some node of `graph` or its subgraphs reads, and the graph's outputs. */
export function valuesRead(graph: IGraphProto, into = new Set<string>()): Set<string> {
  for (const node of graph.node ?? []) {
    for (const input of node.input ?? []) into.add(input);
    for (const sub of subgraphs(node)) valuesRead(sub, into);
  }
  for (const out of graph.output ?? []) into.add(out.name ?? '');
  return into;
}

/** round-half-to-even(v / scale) clamped to ±qmax, as numpy's rint in onnxruntime's quantizer. */
function quantizeValue(v: number, scale: number, qmax: number): number {
  if (scale === 0) return 0;
  const x = v / scale;
  let r = Math.round(x);
  if (Math.abs(x % 1) === 0.5 && r % 2 !== 0) r -= 1;
  return Math.max(-qmax, Math.min(qmax, r));
}

function gemmIsPlainTransB(node: INodeProto): boolean {
  const alpha = node.attribute?.find((a) => a.name === 'alpha')?.f ?? 1;
  return intAttr(node, 'transA', 0) === 0 && intAttr(node, 'transB', 0) === 1 && alpha === 1;
}

function intAttr(node: INodeProto, name: string, fallback: number): number {
  const attr = node.attribute?.find((a) => a.name === name);
  return attr?.i === undefined || attr.i === null ? fallback : Number(attr.i);
}

function intAttribute(name: string, i: number): IAttributeProto {
  return { name, type: ATTR.INT, i };
}

function tensor(name: string, dims: number[], dataType: number, data: ArrayBufferView): ITensorProto {
  return { name, dims, dataType, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

function constant(added: ITensorProto[], name: string, dataType: number, data: ArrayBufferView): string {
  added.push(tensor(name, [], dataType, data));
  return name;
}
