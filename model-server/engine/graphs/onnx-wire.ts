/**
 * @module engine/onnx-wire — protobuf wire-level access to an ONNX model's bytes, so a graph can be edited
 * without decoding (or re-encoding) its weights.
 *
 * An ONNX file is one `ModelProto`; its weights are the `initializer` entries (field 5) of the top-level
 * `GraphProto` (field 7). Protobuf lets repeated fields appear in any order and concatenates them, so a graph's
 * bytes are its other fields followed by its initializer entries copied verbatim: only the small part (nodes,
 * inputs, outputs) is decoded into objects. That works the same for weights inline (a published export: a
 * 1.3 GB decoder) and in external data files (only their locations are in the graph).
 */
import onnxProto from 'onnx-proto';

type IModelProto = onnxProto.onnx.IModelProto;

/** TensorProto's element types (`ElemType.FLOAT` is 1, …), for the engine's graphs and the offline tools alike. */
export const ElemType = onnxProto.onnx.TensorProto.DataType;
export const { FLOAT, INT32, INT64, FLOAT16 } = ElemType;
/** AttributeProto's types (`ATTR.INT`, `ATTR.INTS`, …). */
export const ATTR = onnxProto.onnx.AttributeProto.AttributeType;

/** A dimension: a number, or a symbolic name (`batch_size`). */
export type Dim = number | string;

/** A graph input or output: a tensor of ONNX element type `elemType` (1 float, 7 int64, …) and shape `dims`. */
export function valueInfo(name: string, elemType: number, dims: Dim[]): onnxProto.onnx.IValueInfoProto {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

const WIRE_VARINT = 0;
const WIRE_FIXED64 = 1;
const WIRE_BYTES = 2;
const WIRE_FIXED32 = 5;

/** ModelProto.graph, GraphProto.initializer, GraphProto.sparse_initializer. */
const MODEL_GRAPH = 7;
const GRAPH_INITIALIZER = 5;
const GRAPH_SPARSE_INITIALIZER = 15;

/** One field of a message: `start..end` is the whole entry (tag included); `value..end` its payload. */
export interface WireField {
  field: number;
  wire: number;
  start: number;
  value: number;
  end: number;
}

function readVarint(buf: Uint8Array, at: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = at; i < buf.length; i++) {
    const byte = buf[i]!;
    value += (byte & 0x7f) * scale;
    if (byte < 0x80) return { value, next: i + 1 };
    scale *= 128;
    if (scale > 2 ** 63) break;
  }
  throw new Error(`malformed protobuf varint at byte ${at}`);
}

/** Encode a non-negative integer (< 2^53) as a varint. */
export function varint(value: number): Uint8Array {
  const out: number[] = [];
  let v = value;
  while (v >= 0x80) {
    out.push((v % 128) | 0x80);
    v = Math.floor(v / 128);
  }
  out.push(v);
  return Uint8Array.from(out);
}

/** The fields of the message in `buf[start, end)`, in order. @throws Error on malformed bytes */
export function wireFields(buf: Uint8Array, start = 0, end = buf.length): WireField[] {
  const fields: WireField[] = [];
  let at = start;
  while (at < end) {
    const tag = readVarint(buf, at);
    const field = Math.floor(tag.value / 8);
    const wire = tag.value % 8;
    let value = tag.next;
    let next: number;
    switch (wire) {
      case WIRE_VARINT:
        next = readVarint(buf, value).next;
        break;
      case WIRE_FIXED64:
        next = value + 8;
        break;
      case WIRE_FIXED32:
        next = value + 4;
        break;
      case WIRE_BYTES: {
        const length = readVarint(buf, value);
        value = length.next;
        next = value + length.value;
        break;
      }
      default:
        throw new Error(`unsupported protobuf wire type ${wire} at byte ${at}`);
    }
    if (next > end) throw new Error(`protobuf field ${field} at byte ${at} runs past its message`);
    fields.push({ field, wire, start: at, value, end: next });
    at = next;
  }
  return fields;
}

/** A length-delimited field `field` holding `payload` (given as pieces, not joined). */
export function bytesField(field: number, payload: readonly Uint8Array[]): Uint8Array[] {
  const length = payload.reduce((sum, p) => sum + p.length, 0);
  return [varint(field * 8 + WIRE_BYTES), varint(length), ...payload];
}

