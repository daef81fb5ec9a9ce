/**
 * @module tools/demo-model/onnx-builder — a small builder for ONNX graphs (opset 17, IR 8) on top of the
 * protobuf schema from `onnx-proto`, with weights either inline (`raw_data`) or streamed to an external
 * data file (`*.onnx_data`) so a multi-GB model never sits in memory or in one protobuf message (2 GB cap).
 */
import { closeSync, openSync, writeSync } from 'node:fs';
import onnxProto from 'onnx-proto';
import { ATTR, type Dim, ElemType, valueInfo } from '../../engine/graphs/onnx-wire.js';
import { Mulberry32, streamSeed } from './prng.js';

const { onnx } = onnxProto;
type INodeProto = onnxProto.onnx.INodeProto;
type ITensorProto = onnxProto.onnx.ITensorProto;
type IValueInfoProto = onnxProto.onnx.IValueInfoProto;
type IGraphProto = onnxProto.onnx.IGraphProto;
type IAttributeProto = onnxProto.onnx.IAttributeProto;

export { ElemType };
export type ElemTypeId = (typeof ElemType)[keyof typeof ElemType];

/** A dimension (a number, or a symbolic name) and a graph input/output: one copy, in engine/graphs/onnx-wire.ts. */
export type { Dim } from '../../engine/graphs/onnx-wire.js';
export { valueInfo };

/** Tagged attribute values: ONNX needs the type spelled out (a float 1 is not an int 1). */
export type Attr = { i: number } | { f: number } | { ints: number[] } | { g: IGraphProto };

/** How a weight's values are made: drawn from its own seeded stream, a constant, or given data. */
export type WeightFill =
  { kind: 'uniform'; std: number } | { kind: 'constant'; value: number } | { kind: 'data'; data: Float32Array };

/** Where weight bytes go. Values are produced in chunks, so a 500 MB tensor costs one chunk of memory. */
export class WeightSink {
  readonly #seed: number;
  readonly #external: { fd: number; location: string; offset: number } | null;
  /** Floats produced per chunk when streaming (16 MiB). */
  static readonly CHUNK = 4 * 1024 * 1024;
  /** Floats written per tensor name. */
  readonly written = new Map<string, number>();

  readonly #construct: ((name: string, dims: readonly number[]) => Float32Array) | undefined;

  /**
   * @param seed model seed (tensor streams derive from it and the tensor name)
   * @param external when set, weights are appended to `path` and referenced as `location` (a file name
   *   relative to the .onnx file); otherwise they are inlined.
   * @param construct every weight's values by name, in place of the graph's fills (a model built by construction)
   */
  constructor(
    seed: number,
    external?: { path: string; location: string },
    construct?: (name: string, dims: readonly number[]) => Float32Array,
  ) {
    this.#seed = seed;
    this.#construct = construct;
    this.#external = external ? { fd: openSync(external.path, 'w'), location: external.location, offset: 0 } : null;
  }

