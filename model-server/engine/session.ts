/**
 * @module engine/session — the onnxruntime-node sessions of one engine: an encoder and a decoder on one
 * device, shared by every language the engine serves.
 *
 * Device policy: CUDA (`deviceId` N) or WebGPU when asked for (the frontend's devices.ts decides which a GPU-pinned
 * model asks for); if that provider or its GPU is missing the sessions are created on the CPU and
 * `DeviceInfo.fallbackReason` says why — never silently. WebGPU sees the GPUs' Vulkan drivers only, or only the
 * software ones when the request says `software` (vulkan-drivers.ts). onnxruntime-node 1.30's WebGPU provider takes no adapter choice:
 * it uses Dawn's first high-performance adapter whatever the GPU id (docs/engine.md, "GPU devices").
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import type onnxProto from 'onnx-proto';
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo, DeviceRequest } from '../protocol.js';
import { beamHeadModel, greedyHeadModel } from './beam-head.js';
import { DeviceLayout } from './device-layout.js';
import { floatMaskInput, fuseDecoderGraph } from './decoder-fuse.js';
import { exposeBeamTopK, exposeCacheAppends, exposeGreedyTop2, logitsUnfit } from './decoder-graph.js';
import { splitCrossAttention } from './decoder-split.js';
import { type EngineSession, float32Boundary } from './float16.js';
import { joinModel, smallFloatWeights, splitModel, weightName } from './onnx-wire.js';
import { restrictVulkanDrivers, webgpuDrivers } from './vulkan-drivers.js';

/** Which decoder graph drives generation. */
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

export interface SessionOptions {
  modelDir: string;
  /** Weight type (default `auto`). @see DtypeRequest */
  dtype?: DtypeRequest;
  device: DeviceRequest;
  /** onnxruntime intra-op threads; 0 lets onnxruntime choose (all cores). */
  intraOpThreads: number;
  /**
   * `auto` (default): the merged decoder, or `decoder_model.onnx` when the folder has no merged one.
   * `no-cache`: full recompute every step (tests compare it with the cache).
   */
  decoder?: 'auto' | 'no-cache';
  /**
   * `rewritten` (default): the merged decoder gets extra outputs where its graph is recognised
   * (decoder-graph.ts: appended cache entries, greedy top-2); `as-exported`: the graph as is (tests
   * compare the two).
   */
  decoderGraph?: 'rewritten' | 'as-exported';
  /** Beam steps take their top candidates from the beam head (beam-head.ts); default: with a rewritten decoder. */
  beamHead?: boolean;
  /**
   * On WebGPU, keep the decoder's state on the device between steps (`gpu-buffer` outputs fed back; re-layouts by
   * device-layout.ts). Default true; taken only with a split decoder (decoder-split.ts) in float32.
   */
  deviceState?: boolean;
  /**
   * onnxruntime's per-node profile of every session, written as `{prefix}_{date}.json` files when the sessions are
   * released (bench/gpu/driver.ts counts kernels per decoder step from them). Off by default: it costs time.
   */
  profilePrefix?: string;
}

/** What the step loop fetches from the decoder, beyond `present.*.encoder` on the first step. */
export interface DecoderOutputs {
  /** Outputs of the appended self-attention entries in cache order (layer i key, value, …); null: `present.*.decoder`. */
  appendedCache: string[] | null;
  /** Top-2 outputs for all-greedy steps; null: `logits`. */
  greedyTop2: { values: string; ids: string } | null;
  /**
   * The beam head is in the decoder graph (decoder-graph.ts `BEAM_TOPK`: every run feeds its switch and k; beam steps
   * fetch its outputs instead of the logits); false: beam steps read the logits.
   */
  beamTopK: boolean;
  /** Why a rewrite was not made (empty when all were). */
  notes: string[];
}

