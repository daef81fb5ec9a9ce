/**
 * @module model-server/store/onnx-outputs — an ONNX graph output's declared shape, read at registration without
 * loading the file: the protobuf is walked by its field headers and every other field (the weights, most of a
 * published decoder's bytes) is skipped unread.
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';

/** ModelProto.graph, GraphProto.output; ValueInfoProto.name, .type; TypeProto.tensor_type; Tensor.shape; Shape.dim. */
const MODEL_GRAPH = 7;
const GRAPH_OUTPUT = 12;
const LONGEST_HEADER = 20;

interface Field {
  field: number;
  wire: number;
  /** The payload's bounds (a varint's own bytes for wire type 0). */
  start: number;
  end: number;
}

type Read = (at: number, length: number) => Uint8Array;

/**
 * The dimensions of graph output `name` in the ONNX file `file` (a number, or a symbolic dimension's name), or null
 * when the graph declares no such output.
 * @throws Error when the file cannot be read or is not a protobuf message
 */
export function outputDims(file: string, name: string): (number | string)[] | null {
  const fd = openSync(file, 'r');
  try {
    const read: Read = (at, length) => {
      const buf = Buffer.alloc(length);
      return buf.subarray(0, readSync(fd, buf, 0, length, at));
    };
    for (const graph of fields(read, 0, fstatSync(fd).size)) {
      if (graph.field !== MODEL_GRAPH || graph.wire !== 2) continue;
      for (const output of fields(read, graph.start, graph.end)) {
        if (output.field !== GRAPH_OUTPUT || output.wire !== 2) continue;
        const info = read(output.start, output.end - output.start);
        const dims = valueInfo(info, name);
        if (dims !== null) return dims;
      }
    }
    return null;
  } finally {
    closeSync(fd);
  }
}

/** A ValueInfoProto's tensor dimensions when it is named `name`. */
function valueInfo(buf: Uint8Array, name: string): (number | string)[] | null {
  const read: Read = (at, length) => buf.subarray(at, at + length);
  const text = (f: Field) => Buffer.from(buf.subarray(f.start, f.end)).toString('utf8');
  const inside = (f: Field, number: number) => [...fields(read, f.start, f.end)].filter((g) => g.field === number);
  const all = [...fields(read, 0, buf.length)];
  if (all.every((f) => f.field !== 1 || text(f) !== name)) return null;
  const shape = all
    .filter((f) => f.field === 2)
    .flatMap((type) => inside(type, 1))
    .flatMap((tensor) => inside(tensor, 2));
  return shape
    .flatMap((s) => inside(s, 1))
    .map((dim) => {
      const [value] = [...fields(read, dim.start, dim.end)];
      if (value?.field === 1 && value.wire === 0) return varint(buf, value.start, value.end).value;
      return value?.field === 2 ? text(value) : '?';
    });
}

/** The fields of the message at `[start, end)`, reading only their headers. */
function* fields(read: Read, start: number, end: number): Generator<Field> {
  for (let at = start; at < end;) {
    const header = read(at, Math.min(LONGEST_HEADER, end - at));
    const tag = varint(header, 0, header.length);
    const wire = tag.value % 8;
    let from = at + tag.next;
    let to: number;
    if (wire === 0) to = at + varint(header, tag.next, header.length).next;
    else if (wire === 1) to = from + 8;
    else if (wire === 5) to = from + 4;
    else if (wire === 2) {
      const length = varint(header, tag.next, header.length);
      from = at + length.next;
      to = from + length.value;
    } else throw new Error(`not a protobuf message (wire type ${wire} at byte ${at})`);
    if (to > end) throw new Error(`a protobuf field at byte ${at} runs past its message`);
    yield { field: Math.floor(tag.value / 8), wire, start: from, end: to };
    at = to;
  }
}

function varint(buf: Uint8Array, at: number, end: number): { value: number; next: number } {
  let value = 0;
  for (let i = at, scale = 1; i < end && scale < 2 ** 63; i++, scale *= 128) {
    value += (buf[i]! & 0x7f) * scale;
    if (buf[i]! < 0x80) return { value, next: i + 1 };
  }
  throw new Error(`malformed protobuf varint at byte ${at}`);
}
