/**
 * @module engine/session — the onnxruntime-node sessions of one engine: an encoder and a decoder on one
 * device, shared by every language the engine serves.
 *
 * Device policy: CUDA (`deviceId` N) when asked for; if the CUDA provider or the GPU is missing the
 * sessions are created on the CPU and `DeviceInfo.fallbackReason` says why — never silently.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo, DeviceRequest } from '../protocol.js';
import { exposeCacheAppends, exposeGreedyTop2 } from './decoder-graph.js';
import { joinModel, splitModel } from './onnx-wire.js';

/** Which decoder graph drives generation. */
export type DecoderKind =
  /** `decoder_model_merged.onnx`: KV cache, `use_cache_branch` */
  | 'merged'
  /** `decoder_model.onnx`: no cache, every step recomputes the whole prefix */
  | 'no-cache';

export interface SessionOptions {
  modelDir: string;
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
}

/** What the step loop fetches from the decoder, beyond `present.*.encoder` on the first step. */
export interface DecoderOutputs {
  /** Outputs of the appended self-attention entries in cache order (layer i key, value, …); null: `present.*.decoder`. */
  appendedCache: string[] | null;
  /** Top-2 outputs for all-greedy steps; null: `logits`. */
  greedyTop2: { values: string; ids: string } | null;
  /** Why a rewrite was not made (empty when all were). */
  notes: string[];
}