  tensor(name: string, dims: number[], drawn: WeightFill): ITensorProto {
    const fill: WeightFill = this.#construct ? { kind: 'data', data: this.#construct(name, dims) } : drawn;
    const count = dims.reduce((a, b) => a * b, 1);
    this.written.set(name, count);
    const proto: ITensorProto = { name, dims, dataType: ElemType.FLOAT };
    if (this.#external === null) {
      const data = new Float32Array(count);
      this.#fill(name, fill, data, 0, new Mulberry32(streamSeed(this.#seed, name)));
      proto.rawData = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
      return proto;
    }
    const ext = this.#external;
    // Page-aligned offsets let onnxruntime map the data file directly.
    ext.offset = Math.ceil(ext.offset / 4096) * 4096;
    const start = ext.offset;
    const rng = new Mulberry32(streamSeed(this.#seed, name));
    const chunk = new Float32Array(Math.min(count, WeightSink.CHUNK));
    for (let done = 0; done < count; done += chunk.length) {
      const view = count - done < chunk.length ? chunk.subarray(0, count - done) : chunk;
      this.#fill(name, fill, view, done, rng);
      writeSync(ext.fd, new Uint8Array(view.buffer, view.byteOffset, view.byteLength), 0, view.byteLength, ext.offset);
      ext.offset += view.byteLength;
    }
    proto.dataLocation = onnx.TensorProto.DataLocation.EXTERNAL;
    proto.externalData = [
      { key: 'location', value: ext.location },
      { key: 'offset', value: String(start) },
      { key: 'length', value: String(count * 4) },
    ];
    return proto;
  }

  close(): void {
    if (this.#external !== null) closeSync(this.#external.fd);
  }

  #fill(name: string, fill: WeightFill, out: Float32Array, offset: number, rng: Mulberry32): void {
    switch (fill.kind) {
      case 'uniform':
        rng.fillUniform(out, fill.std);
        return;
      case 'constant':
        out.fill(fill.value);
        return;
      case 'data':
        if (fill.data.length < offset + out.length) throw new Error(`weight ${name}: data too short`);
        out.set(fill.data.subarray(offset, offset + out.length));
        return;
    }
  }
}

/**
 * Builds one graph (or an `If` branch). Node and value names are made unique with a counter shared by a
 * graph and its branches, because ONNX requires unique names across subgraphs.
 */
export class GraphBuilder {
  readonly nodes: INodeProto[] = [];
  readonly initializers: ITensorProto[] = [];
  readonly inputs: IValueInfoProto[] = [];
  readonly outputs: IValueInfoProto[] = [];
  readonly #sink: WeightSink;
  readonly #counter: { n: number };
  readonly #consts = new Map<string, string>();

  constructor(sink: WeightSink, counter: { n: number } = { n: 0 }) {
    this.#sink = sink;
    this.#counter = counter;
  }

  /** A builder for an `If` branch: shares the name counter; refers to outer values by name. */
  branch(): GraphBuilder {
    return new GraphBuilder(this.#sink, this.#counter);
  }

  input(name: string, elemType: ElemTypeId, dims: Dim[]): string {
    this.inputs.push(valueInfo(name, elemType, dims));
    return name;
  }

  /** Declare `value` as a graph output named `name` (an Identity when the names differ). */
  output(value: string, name: string, elemType: ElemTypeId, dims: Dim[]): void {
    if (value !== name) this.op('Identity', [value], {}, [name]);
    this.outputs.push(valueInfo(name, elemType, dims));
  }

  /** A weight initializer. */
  weight(name: string, dims: number[], fill: WeightFill): string {
    this.initializers.push(this.#sink.tensor(name, dims, fill));
    return name;
  }

  /** An int64 constant (a scalar when `dims` is `[]`), deduplicated within this graph. */
  int64(values: number[], dims: number[] = [values.length]): string {
    const key = `i64:${dims.join('x')}:${values.join(',')}`;
    const known = this.#consts.get(key);
    if (known) return known;
    const name = this.#fresh('const_i64');
    const data = BigInt64Array.from(values, (v) => BigInt(v));
    this.initializers.push({ name, dims, dataType: ElemType.INT64, rawData: new Uint8Array(data.buffer) });
    this.#consts.set(key, name);
    return name;
  }

  /** A float32 scalar constant, deduplicated within this graph. */
  float(value: number): string {
    const key = `f32:${value}`;
    const known = this.#consts.get(key);
    if (known) return known;
    const name = this.#fresh('const_f32');
    const data = Float32Array.of(value);
    this.initializers.push({ name, dims: [], dataType: ElemType.FLOAT, rawData: new Uint8Array(data.buffer) });
    this.#consts.set(key, name);
    return name;
  }

  /** Add a node; returns its first output (fresh names unless `outputs` are given). */
  op(opType: string, inputs: string[], attrs: Record<string, Attr> = {}, outputs?: string[]): string {
    return this.opN(opType, inputs, attrs, outputs ?? [this.#fresh(opType.toLowerCase())])[0]!;
  }

  /** Add a node with several outputs. */
  opN(opType: string, inputs: string[], attrs: Record<string, Attr>, outputs: string[]): string[] {
    const attribute: IAttributeProto[] = Object.entries(attrs).map(([name, value]) => {
      if ('i' in value) return { name, type: ATTR.INT, i: value.i };
      if ('f' in value) return { name, type: ATTR.FLOAT, f: value.f };
      if ('ints' in value) return { name, type: ATTR.INTS, ints: value.ints };
      return { name, type: ATTR.GRAPH, g: value.g };
    });
    this.nodes.push({ opType, input: inputs, output: outputs, name: this.#fresh(`${opType}_node`), attribute });
    return outputs;
  }

  /** The finished graph. */
  graph(name: string): IGraphProto {
    return { name, node: this.nodes, initializer: this.initializers, input: this.inputs, output: this.outputs };
  }

  #fresh(base: string): string {
    return `${base}_${this.#counter.n++}`;
  }
}

/** Encode a model (opset 17, IR 8) to protobuf bytes. */
export function encodeModel(graph: IGraphProto, docString: string): Uint8Array {
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'mt-serve make-demo-model',
    producerVersion: '1',
    docString,
    opsetImport: [{ domain: '', version: 17 }],
    graph,
  });
  return onnx.ModelProto.encode(model).finish();
}
