/**
 * @module tools/quantize — dynamic int8 quantization of an ONNX export, in Node (no Python): the graph
 * transformation onnxruntime's `quantize_dynamic` makes with the settings transformers.js publishes its `q8`
 * files with (IntegerOps mode, int8 symmetric weights per output channel with reduce_range, uint8 activations
 * quantized at run time, MatMul only when B is a constant, subgraphs included). The rewrite is quantize-graph.ts's
 * (what is quantized, the two activation modes); this file reads the model and writes its quantized files.
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
import { lstatSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { ElemType, joinModel, splitModel } from '../engine/graphs/onnx-wire.js';
import { elementCount, inlined, sourceWeights, WeightReader } from './onnx-weights.js';
import { quantizeGraph, valuesRead, type ActivationQuantization } from './quantize-graph.js';

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
  const bytes = readFileSync(source);
  const { model, weights } = splitModel(bytes);
  const graph = model.graph!;
  const outer = sourceWeights(weights);
  const reader = new WeightReader(path.dirname(source));
  const { added, quantized } = quantizeGraph(graph, outer, reader, {
    activations: options.activations ?? 'tensor',
    qmax: (options.reduceRange ?? true) ? 64 : 127,
  });
  // Keep only the source weights something still reads; inline the ones that were external.
  const used = valuesRead(graph);
  const kept: Uint8Array[] = [];
  for (const [name, w] of outer) {
    if (!used.has(name)) continue;
    if (w.proto.dataLocation === onnxProto.onnx.TensorProto.DataLocation.EXTERNAL) {
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
  const int8 = added.filter((t) => t.dataType === ElemType.INT8 && (t.dims?.length ?? 0) === 2);
  return {
    source,
    output,
    quantized,
    int8Weights: int8.length,
    int8Elements: int8.reduce((sum, t) => sum + elementCount(t.dims), 0),
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