/** A model split into its weights (kept as bytes) and the rest (decoded). */
export interface SplitModel {
  /** The model with every top-level initializer removed from its graph (nodes, inputs, outputs, subgraphs). */
  model: IModelProto;
  /** The top-level `initializer` / `sparse_initializer` entries, tag and length included, as slices of the file. */
  weights: Uint8Array[];
}

/**
 * Decode `bytes` without its top-level weights. Subgraphs (`If` branches) are decoded whole: exporters keep their
 * weights in the top-level graph, and protobufjs decodes bytes fields as views, so even a weight inside a branch
 * is not copied.
 */
export function splitModel(bytes: Uint8Array): SplitModel {
  const modelFields = wireFields(bytes);
  const graphs = modelFields.filter((f) => f.field === MODEL_GRAPH && f.wire === WIRE_BYTES);
  if (graphs.length !== 1) throw new Error(`expected one graph in the model, found ${graphs.length}`);
  const weights: Uint8Array[] = [];
  const rest: Uint8Array[] = [];
  for (const f of wireFields(bytes, graphs[0]!.value, graphs[0]!.end)) {
    const entry = bytes.subarray(f.start, f.end);
    if (f.field === GRAPH_INITIALIZER || f.field === GRAPH_SPARSE_INITIALIZER) weights.push(entry);
    else rest.push(entry);
  }
  const pieces = modelFields.flatMap((f) =>
    f.field === MODEL_GRAPH ? bytesField(MODEL_GRAPH, rest) : [bytes.subarray(f.start, f.end)],
  );
  return { model: onnxProto.onnx.ModelProto.decode(concat(pieces)), weights };
}

/**
 * Encode `model` (from `splitModel`, possibly edited, possibly with new small initializers) with `weights`
 * appended to its graph verbatim: the file onnxruntime loads, one copy of the weights.
 */
export function joinModel(model: IModelProto, weights: readonly Uint8Array[]): Uint8Array {
  const encoded = onnxProto.onnx.ModelProto.encode(model).finish();
  const pieces = wireFields(encoded).flatMap((f) =>
    f.field === MODEL_GRAPH
      ? bytesField(MODEL_GRAPH, [encoded.subarray(f.value, f.end), ...weights])
      : [encoded.subarray(f.start, f.end)],
  );
  return concat(pieces);
}

/** TensorProto.name; SparseTensorProto.values (the TensorProto that carries a sparse weight's name). */
const TENSOR_NAME = 8;
const SPARSE_VALUES = 1;

/** The name of a weight entry of `SplitModel.weights` (reads only the entry's small fields, not its data). */
export function weightName(entry: Uint8Array): string {
  const [outer] = wireFields(entry);
  if (outer === undefined || outer.wire !== WIRE_BYTES) throw new Error('malformed weight entry');
  let fields = wireFields(entry, outer.value, outer.end);
  if (outer.field === GRAPH_SPARSE_INITIALIZER) {
    const values = fields.find((f) => f.field === SPARSE_VALUES && f.wire === WIRE_BYTES);
    fields = values ? wireFields(entry, values.value, values.end) : [];
  }
  const name = fields.find((f) => f.field === TENSOR_NAME && f.wire === WIRE_BYTES);
  return name ? new TextDecoder().decode(entry.subarray(name.value, name.end)) : '';
}

/**
 * A dense weight entry of `SplitModel.weights` under another name: its other fields (the data among them) are copied
 * as they are. @throws Error for a sparse or malformed entry
 */
export function renamedWeight(entry: Uint8Array, name: string): Uint8Array {
  const [outer] = wireFields(entry);
  if (outer === undefined || outer.field !== GRAPH_INITIALIZER || outer.wire !== WIRE_BYTES)
    throw new Error('only a dense weight entry can be renamed');
  const kept = wireFields(entry, outer.value, outer.end)
    .filter((f) => !(f.field === TENSOR_NAME && f.wire === WIRE_BYTES))
    .map((f) => entry.subarray(f.start, f.end));
  return concat(bytesField(GRAPH_INITIALIZER, [...kept, ...bytesField(TENSOR_NAME, [new TextEncoder().encode(name)])]));
}

