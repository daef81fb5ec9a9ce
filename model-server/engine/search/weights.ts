/**
 * @module engine/search/weights — the search graph's weights: the encoder's and the decoder's in one outer graph
 * (a weight both files hold alike once, one whose name the other file uses for something else renamed), and, past
 * protobuf's 2 GB cap, moved to one data file in a scratch folder.
 */
import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { externalizedWeight, joinModel, renamedWeight, weightName, wireFields } from '../graphs/onnx-wire.js';

const INLINE_LIMIT = 1.8e9;
const SCRATCH_WEIGHTS = 'search_weights.bin';
const EXTERNAL_ABOVE = 1024;

export interface MergedWeights {
  /** The encoder's (some renamed), then the decoder's. */
  weights: Uint8Array[];
  /** Encoder weight names → the names they have in the merged graph, where they differ. */
  encoderNames: Map<string, string>;
  /** Every weight name in the merged graph. */
  names: ReadonlySet<string>;
}

/** The decoder's `decoderWeights` with the encoder's `encoderWeights`, no name used twice. */
export function mergeWeights(
  encoderWeights: readonly Uint8Array[],
  decoderWeights: readonly Uint8Array[],
): MergedWeights {
  const byName = new Map(decoderWeights.map((w) => [weightName(w), w]));
  const names = new Set(byName.keys());
  const encoderNames = new Map<string, string>();
  const merged: Uint8Array[] = [];
  for (const w of encoderWeights) {
    const name = weightName(w);
    const twin = byName.get(name);
    // The shared embedding is in both files under one name: loaded once.
    if (twin !== undefined && Buffer.from(twin.buffer, twin.byteOffset, twin.length).equals(w)) continue;
    if (!names.has(name)) {
      names.add(name);
      merged.push(w);
      continue;
    }
    let fresh = `encoder/${name}`;
    for (let i = 1; names.has(fresh); i++) fresh = `encoder${i}/${name}`;
    names.add(fresh);
    encoderNames.set(name, fresh);
    merged.push(renamedWeight(w, fresh));
  }
  return { weights: [...merged, ...decoderWeights], encoderNames, names };
}

export interface PackOptions {
  /** Where the weights go when inline they would pass `inlineLimit`. */
  scratchDir?: string;
  /** Inline weight bytes above which they are written to `scratchDir`; default 1.8 GB. */
  inlineLimit?: number;
}

/**
 * `model` with `weights`: inline, or past the limit in `scratchDir`; `weightsDir` is where onnxruntime reads the
 * external ones (`exportDir`, the export's own data files, when inline).
 * @throws Error past the limit without a scratch folder, or with weights in the export's data file too
 */
export function packWeights(
  model: onnxProto.onnx.IModelProto,
  weights: readonly Uint8Array[],
  exportDir: string,
  options: PackOptions,
): { bytes: Uint8Array; weightsDir: string } {
  const inline = weights.reduce((sum, w) => sum + w.length, 0);
  if (inline <= (options.inlineLimit ?? INLINE_LIMIT))
    return { bytes: joinModel(model, weights), weightsDir: exportDir };
  if (options.scratchDir === undefined)
    throw new Error(`${inline} bytes of weights inline, and no folder to move them to`);
  return { bytes: joinModel(model, externalize(weights, options.scratchDir)), weightsDir: options.scratchDir };
}

/** Every raw weight moved into one file of `dir`; fails where a weight already lives in the export's own data file. */
function externalize(weights: readonly Uint8Array[], dir: string): Uint8Array[] {
  mkdirSync(dir, { recursive: true });
  const fd = openSync(path.join(dir, SCRATCH_WEIGHTS), 'w');
  let offset = 0;
  try {
    return weights.map((w) => {
      // Small constants (axes, shapes) stay inline: shape inference reads them at load, and cannot from a data file.
      if (w.length < EXTERNAL_ABOVE) return w;
      const moved = externalizedWeight(w, SCRATCH_WEIGHTS, offset);
      if (moved === null) {
        if (isExternal(w)) throw new Error(`weight ${weightName(w)} is in the export's data file and others inline`);
        return w;
      }
      writeSync(fd, moved.data);
      offset += moved.data.length;
      return moved.entry;
    });
  } finally {
    closeSync(fd);
  }
}

function isExternal(entry: Uint8Array): boolean {
  const tensor = onnxProto.onnx.TensorProto.decode(entry.subarray(wireFields(entry)[0]!.value));
  return tensor.dataLocation === onnxProto.onnx.TensorProto.DataLocation.EXTERNAL;
}
