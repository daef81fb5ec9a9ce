/**
 * @module tools/quantize — dynamic int8 quantization of an ONNX export, in Node (no Python): the graph
 * transformation onnxruntime's `quantize_dynamic` makes with the settings transformers.js publishes its `q8`
 * files with (IntegerOps mode, int8 symmetric weights per output channel with reduce_range, uint8 activations
 * quantized at run time, MatMul only when B is a constant, subgraphs included).
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
 *
 * The weights are read as views of the file (onnx-wire.ts) or from their external data file; the output keeps
 * every weight inline (an int8 M2M100-418M is ~0.6 GB per file set, under protobuf's 2 GB).
 *
 * Files: the model folder may come from anywhere, so nothing it names may lead out of it. An external-data
 * location must resolve (symlinks followed) inside the model file's folder, and an output that is a symlink is
 * refused rather than written through. Each output is written to a temporary file beside it and renamed into
 * place; a folder's encoder/decoder pair is replaced as a pair: both are written first, then the old pair is
 * removed and the new one renamed in, so a failed run leaves the old pair whole, and a crash between the two
 * renames leaves one file alone, which no dtype choice takes (session.ts wants both).
 */
import {
  closeSync,
  existsSync,
  lstatSync,
  openSync,
  readFileSync,
  readSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { joinModel, splitModel } from '../engine/onnx-wire.js';

type INodeProto = onnxProto.onnx.INodeProto;
type IGraphProto = onnxProto.onnx.IGraphProto;
type ITensorProto = onnxProto.onnx.ITensorProto;
type IAttributeProto = onnxProto.onnx.IAttributeProto;

const { onnx } = onnxProto;
const DT = { FLOAT: 1, UINT8: 2, INT8: 3, INT64: 7 } as const;
const ATTR = onnx.AttributeProto.AttributeType;

export type ActivationQuantization = 'tensor' | 'row';

export interface QuantizeOptions {
  /** `tensor`: the published q8 recipe; `row`: per-row activation scales (batch-invariant). Default `tensor`. */
  activations?: ActivationQuantization;
  /**
   * 7-bit weights ([-64, 64]) as the published files use: u8×s8 products then cannot saturate the 16-bit
   * intermediate sums of AVX2 CPUs without VNNI. Default true.
   */
  reduceRange?: boolean;
}

export interface QuantizeReport {
  source: string;
  output: string;
  /** Nodes replaced by op type (MatMul, Gemm, Gather). */
  quantized: Record<string, number>;
  /** Weights written as int8, and their float32 element count. */
  int8Weights: number;
  int8Elements: number;
  bytesIn: number;
  bytesOut: number;
}

/** A float weight of the source: where its values are. */
interface SourceWeight {
  proto: ITensorProto;
  /** The initializer entry as in the file (kept verbatim when the weight is not replaced). */
  entry: Uint8Array | null;
}

/**
 * Quantize one ONNX file (`source` → `output`), written atomically (a temporary file renamed into place).
 * @throws Error naming the weight or node it cannot handle, an external-data location outside the source's
 *   folder, or an output that is a symlink
 */
export function quantizeModelFile(source: string, output: string, options: QuantizeOptions = {}): QuantizeReport {
  refuseSymlink(output);
  const temp = temporaryPath(output);
  try {
    const report = writeQuantized(source, temp, options);
    renameSync(temp, output);
    return { ...report, output };
  } finally {
    rmSync(temp, { force: true });
  }
}

/** Quantize `source` into a new file `output` (created exclusively: never through an existing file or link). */
function writeQuantized(source: string, output: string, options: QuantizeOptions): QuantizeReport {
  const activations = options.activations ?? 'tensor';
  const qmax = (options.reduceRange ?? true) ? 64 : 127;
  const bytes = readFileSync(source);
  const { model, weights } = splitModel(bytes);
  const graph = model.graph!;
  const outer = new Map<string, SourceWeight>();
  for (const entry of weights) {
    const proto = decodeEntry(entry);
    if (proto !== null) outer.set(proto.name!, { proto, entry });
  }
  const reader = new WeightReader(path.dirname(source));
  const quantized: Record<string, number> = {};
  const added: ITensorProto[] = [];
  /** Quantized forms made so far, by source weight and layout (a weight used twice is quantized once). */
  const made = new Map<string, { q: string; scale: string; zeroPoint: string }>();
  let counter = 0;
  const fresh = (base: string) => `${base}/mt_serve_q${counter++}`;

  const rewrite = (g: IGraphProto, scope: Map<string, SourceWeight>): void => {
    const inScope = new Map(scope);
    for (const init of g.initializer ?? []) if (init.name) inScope.set(init.name, { proto: init, entry: null });
    const floatWeight = (name: string | undefined): SourceWeight | null => {
      const w = name === undefined ? undefined : inScope.get(name);
      return w && w.proto.dataType === DT.FLOAT && w.proto.dims?.length === 2 ? w : null;
    };
    /** Quantized activations per input value and scope (q, k, v projections of one input share it). */
    const activationsOf = new Map<string, string[]>();
    const nodes: INodeProto[] = [];
    const emit = (node: INodeProto) => nodes.push(node);

    const weightPerColumn = (w: SourceWeight, transposed: boolean) => {
      const key = `${w.proto.name}|${transposed ? 'T' : 'N'}|cols`;
      let q = made.get(key);
      if (q === undefined) {
        const [rows, cols] = w.proto.dims!.map(Number) as [number, number];
        const values = reader.floats(w.proto);
        // As a [K, N] right-hand side: N output channels, each with its own symmetric scale.
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
        const base = `${w.proto.name}${transposed ? '_transposed' : ''}`;
        q = { q: `${base}_quantized`, scale: `${base}_scale`, zeroPoint: `${base}_zero_point` };
        added.push(tensor(q.q, [K, N], DT.INT8, data), tensor(q.scale, [N], DT.FLOAT, scales));
        added.push(tensor(q.zeroPoint, [N], DT.INT8, new Int8Array(N)));
        made.set(key, q);
      }
      return q;
    };

    const quantizedActivation = (x: string): string[] => {
      let out = activationsOf.get(x);
      if (out !== undefined) return out;
      if (activations === 'tensor') {
        out = [fresh(`${x}_quantized`), fresh(`${x}_scale`), fresh(`${x}_zero_point`)];
        emit({ opType: 'DynamicQuantizeLinear', input: [x], output: out, name: fresh(`${x}_QuantizeLinear`) });
      } else {
        // Per row: scale = max(|x|, tiny) / 127 over the last axis; x_q = round(x / scale) + 128 in [1, 255].
        const v = (what: string) => fresh(`${x}_row_${what}`);
        const [abs, absMax, clamped, scale, scaled, rounded, shifted, q] = [
          'abs',
          'absmax',
          'absmax_clamped',
          'scale',
          'scaled',
          'rounded',
          'shifted',
          'quantized',
        ].map(v) as [string, string, string, string, string, string, string, string];
        const floor = constant(added, fresh('row_floor'), DT.FLOAT, Float32Array.of(1e-30));
        const divisor = constant(added, fresh('row_qmax'), DT.FLOAT, Float32Array.of(127));
        const offset = constant(added, fresh('row_offset'), DT.FLOAT, Float32Array.of(128));
        const steps: [string, string[], string, IAttributeProto[]?][] = [
          ['Abs', [x], abs],
          [
            'ReduceMax',
            [abs],
            absMax,
            [
              { name: 'axes', type: ATTR.INTS, ints: [-1] },
              { name: 'keepdims', type: ATTR.INT, i: 1 },
            ],
          ],
          ['Max', [absMax, floor], clamped],
          ['Div', [clamped, divisor], scale],
          ['Div', [x, scale], scaled],
          ['Round', [scaled], rounded],
          ['Add', [rounded, offset], shifted],
          ['Cast', [shifted], q, [{ name: 'to', type: ATTR.INT, i: DT.UINT8 }]],
        ];
        for (const [opType, input, output, attribute] of steps) {
          emit({ opType, input, output: [output], name: fresh(opType), attribute: attribute ?? [] });
        }
        out = [q, scale, constant(added, fresh('row_zero_point'), DT.UINT8, Uint8Array.of(128))];
      }
      activationsOf.set(x, out);
      return out;
    };

    const integerProduct = (x: string, w: { q: string; scale: string; zeroPoint: string }, y: string, name: string) => {
      const [xq, xScale, xZero] = quantizedActivation(x);
      const acc = fresh(`${y}_int32`);
      const accFloat = fresh(`${y}_float`);
      emit({
        opType: 'MatMulInteger',
        input: [xq!, w.q, xZero!, w.zeroPoint],
        output: [acc],
        name: fresh(`${name}_quant`),
      });
      emit({
        opType: 'Cast',
        input: [acc],
        output: [accFloat],
        name: fresh(`${name}_cast`),
        attribute: [{ name: 'to', type: ATTR.INT, i: DT.FLOAT }],
      });
      if (activations === 'tensor') {
        const scales = fresh(`${name}_scales_mul`);
        emit({ opType: 'Mul', input: [xScale!, w.scale], output: [scales], name: fresh(`${name}_scales_mul`) });
        emit({ opType: 'Mul', input: [accFloat, scales], output: [y], name: fresh(`${name}_output_scale_mul`) });
      } else {
        const perColumn = fresh(`${y}_column_scaled`);
        emit({ opType: 'Mul', input: [accFloat, w.scale], output: [perColumn], name: fresh(`${name}_column_scale`) });
        emit({ opType: 'Mul', input: [perColumn, xScale!], output: [y], name: fresh(`${name}_row_scale`) });
      }
    };

    for (const node of g.node ?? []) {
      for (const attr of node.attribute ?? []) {
        if (attr.g) rewrite(attr.g, inScope);
        for (const sub of attr.graphs ?? []) rewrite(sub, inScope);
      }
      const name = node.name || node.output![0]!;
      const count = (op: string) => (quantized[op] = (quantized[op] ?? 0) + 1);
      if (node.opType === 'MatMul' && node.input?.length === 2) {
        const w = floatWeight(node.input[1]);
        if (w) {
          integerProduct(node.input[0]!, weightPerColumn(w, false), node.output![0]!, name);
          count('MatMul');
          continue;
        }
      }
      if (node.opType === 'Gemm' && node.input?.length === 2 && gemmIsPlainTransB(node)) {
        const w = floatWeight(node.input[1]);
        if (w) {
          integerProduct(node.input[0]!, weightPerColumn(w, true), node.output![0]!, name);
          count('Gemm');
          continue;
        }
      }
      if (node.opType === 'Gather' && intAttr(node, 'axis', 0) === 0) {
        const w = floatWeight(node.input?.[0]);
        if (w) {
          const q = gatherTable(w, reader, added, made);
          const gathered = fresh(`${node.output![0]}_quantized`);
          emit({
            opType: 'Gather',
            input: [q.q, node.input![1]!],
            output: [gathered],
            name: fresh(`${name}_quant`),
            attribute: [{ name: 'axis', type: ATTR.INT, i: 0 }],
          });
          emit({
            opType: 'DequantizeLinear',
            input: [gathered, q.scale, q.zeroPoint],
            output: [node.output![0]!],
            name: fresh(`${name}_dequantize`),
          });
          count('Gather');
          continue;
        }
      }
      emit(node);
    }
    g.node = nodes;
  };
  rewrite(graph, outer);

  // Keep only the source weights something still reads; inline the ones that were external.
  const used = new Set<string>();
  const collect = (g: IGraphProto) => {
    for (const node of g.node ?? []) {
      for (const input of node.input ?? []) used.add(input);
      for (const attr of node.attribute ?? []) {
        if (attr.g) collect(attr.g);
        for (const sub of attr.graphs ?? []) collect(sub);
      }
    }
    for (const out of g.output ?? []) used.add(out.name ?? '');
  };
  collect(graph);
  const kept: Uint8Array[] = [];
  for (const [name, w] of outer) {
    if (!used.has(name)) continue;
    if (w.proto.dataLocation === onnx.TensorProto.DataLocation.EXTERNAL) {
      graph.initializer!.push(inlined(w.proto, reader));
    } else {
      kept.push(w.entry!);
    }
  }
  graph.initializer!.push(...added);
  const out = joinModel(model, kept);
  if (out.length >= 2 ** 31) throw new Error(`${output} would be ${out.length} bytes, past protobuf's 2 GB`);
  reader.close();
  writeFileSync(output, out, { flag: 'wx' });
  const int8 = added.filter((t) => t.dataType === DT.INT8 && (t.dims?.length ?? 0) === 2);
  return {
    source,
    output,
    quantized,
    int8Weights: int8.length,
    int8Elements: int8.reduce((sum, t) => sum + t.dims!.reduce<number>((a, b) => a * Number(b), 1), 0),
    bytesIn: bytes.length,
    bytesOut: out.length,
  };
}

/** The file suffix of each quantized variant (transformers.js names `_quantized` its q8 files). */
export const QUANTIZED_SUFFIX: Record<ActivationQuantization, string> = {
  tensor: '_quantized',
  row: '_quantized_rows',
};

/** The graphs a model folder is quantized from, relative to it. */
export const QUANTIZED_GRAPHS = ['encoder_model', 'decoder_model_merged'] as const;

/**
 * Quantize a model folder's `onnx/encoder_model.onnx` and `onnx/decoder_model_merged.onnx` into
 * `onnx/{name}{suffix}.onnx` beside them (`_quantized` for per-tensor activations, `_quantized_rows` per row).
 */
export function quantizeModelDir(modelDir: string, options: QuantizeOptions = {}): QuantizeReport[] {
  const suffix = QUANTIZED_SUFFIX[options.activations ?? 'tensor'];
  const onnxDir = path.join(modelDir, 'onnx');
  if (lstatSync(onnxDir).isSymbolicLink()) throw new Error(`${onnxDir} is a symlink; refusing to write through it`);
  const pairs = QUANTIZED_GRAPHS.map((name) => ({
    source: path.join(onnxDir, `${name}.onnx`),
    output: path.join(onnxDir, `${name}${suffix}.onnx`),
  }));
  for (const { output } of pairs) refuseSymlink(output);
  const temps = pairs.map(({ output }) => temporaryPath(output));
  try {
    const reports = pairs.map(({ source, output }, i) => ({ ...writeQuantized(source, temps[i]!, options), output }));
    // The old pair leaves before the new one arrives: never one old file beside one new.
    for (const { output } of pairs) rmSync(output, { force: true });
    pairs.forEach(({ output }, i) => renameSync(temps[i]!, output));
    return reports;
  } finally {
    for (const temp of temps) rmSync(temp, { force: true });
  }
}

/** A temporary name beside `output` (same folder, so the rename is atomic). */
function temporaryPath(output: string): string {
  return path.join(path.dirname(output), `.${path.basename(output)}.${process.pid}.tmp`);
}

/** @throws Error when `output` exists as a symlink: written through, it would change a file elsewhere. */
function refuseSymlink(output: string): void {
  let isLink = false;
  try {
    isLink = lstatSync(output).isSymbolicLink();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (isLink) throw new Error(`${output} is a symlink; refusing to write through it`);
}

/** round-half-to-even(v / scale) clamped to ±qmax, as numpy's rint in onnxruntime's quantizer. */
function quantizeValue(v: number, scale: number, qmax: number): number {
  if (scale === 0) return 0;
  const x = v / scale;
  let r = Math.round(x);
  if (Math.abs(x % 1) === 0.5 && r % 2 !== 0) r -= 1;
  return Math.max(-qmax, Math.min(qmax, r));
}

/** An embedding table quantized per tensor (onnxruntime's GatherQuant: full int8 range, symmetric). */
function gatherTable(
  w: SourceWeight,
  reader: WeightReader,
  added: ITensorProto[],
  made: Map<string, { q: string; scale: string; zeroPoint: string }>,
) {
  const key = `${w.proto.name}|gather`;
  let q = made.get(key);
  if (q !== undefined) return q;
  const values = reader.floats(w.proto);
  let absMax = 0;
  for (const v of values) absMax = Math.max(absMax, Math.abs(v));
  const scale = absMax / 127;
  const data = new Int8Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = quantizeValue(values[i]!, scale, 127);
  const base = `${w.proto.name}_gather`;
  q = { q: `${base}_quantized`, scale: `${base}_scale`, zeroPoint: `${base}_zero_point` };
  added.push(tensor(q.q, w.proto.dims!.map(Number), DT.INT8, data));
  added.push(tensor(q.scale, [], DT.FLOAT, Float32Array.of(scale)), tensor(q.zeroPoint, [], DT.INT8, new Int8Array(1)));
  made.set(key, q);
  return q;
}

function gemmIsPlainTransB(node: INodeProto): boolean {
  const alpha = node.attribute?.find((a) => a.name === 'alpha')?.f ?? 1;
  return intAttr(node, 'transA', 0) === 0 && intAttr(node, 'transB', 0) === 1 && alpha === 1;
}

function intAttr(node: INodeProto, name: string, fallback: number): number {
  const attr = node.attribute?.find((a) => a.name === name);
  return attr?.i === undefined || attr.i === null ? fallback : Number(attr.i);
}

function tensor(name: string, dims: number[], dataType: number, data: ArrayBufferView): ITensorProto {
  return { name, dims, dataType, rawData: new Uint8Array(data.buffer, data.byteOffset, data.byteLength) };
}

function constant(added: ITensorProto[], name: string, dataType: number, data: ArrayBufferView): string {
  added.push(tensor(name, [], dataType, data));
  return name;
}

function decodeEntry(entry: Uint8Array): ITensorProto | null {
  // The entry is `tag, length, TensorProto`; sparse initializers (field 15) are kept as they are.
  if (entry[0] !== 0x2a) return null;
  let at = 1;
  while (entry[at]! >= 0x80) at++;
  return onnx.TensorProto.decode(entry.subarray(at + 1));
}

/** The initializer with its external bytes read inline. */
function inlined(proto: ITensorProto, reader: WeightReader): ITensorProto {
  return {
    ...proto,
    dataLocation: onnx.TensorProto.DataLocation.DEFAULT,
    externalData: [],
    rawData: reader.bytes(proto),
  };
}

/** Reads weight values inline or from external data files (relative to the model file's folder). */
class WeightReader {
  readonly #dir: string;
  readonly #fds = new Map<string, number>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  bytes(proto: ITensorProto): Uint8Array {
    if (proto.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL) {
      if (proto.rawData && proto.rawData.length > 0) return proto.rawData;
      if (proto.floatData && proto.floatData.length > 0) {
        const f = Float32Array.from(proto.floatData);
        return new Uint8Array(f.buffer);
      }
      return new Uint8Array(0);
    }
    const info = Object.fromEntries((proto.externalData ?? []).map((e) => [e.key, e.value]));
    const location = info.location;
    if (!location) throw new Error(`weight ${proto.name}: external data without a location`);
    const count = (proto.dims ?? []).reduce<number>((a, b) => a * Number(b), 1);
    const length = info.length !== undefined ? Number(info.length) : count * 4;
    let fd = this.#fds.get(location);
    if (fd === undefined) {
      fd = openSync(this.#inside(location, proto.name ?? '?'), 'r');
      this.#fds.set(location, fd);
    }
    const out = new Uint8Array(length);
    let done = 0;
    const offset = Number(info.offset ?? 0);
    while (done < length) {
      const n = readSync(fd, out, done, length - done, offset + done);
      if (n === 0) throw new Error(`weight ${proto.name}: ${location} ends before byte ${offset + length}`);
      done += n;
    }
    return out;
  }

  /**
   * The file an external-data location names, which must be inside the model file's folder once symlinks are
   * resolved: a location such as `../../outside/secret.bin` would copy another file into the written model.
   */
  #inside(location: string, weight: string): string {
    const root = realpathSync(this.#dir);
    const resolved = path.resolve(root, location);
    const real = existsSync(resolved) ? realpathSync(resolved) : resolved;
    for (const candidate of [resolved, real]) {
      const relative = path.relative(root, candidate);
      if (relative === '' || relative.startsWith('..') || path.isAbsolute(relative)) {
        throw new Error(`weight ${weight}: external data location ${JSON.stringify(location)} is outside ${root}`);
      }
    }
    return real;
  }

  /** The values of a float32 weight (a copy, aligned). */
  floats(proto: ITensorProto): Float32Array {
    const raw = this.bytes(proto);
    const copy = new Uint8Array(raw.length);
    copy.set(raw);
    return new Float32Array(copy.buffer);
  }

  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
  }
}