/** TensorProto.raw_data, .external_data, .data_location; StringStringEntryProto.key, .value. */
const TENSOR_RAW_DATA = 9;
const TENSOR_EXTERNAL_DATA = 13;
const TENSOR_DATA_LOCATION = 14;
const ENTRY_KEY = 1;
const ENTRY_VALUE = 2;
const LOCATION_EXTERNAL = 1;

/**
 * A dense weight entry whose `raw_data` moves to an external data file: the entry (naming `location` at `offset`) and
 * the bytes to write there; null when it has no raw data (already external, or typed fields: left as they are).
 */
export function externalizedWeight(
  entry: Uint8Array,
  location: string,
  offset: number,
): { entry: Uint8Array; data: Uint8Array } | null {
  const [outer] = wireFields(entry);
  if (outer === undefined || outer.field !== GRAPH_INITIALIZER || outer.wire !== WIRE_BYTES) return null;
  const fields = wireFields(entry, outer.value, outer.end);
  const raw = fields.find((f) => f.field === TENSOR_RAW_DATA && f.wire === WIRE_BYTES);
  if (raw === undefined) return null;
  const text = (value: string) => new TextEncoder().encode(value);
  const pair = (key: string, value: string) =>
    concat(
      bytesField(TENSOR_EXTERNAL_DATA, [
        ...bytesField(ENTRY_KEY, [text(key)]),
        ...bytesField(ENTRY_VALUE, [text(value)]),
      ]),
    );
  const data = entry.subarray(raw.value, raw.end);
  const kept = fields.filter((f) => f !== raw).map((f) => entry.subarray(f.start, f.end));
  const moved = concat(
    bytesField(GRAPH_INITIALIZER, [
      ...kept,
      pair('location', location),
      pair('offset', String(offset)),
      pair('length', String(data.length)),
      varint(TENSOR_DATA_LOCATION * 8 + WIRE_VARINT),
      varint(LOCATION_EXTERNAL),
    ]),
  );
  return { entry: moved, data };
}

export function concat(pieces: readonly Uint8Array[]): Uint8Array {
  const out = new Uint8Array(pieces.reduce((sum, p) => sum + p.length, 0));
  let at = 0;
  for (const p of pieces) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** The float32 weights of at most `maxValues` values (scales, epsilons), decoded by name; larger ones are skipped unread. */
export function smallFloatWeights(weights: readonly Uint8Array[], maxValues = 16): Map<string, Float32Array> {
  const out = new Map<string, Float32Array>();
  for (const entry of weights) {
    const [outer] = wireFields(entry);
    if (outer === undefined || outer.field !== GRAPH_INITIALIZER || outer.end - outer.value > 64 + 4 * maxValues)
      continue;
    const tensor = onnxProto.onnx.TensorProto.decode(entry.subarray(outer.value, outer.end));
    const count = (tensor.dims ?? []).reduce((a: number, b) => a * Number(b), 1);
    if (tensor.dataType !== 1 || count > maxValues || !tensor.name) continue;
    if (tensor.floatData && tensor.floatData.length === count)
      out.set(tensor.name, Float32Array.from(tensor.floatData));
    else if (tensor.rawData && tensor.rawData.length === 4 * count)
      out.set(tensor.name, new Float32Array(Uint8Array.from(tensor.rawData).buffer));
  }
  return out;
}

/** TensorProto.dims. */
const TENSOR_DIMS = 1;

/** The dims of each dense weight of `SplitModel.weights`, by name (reads only the entries' small fields). */
export function weightDims(weights: readonly Uint8Array[]): Map<string, number[]> {
  const out = new Map<string, number[]>();
  for (const entry of weights) {
    const [outer] = wireFields(entry);
    if (outer === undefined || outer.field !== GRAPH_INITIALIZER || outer.wire !== WIRE_BYTES) continue;
    const dims: number[] = [];
    for (const f of wireFields(entry, outer.value, outer.end)) {
      if (f.field !== TENSOR_DIMS) continue;
      if (f.wire === WIRE_VARINT) dims.push(readVarint(entry, f.value).value);
      // Packed: the varints back to back.
      else if (f.wire === WIRE_BYTES)
        for (let at = f.value; at < f.end;) {
          const v = readVarint(entry, at);
          dims.push(v.value);
          at = v.next;
        }
    }
    const name = weightName(entry);
    if (name !== '') out.set(name, dims);
  }
  return out;
}