export interface EngineSessions {
  encoder: ort.InferenceSession;
  decoder: ort.InferenceSession;
  decoderKind: DecoderKind;
  /** The decoder file that was loaded (relative to the model folder). */
  decoderFile: string;
  /** Input names the decoder declares (optional ones such as `encoder_attention_mask` are fed only if here). */
  decoderInputs: ReadonlySet<string>;
  decoderOutputs: DecoderOutputs;
  device: DeviceInfo;
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
function chooseDecoder(modelDir: string, wanted: 'auto' | 'no-cache'): { file: string; kind: DecoderKind } {
  const merged = path.join('onnx', 'decoder_model_merged.onnx');
  const plain = path.join('onnx', 'decoder_model.onnx');
  if (wanted === 'auto' && existsSync(path.join(modelDir, merged))) return { file: merged, kind: 'merged' };
  if (existsSync(path.join(modelDir, plain))) return { file: plain, kind: 'no-cache' };
  // No decoder_model.onnx: the merged graph without its cache branch is the same full recompute.
  if (existsSync(path.join(modelDir, merged))) return { file: merged, kind: 'no-cache' };
  throw new ServeError(
    'WORKER_START_FAILED',
    `No decoder in ${modelDir}/onnx (decoder_model_merged.onnx or decoder_model.onnx).`,
  );
}

/**
 * Create the encoder and decoder sessions.
 * @throws ServeError WORKER_START_FAILED when the files are missing or onnxruntime rejects them on the CPU.
 */
export async function loadSessions(options: SessionOptions): Promise<EngineSessions> {
  const { modelDir, device } = options;
  const encoderFile = path.join(modelDir, 'onnx', 'encoder_model.onnx');
  if (!existsSync(encoderFile)) throw new ServeError('WORKER_START_FAILED', `Missing ${encoderFile}.`);
  const decoder = chooseDecoder(modelDir, options.decoder ?? 'auto');
  const decoderFile = path.join(modelDir, decoder.file);
  const threads = Math.max(0, Math.floor(options.intraOpThreads));
  const rewritten =
    decoder.kind === 'merged' && (options.decoderGraph ?? 'rewritten') === 'rewritten'
      ? rewriteDecoder(decoderFile, modelShape(modelDir))
      : {
          bytes: null,
          outputs: asExported(decoder.kind === 'merged' ? 'asked for (as-exported)' : 'no-cache decoder'),
        };

  const create = async (provider: ort.InferenceSession.ExecutionProviderConfig) => {
    const encoder = await ort.InferenceSession.create(encoderFile, sessionOptions(threads, provider));
    try {
      const decoderOptions = sessionOptions(threads, provider);
      if (rewritten.bytes === null)
        return { encoder, decoder: await ort.InferenceSession.create(decoderFile, decoderOptions) };
      // From memory, external weights are found through this folder, not the graph file's.
      decoderOptions.extra = {
        session: { model_external_initializers_file_folder_path: path.dirname(decoderFile) },
      };
      return { encoder, decoder: await ort.InferenceSession.create(rewritten.bytes, decoderOptions) };
    } catch (err) {
      await encoder.release();
      throw err;
    }
  };

  let fallbackReason: string | undefined;
  if (device.kind === 'cuda') {
    try {
      const sessions = await create({ name: 'cuda', deviceId: device.id });
      return finish(sessions, decoder, rewritten.outputs, { kind: 'cuda', id: device.id, provider: 'cuda' });
    } catch (err) {
      fallbackReason = `CUDA device ${device.id} unavailable: ${(err as Error).message}`;
    }
  }
  try {
    const sessions = await create('cpu' as unknown as ort.InferenceSession.ExecutionProviderConfig);
    const info: DeviceInfo = { kind: 'cpu', id: null, provider: 'cpu' };
    if (fallbackReason !== undefined) info.fallbackReason = fallbackReason;
    return finish(sessions, decoder, rewritten.outputs, info);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `onnxruntime could not load ${modelDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function finish(
  sessions: { encoder: ort.InferenceSession; decoder: ort.InferenceSession },
  decoder: { file: string; kind: DecoderKind },
  decoderOutputs: DecoderOutputs,
  device: DeviceInfo,
): EngineSessions {
  return {
    ...sessions,
    decoderKind: decoder.kind,
    decoderFile: decoder.file,
    decoderInputs: new Set(sessions.decoder.inputNames),
    decoderOutputs,
    device,
  };
}

/**
 * The weights' type of an export's graph file, by the suffix Hugging Face's ONNX exports (and transformers.js) give
 * each variant: `decoder_model_merged_fp16.onnx` is fp16, `…_quantized.onnx` int8 (`q8`); no suffix is fp32, the
 * only variant this engine loads today.
 */
export function dtypeOfFile(file: string): string {
  const suffix = /_(fp16|int8|uint8|quantized|q4f16|q4|bnb4)\.onnx$/.exec(path.basename(file))?.[1];
  if (suffix === undefined) return 'fp32';
  return suffix === 'quantized' ? 'int8' : suffix;
}

function asExported(reason: string): DecoderOutputs {
  return { appendedCache: null, greedyTop2: null, notes: [`decoder graph not rewritten: ${reason}`] };
}

/** `decoder_layers` and `vocab_size` from config.json (validated again, with the rest, by model-config.ts). */
function modelShape(modelDir: string): { layers: number; vocab: number } {
  const config = JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>;
  const positive = (key: string) => {
    const value = config[key];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1) {
      throw new ServeError('WORKER_START_FAILED', `${modelDir}/config.json: ${key} must be a positive integer.`);
    }
    return value;
  };
  return { layers: positive('decoder_layers'), vocab: positive('vocab_size') };
}

/**
 * The merged decoder with the extra outputs of decoder-graph.ts, as bytes (null: load the file as is), and
 * what it offers. Only the graph's nodes and outputs are decoded and re-encoded (onnx-wire.ts): inline weights
 * are copied through as bytes, external ones stay in their data file, so a published export with 1.3 GB of
 * inline weights takes the fast path like any other. Editing in memory at each load, rather than preparing an
 * edited copy once, needs no write access to the model folder and no copy that could go stale beside it; it
 * costs one transient copy of the file while the session is created.
 */
function rewriteDecoder(
  file: string,
  shape: { layers: number; vocab: number },
): { bytes: Uint8Array | null; outputs: DecoderOutputs } {
  const { model, weights } = splitModel(readFileSync(file));
  const outputs: DecoderOutputs = { appendedCache: null, greedyTop2: null, notes: [] };
  const appended = exposeCacheAppends(model, shape.layers);
  if (appended.ok) outputs.appendedCache = appended.outputs;
  else outputs.notes.push(`whole present cache fetched: ${appended.reason}`);
  const top2 = exposeGreedyTop2(model, shape.vocab);
  if (top2.ok) outputs.greedyTop2 = { values: top2.values, ids: top2.ids };
  else outputs.notes.push(`greedy steps fetch logits: ${top2.reason}`);
  const changed = outputs.appendedCache !== null || outputs.greedyTop2 !== null;
  return { bytes: changed ? joinModel(model, weights) : null, outputs };
}