export interface EngineSessions {
  /** Float32 at their boundary whatever the graph's float type (float16.ts). */
  encoder: EngineSession;
  decoder: EngineSession;
  /**
   * The cross-attention graph (decoder-split.ts): makes `present.*.encoder.*` from the encoder's states, and
   * `decoder` is then the merged graph's cache branch alone. Null: `decoder`'s first step makes that cache.
   */
  cross: EngineSession | null;
  /** beam-head.ts on the decoder's device; null: beam steps scan the logits on the host. */
  beamHead: EngineSession | null;
  /** beam-head.ts' greedy head (k = 2 from reductions), on the device-state path only; else null. */
  greedyHead: EngineSession | null;
  /**
   * Non-null when the decoder's state stays on the device (WebGPU): the cross graph's outputs and the decoder's
   * `present.*.decoder` and `logits` are `gpu-buffer` tensors, and these sessions re-lay them when rows change.
   */
  layout: DeviceLayout | null;
  decoderKind: DecoderKind;
  /** The decoder file that was loaded (relative to the model folder). */
  decoderFile: string;
  /** Input names the decoder declares (optional ones such as `encoder_attention_mask` are fed only if here). */
  decoderInputs: ReadonlySet<string>;
  decoderOutputs: DecoderOutputs;
  device: DeviceInfo;
  dtype: DtypeChoice;
}

function sessionOptions(
  threads: number,
  provider: ort.InferenceSession.ExecutionProviderConfig,
): ort.InferenceSession.SessionOptions {
  return {
    executionProviders: [provider],
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
    intraOpNumThreads: threads,
    // One engine runs one step at a time: inter-op parallelism would only fight intra-op threads.
    interOpNumThreads: 1,
    enableCpuMemArena: true,
    enableMemPattern: true,
    logSeverityLevel: 3,
  };
}

