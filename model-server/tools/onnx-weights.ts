/**
 * @module tools/onnx-weights — the float weights of an ONNX file as the quantizer reads them: initializer entries
 * decoded from the file's bytes, values read inline or from external data files, which must stay inside the model
 * file's folder (symlinks followed).
 */
import { closeSync, existsSync, openSync, readSync, realpathSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';

type ITensorProto = onnxProto.onnx.ITensorProto;
const { onnx } = onnxProto;

/** A float weight of the source: where its values are. */
export interface SourceWeight {
  proto: ITensorProto;
  /** The initializer entry as in the file (kept verbatim when the weight is not replaced). */
  entry: Uint8Array | null;
}

/** Elements of a tensor of these dims. */
export function elementCount(dims: ITensorProto['dims']): number {
  return (dims ?? []).reduce<number>((a, b) => a * Number(b), 1);
}

/** The file's float weights by name, from its initializer entries (sparse initializers are left as they are). */
export function sourceWeights(entries: readonly Uint8Array[]): Map<string, SourceWeight> {
  const weights = new Map<string, SourceWeight>();
  for (const entry of entries) {
    // The entry is `tag, length, TensorProto`; sparse initializers are field 15.
    if (entry[0] !== 0x2a) continue;
    let at = 1;
    while (entry[at]! >= 0x80) at++;
    const proto = onnx.TensorProto.decode(entry.subarray(at + 1));
    weights.set(proto.name!, { proto, entry });
  }
  return weights;
}

/** The initializer with its external bytes read inline. */
export function inlined(proto: ITensorProto, reader: WeightReader): ITensorProto {
  return {
    ...proto,
    dataLocation: onnx.TensorProto.DataLocation.DEFAULT,
    externalData: [],
    rawData: reader.bytes(proto),
  };
}

/** Reads weight values inline or from external data files (relative to the model file's folder). */
export class WeightReader {
  readonly #dir: string;
  readonly #fds = new Map<string, number>();

  constructor(dir: string) {
    this.#dir = dir;
  }

  bytes(proto: ITensorProto): Uint8Array {
    if (proto.dataLocation !== onnx.TensorProto.DataLocation.EXTERNAL) {
      if (proto.rawData && proto.rawData.length > 0) return proto.rawData;
      return new Uint8Array(Float32Array.from(proto.floatData ?? []).buffer);
    }
    const info = Object.fromEntries((proto.externalData ?? []).map((e) => [e.key, e.value]));
    const location = info.location;
    if (!location) throw new Error(`weight ${proto.name}: external data without a location`);
    const length = info.length !== undefined ? Number(info.length) : elementCount(proto.dims) * 4;
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
    copy.set(raw); // raw may be a Buffer view into the file: copy it, aligned, into a buffer of its own
    return new Float32Array(copy.buffer);
  }

  close(): void {
    for (const fd of this.#fds.values()) closeSync(fd);
    this.#fds.clear();
  }
}
