/**
 * @module engine/model-files — which files of a model folder an engine loads: the weight type (`MODEL_DTYPE`, or
 * `auto`'s preference per device) and the decoder graph (merged with a cache, or the plain one).
 */
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { ServeError } from '../../common/errors.js';

export type DecoderKind =
  /** `decoder_model_merged.onnx`: KV cache, `use_cache_branch` */
  | 'merged'
  /** `decoder_model.onnx`: no cache, every step recomputes the whole prefix */
  | 'no-cache';

/** Weight types a model folder can hold, each in its own files (the published export's names). */
export type ModelDtype = 'fp32' | 'q8' | 'q8-rows' | 'fp16';
/** What MODEL_DTYPE asks for: a dtype, or `auto` (see `AUTO_DTYPES`). */
export type DtypeRequest = ModelDtype | 'auto';
export const DTYPE_REQUESTS: readonly DtypeRequest[] = ['auto', 'fp32', 'q8', 'q8-rows', 'fp16'];

/**
 * File name suffix of each dtype: `onnx/encoder_model{suffix}.onnx`, `onnx/decoder_model_merged{suffix}.onnx`.
 * `q8` is transformers.js' `_quantized` (dynamic int8, activations per tensor); `q8-rows` is ours (quantize.ts:
 * activations per row, so a row's answer does not depend on its batch).
 */
export const DTYPE_SUFFIX: Readonly<Record<ModelDtype, string>> = {
  fp32: '',
  q8: '_quantized',
  'q8-rows': '_quantized_rows',
  fp16: '_fp16',
};

/**
 * `auto`'s preference per device, first present wins. CPU: int8 (onnxruntime's int8 GEMM is several times its
 * float32 MatMul on this kind of CPU; README "Choosing a dtype" has the measurements and the rule that orders
 * q8-rows and q8); never fp16, which the CPU provider runs no faster than fp32. CUDA: fp16 (tensor cores, half
 * the memory); int8 there would run MatMulInteger, which the CUDA provider does not accelerate. WebGPU: fp32 (its
 * fp16 MatMul is within 1e-2 of fp32, not within 2e-6, and was no faster at the decoder's shapes on an H200:
 * ../shared/gpu-kit/README.md); never int8, which it has no kernels for.
 */
export const AUTO_DTYPES: Readonly<Record<'cpu' | 'cuda' | 'webgpu', readonly ModelDtype[]>> = {
  cpu: ['q8-rows', 'q8', 'fp32'],
  cuda: ['fp16', 'fp32'],
  webgpu: ['fp32', 'fp16'],
};

/** The dtype a graph file holds, from its name (`decoder_model_merged_quantized.onnx` → `q8`). */
export function dtypeOfFile(file: string): ModelDtype {
  const stem = path.basename(file, '.onnx');
  const byLongest = (Object.entries(DTYPE_SUFFIX) as [ModelDtype, string][]).sort((a, b) => b[1].length - a[1].length);
  return byLongest.find(([, suffix]) => suffix !== '' && stem.endsWith(suffix))?.[0] ?? 'fp32';
}

/** The dtype an engine loaded, what was asked for, and why that one (for logs and describe output). */
export interface DtypeChoice {
  dtype: ModelDtype;
  requested: DtypeRequest;
  reason: string;
}

/** The decoder graph to use: the merged one unless told otherwise or absent. */
export function chooseDecoder(
  modelDir: string,
  wanted: 'auto' | 'no-cache',
  suffix: string,
): { file: string; kind: DecoderKind } {
  const merged = path.join('onnx', `decoder_model_merged${suffix}.onnx`);
  const plain = path.join('onnx', `decoder_model${suffix}.onnx`);
  if (wanted === 'auto' && existsSync(path.join(modelDir, merged))) return { file: merged, kind: 'merged' };
  if (existsSync(path.join(modelDir, plain))) return { file: plain, kind: 'no-cache' };
  // No decoder_model.onnx: the merged graph without its cache branch is the same full recompute.
  if (existsSync(path.join(modelDir, merged))) return { file: merged, kind: 'no-cache' };
  throw new ServeError(
    'WORKER_START_FAILED',
    `No decoder in ${modelDir}/onnx (${path.basename(merged)} or ${path.basename(plain)}).`,
  );
}

/** The files of `dtype` missing from `modelDir` (an encoder, and a merged or plain decoder). */
function missingFiles(modelDir: string, dtype: ModelDtype): string[] {
  const suffix = DTYPE_SUFFIX[dtype];
  const has = (name: string) => existsSync(path.join(modelDir, 'onnx', `${name}${suffix}.onnx`));
  const missing: string[] = [];
  if (!has('encoder_model')) missing.push(`onnx/encoder_model${suffix}.onnx`);
  if (!has('decoder_model_merged') && !has('decoder_model')) missing.push(`onnx/decoder_model_merged${suffix}.onnx`);
  return missing;
}

/**
 * The dtype to load on `device`: the one asked for if its files are there, or for `auto` the first of
 * `AUTO_DTYPES[device]` present. @throws ServeError WORKER_START_FAILED naming the missing files and how to make them
 */
export function chooseDtype(modelDir: string, requested: DtypeRequest, device: 'cpu' | 'cuda' | 'webgpu'): DtypeChoice {
  if (requested !== 'auto') {
    const missing = missingFiles(modelDir, requested);
    if (missing.length > 0) {
      const how =
        requested === 'q8' || requested === 'q8-rows'
          ? `; write them with \`node dist/model-server/cli.js quantize --model-dir ${modelDir}${requested === 'q8-rows' ? ' --dtype q8-rows' : ''}\``
          : requested === 'fp16'
            ? '; download them with DTYPE=fp16 scripts/download-model.sh'
            : '';
      throw new ServeError(
        'WORKER_START_FAILED',
        `MODEL_DTYPE=${requested}: ${modelDir} has no ${missing.join(' or ')}${how}.`,
      );
    }
    return { dtype: requested, requested, reason: `MODEL_DTYPE=${requested}` };
  }
  for (const dtype of AUTO_DTYPES[device]) {
    if (missingFiles(modelDir, dtype).length === 0) {
      const skipped = AUTO_DTYPES[device].slice(0, AUTO_DTYPES[device].indexOf(dtype));
      const absent = skipped.length > 0 ? ` (no ${skipped.join(', ')} files)` : '';
      const name = device === 'webgpu' ? 'WebGPU' : device.toUpperCase();
      return { dtype, requested, reason: `auto on ${name}: ${dtype}${absent}` };
    }
  }
  throw new ServeError('WORKER_START_FAILED', `Missing ${path.join(modelDir, 'onnx', 'encoder_model.onnx')}.`);
}

/**
 * Bytes of the weights an engine loaded from `modelDir`: its encoder and decoder graph files (paths relative to the
 * folder), each with the external data file the Hugging Face export writes beside a graph past 2 GB
 * (`decoder_model_merged.onnx_data`). What a model costs on disk per copy, before any rewrite or device transfer.
 */
export function weightsBytes(modelDir: string, files: readonly string[]): number {
  let bytes = 0;
  for (const file of files) {
    for (const name of [file, `${file}_data`]) {
      const full = path.join(modelDir, name);
      if (existsSync(full)) bytes += statSync(full).size;
    }
  }
  return bytes;
}