/** The decoder graph to use: the merged one unless told otherwise or absent. */
function chooseDecoder(
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
 * Create the encoder and decoder sessions.
 * @throws ServeError WORKER_START_FAILED when the files are missing or onnxruntime rejects them on the CPU.
 */
export async function loadSessions(options: SessionOptions): Promise<EngineSessions> {
  const { modelDir, device, profilePrefix } = options;
  const threads = Math.max(0, Math.floor(options.intraOpThreads));
  const prepared = new Map<ModelDtype, ReturnType<typeof prepare>>();
  const prepare = (dtype: ModelDtype) => {
    const suffix = DTYPE_SUFFIX[dtype];
    const encoderFile = path.join(modelDir, 'onnx', `encoder_model${suffix}.onnx`);
    const decoder = chooseDecoder(modelDir, options.decoder ?? 'auto', suffix);
    const decoderFile = path.join(modelDir, decoder.file);
    const editable = decoder.kind === 'merged' && (options.decoderGraph ?? 'rewritten') === 'rewritten';
    let hostGraphs: ReturnType<typeof rewriteDecoder> | undefined;
    // Each path's graphs are made when a device first asks for them (each is a pass over the weights).
    const rewritten = () =>
      (hostGraphs ??= editable
        ? rewriteDecoder(decoderFile, modelShape(modelDir))
        : {
            bytes: null,
            cross: null,
            outputs: asExported(decoder.kind === 'merged' ? 'asked for (as-exported)' : 'no-cache decoder'),
          });
    let onDevice: ReturnType<typeof deviceGraphs> | undefined;
    const forDevice = () =>
      (onDevice ??= editable ? deviceGraphs(encoderFile, decoderFile, modelShape(modelDir)) : null);
    return { encoderFile, decoder, decoderFile, rewritten, forDevice };
  };
  const filesFor = (dtype: ModelDtype) => {
    let files = prepared.get(dtype);
    if (files === undefined) prepared.set(dtype, (files = prepare(dtype)));
    return files;
  };

  const wantsBeamHead = options.beamHead ?? (options.decoderGraph ?? 'rewritten') === 'rewritten';
  const create = async (
    files: ReturnType<typeof prepare>,
    provider: ort.InferenceSession.ExecutionProviderConfig,
    deviceState = false,
  ) => {
    const created: ort.InferenceSession[] = [];
    let layout: DeviceLayout | null = null;
    // The device-state path needs the cross-attention graph apart, and the heads to read the logits (exactly
    // vocab_size wide).
    const device = deviceState && wantsBeamHead ? files.forDevice() : null;
    const onDevice = device !== null;
    const open = async (
      source: string | Uint8Array,
      outputs?: ort.InferenceSession.SessionOptions['preferredOutputLocation'],
    ) => {
      const options = sessionOptions(threads, provider);
      if (profilePrefix !== undefined) {
        options.enableProfiling = true;
        options.profileFilePrefix = `${profilePrefix}-${created.length}`;
      }
      if (onDevice && outputs !== undefined) options.preferredOutputLocation = outputs;
      // From memory, external weights are found through this folder, not the graph file's.
      if (typeof source !== 'string')
        options.extra = { session: { model_external_initializers_file_folder_path: path.dirname(files.decoderFile) } };
      const session =
        typeof source === 'string'
          ? await ort.InferenceSession.create(source, options)
          : await ort.InferenceSession.create(source, options);
      created.push(session);
      return session;
    };
    try {
      const encoder = await open(device?.encoder ?? files.encoderFile);
      // Every decoder output stays on the device and a step fetches them all (onnxruntime-node 1.30 mislays output
      // locations when a run fetches some only): the host reads a head's top-k of the logits, greedy steps included.
      const graphs = device ?? files.rewritten();
      const decoder = await open(graphs.bytes ?? files.decoderFile, 'gpu-buffer');
      const cross = graphs.cross === null ? null : await open(graphs.cross, 'gpu-buffer');
      const beamHead = wantsBeamHead ? await open(beamHeadModel()) : null;
      const greedyHead = device === null ? null : await open(greedyHeadModel(device.vocab, device.eosId));
      layout = onDevice ? await DeviceLayout.create(provider, { floatMask: device.floatMask }) : null;
      return { encoder, decoder, cross, beamHead, greedyHead, layout, outputs: graphs.outputs };
    } catch (err) {
      await layout?.release();
      for (const session of created) await session.release();
      throw err;
    }
  };

  let fallbackReason: string | undefined;
  if (device.kind === 'cuda') {
    const choice = chooseDtype(modelDir, options.dtype ?? 'auto', 'cuda');
    try {
      const files = filesFor(choice.dtype);
      const sessions = await create(files, { name: 'cuda', deviceId: device.id });
      const info: DeviceInfo = { kind: 'cuda', id: device.id, provider: 'cuda' };
      return finish(sessions, files.decoder, info, choice);
    } catch (err) {
      fallbackReason = `CUDA device ${device.id} unavailable: ${(err as Error).message}`;
    }
  }
  if (device.kind === 'webgpu') {
    const drivers = webgpuDrivers(device.software === true);
    if (!drivers.ok) {
      fallbackReason = `WebGPU on GPU ${device.id} unavailable: ${drivers.reason}`;
    } else {
      const choice = chooseDtype(modelDir, options.dtype ?? 'auto', 'webgpu');
      try {
        restrictVulkanDrivers(drivers.manifests);
        const files = filesFor(choice.dtype);
        const sessions = await create(
          files,
          // Dawn's validation of every GPU call costs host time per program; onnxruntime's kernels are what calls it.
          { name: 'webgpu', validationMode: 'disabled' } as ort.InferenceSession.ExecutionProviderConfig,
          choice.dtype !== 'fp16' && options.deviceState !== false,
        );
        const info: DeviceInfo = { kind: 'webgpu', id: device.id, provider: 'webgpu' };
        if (device.software === true) info.software = true;
        return finish(sessions, files.decoder, info, choice);
      } catch (err) {
        fallbackReason = `WebGPU on GPU ${device.id} unavailable: ${firstLine((err as Error).message)}`;
      }
    }
  }
  const choice = chooseDtype(modelDir, options.dtype ?? 'auto', 'cpu');
  const files = filesFor(choice.dtype);
  try {
    const sessions = await create(files, 'cpu' as unknown as ort.InferenceSession.ExecutionProviderConfig);
    const info: DeviceInfo = { kind: 'cpu', id: null, provider: 'cpu' };
    if (fallbackReason !== undefined) info.fallbackReason = fallbackReason;
    return finish(sessions, files.decoder, info, choice);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `onnxruntime could not load ${modelDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** onnxruntime's messages carry a source location first: `…/webgpu_context.cc:136 … Failed to get a WebGPU adapter`. */
function firstLine(message: string): string {
  const line = message.split('\n')[0] ?? message;
  const reason = /(Failed to [^\n]*|No supported adapters[^\n]*)$/.exec(line);
  return reason?.[1] ?? line;
}

function finish(
  sessions: {
    encoder: ort.InferenceSession;
    decoder: ort.InferenceSession;
    cross: ort.InferenceSession | null;
    beamHead: ort.InferenceSession | null;
    greedyHead: ort.InferenceSession | null;
    layout?: DeviceLayout | null;
    outputs: DecoderOutputs;
  },
  decoder: { file: string; kind: DecoderKind },
  device: DeviceInfo,
  dtype: DtypeChoice,
): EngineSessions {
  return {
    encoder: float32Boundary(sessions.encoder),
    decoder: float32Boundary(sessions.decoder),
    cross: sessions.cross === null ? null : float32Boundary(sessions.cross),
    beamHead: sessions.beamHead,
    greedyHead: sessions.greedyHead,
    layout: sessions.layout ?? null,
    decoderKind: decoder.kind,
    decoderFile: decoder.file,
    decoderInputs: new Set(sessions.decoder.inputNames),
    decoderOutputs: sessions.outputs,
    device,
    dtype,
  };
}

function asExported(reason: string): DecoderOutputs {
  return { appendedCache: null, greedyTop2: null, beamTopK: false, notes: [`decoder graph not rewritten: ${reason}`] };
}

interface ModelShape {
  layers: number;
  vocab: number;
  dModel: number;
  encoderHeads: number;
  decoderHeads: number;
  eosId: number;
}

/** `decoder_layers`, `vocab_size`, the attention heads and `</s>` from config.json (validated again, with the rest, by model-config.ts). */
const ENCODER_MASK = 'encoder_attention_mask';

function modelShape(modelDir: string): ModelShape {
  const config = JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const positive = (key: string) => {
    const value = config[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw new ServeError('WORKER_START_FAILED', `${modelDir}/config.json: ${key} must be a positive integer.`);
    }
    return value;
  };
  return {
    layers: positive('decoder_layers'),
    vocab: positive('vocab_size'),
    dModel: positive('d_model'),
    encoderHeads: positive('encoder_attention_heads'),
    decoderHeads: positive('decoder_attention_heads'),
    eosId: typeof config.eos_token_id === 'number' ? config.eos_token_id : 2,
  };
}

/**
 * The merged decoder prepared for the step loop, as bytes (null: load the file as is), and what it offers: split
 * into a step graph and a cross-attention graph where decoder-split.ts recognises it, then the extra outputs of
 * decoder-graph.ts. Only the graph's nodes and outputs are decoded and re-encoded (onnx-wire.ts): inline weights
 * are copied through as bytes, each graph taking only those it reads, and external ones stay in their data file,
 * so a published export with 1.3 GB of inline weights takes the fast path like any other. Editing in memory at
 * each load, rather than preparing an edited copy once, needs no write access to the model folder and no copy
 * that could go stale beside it; it costs one transient copy of the file while the sessions are created.
 */
function rewriteDecoder(
  file: string,
  shape: ModelShape,
): { bytes: Uint8Array | null; cross: Uint8Array | null; outputs: DecoderOutputs } {
  const { model, weights } = splitModel(readFileSync(file));
  const outputs: DecoderOutputs = { appendedCache: null, greedyTop2: null, beamTopK: false, notes: [] };
  const split = splitCrossAttention(model, shape.layers);
  if (!split.ok) outputs.notes.push(`cross-attention cache copied by every step: ${split.reason}`);
  const step = split.ok ? split.step.model : model;
  const appended = exposeCacheAppends(step, shape.layers);
  if (appended.ok) outputs.appendedCache = appended.outputs;
  else outputs.notes.push(`whole present cache fetched: ${appended.reason}`);
  const top2 = exposeGreedyTop2(step, shape.vocab);
  if (top2.ok) outputs.greedyTop2 = { values: top2.values, ids: top2.ids };
  else outputs.notes.push(`greedy steps fetch logits: ${top2.reason}`);
  const beam = exposeBeamTopK(step, shape.vocab);
  if (beam.ok) outputs.beamTopK = true;
  else outputs.notes.push(`beam steps fetch logits: ${beam.reason}`);
  if (!split.ok) {
    const changed = outputs.appendedCache !== null || outputs.greedyTop2 !== null || outputs.beamTopK;
    return { bytes: changed ? joinModel(model, weights) : null, cross: null, outputs };
  }
  const named = weights.map((entry) => ({ entry, name: weightName(entry) }));
  const read = (uses: ReadonlySet<string>) => named.filter((w) => uses.has(w.name)).map((w) => w.entry);
  return {
    bytes: joinModel(step, read(split.step.uses)),
    cross: joinModel(split.cross.model, read(split.cross.uses)),
    outputs,
  };
}

/**
 * The graphs of the device-state path (WebGPU), or null where the decoder cannot take it: the merged decoder split as
 * for `rewriteDecoder` but with no extra outputs (a step reads the logits through the heads and keeps its cache as
 * `present.*`), and the step graph and the encoder fused by decoder-fuse.ts (a third of the GPU programs per run).
 */
function deviceGraphs(
  encoderFile: string,
  decoderFile: string,
  shape: ModelShape,
): {
  encoder: Uint8Array;
  bytes: Uint8Array;
  cross: Uint8Array;
  /** The graphs read `encoder_attention_mask` as float (decoder-fuse.ts `floatMaskInput`). */
  floatMask: boolean;
  outputs: DecoderOutputs;
  vocab: number;
  eosId: number;
} | null {
  const { model, weights } = splitModel(readFileSync(decoderFile));
  const split = splitCrossAttention(model, shape.layers);
  if (!split.ok || logitsUnfit(split.step.model, shape.vocab) !== undefined) return null;
  const named = weights.map((entry) => ({ entry, name: weightName(entry) }));
  const read = (uses: ReadonlySet<string>) => named.filter((w) => uses.has(w.name)).map((w) => w.entry);
  const stepWeights = read(split.step.uses);
  const step = split.step.model;
  step.graph!.node = [...(step.graph!.node ?? [])];
  const fused = fuseDecoderGraph(step.graph!, shape.decoderHeads, smallFloatWeights(stepWeights, shape.dModel), {
    singleQuery: true,
  });
  const cross = split.cross.model;
  cross.graph!.node = [...(cross.graph!.node ?? [])];
  const reads = (g: onnxProto.onnx.IGraphProto) => (g.input ?? []).some((i) => i.name === ENCODER_MASK);
  // Both graphs read the mask as float, or neither changes (the layout uploads one mask for both).
  const floatMask =
    reads(step.graph!) &&
    (!reads(cross.graph!) || floatMaskInput(cross.graph!, ENCODER_MASK, true)) &&
    floatMaskInput(step.graph!, ENCODER_MASK) &&
    (!reads(cross.graph!) || floatMaskInput(cross.graph!, ENCODER_MASK));
  const encoder = splitModel(readFileSync(encoderFile));
  // Layer norms only: onnxruntime 1.30's WebGPU MultiHeadAttention gives wrong results from 32 queries on (checked
  // on lavapipe: 0.5 off at 32 positions, exact at 31), which an encoder reaches; a decoder step has one query.
  const encoderFused = fuseDecoderGraph(encoder.model.graph!, shape.encoderHeads, smallFloatWeights(encoder.weights), {
    attention: false,
  });
  const note = (what: string, r: typeof fused) =>
    `${what}: ${r.attention} attention blocks and ${r.skipLayerNorm} layer norms fused (${r.nodesBefore} → ${r.nodesAfter} nodes)`;
  return {
    encoder: joinModel(encoder.model, encoder.weights),
    bytes: joinModel(step, stepWeights),
    cross: joinModel(cross, read(split.cross.uses)),
    floatMask,
    outputs: {
      appendedCache: null,
      greedyTop2: null,
      beamTopK: false,
      notes: [`state on the device; ${note('decoder step', fused)}; ${note('encoder', encoderFused)}`],
    },
    vocab: shape.vocab,
    eosId: shape.eosId,
  };
}
