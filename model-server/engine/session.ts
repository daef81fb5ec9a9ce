/**
 * @module engine/session — the onnxruntime-node sessions of one engine: an encoder and a decoder on one
 * device, shared by every language the engine serves.
 *
 * Device policy: CUDA (`deviceId` N) when asked for; if the CUDA provider or the GPU is missing the
 * sessions are created on the CPU and `DeviceInfo.fallbackReason` says why — never silently.
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo, DeviceRequest } from '../protocol.js';

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
}

export interface EngineSessions {
  encoder: ort.InferenceSession;
  decoder: ort.InferenceSession;
  decoderKind: DecoderKind;
  /** The decoder file that was loaded (relative to the model folder). */
  decoderFile: string;
  /** Input names the decoder declares (optional ones such as `encoder_attention_mask` are fed only if here). */
  decoderInputs: ReadonlySet<string>;
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

  const create = async (provider: ort.InferenceSession.ExecutionProviderConfig) => {
    const encoder = await ort.InferenceSession.create(encoderFile, sessionOptions(threads, provider));
    try {
      return { encoder, decoder: await ort.InferenceSession.create(decoderFile, sessionOptions(threads, provider)) };
    } catch (err) {
      await encoder.release();
      throw err;
    }
  };

  let fallbackReason: string | undefined;
  if (device.kind === 'cuda') {
    try {
      const sessions = await create({ name: 'cuda', deviceId: device.id });
      return finish(sessions, decoder, { kind: 'cuda', id: device.id, provider: 'cuda' });
    } catch (err) {
      fallbackReason = `CUDA device ${device.id} unavailable: ${(err as Error).message}`;
    }
  }
  try {
    const sessions = await create('cpu' as unknown as ort.InferenceSession.ExecutionProviderConfig);
    const info: DeviceInfo = { kind: 'cpu', id: null, provider: 'cpu' };
    if (fallbackReason !== undefined) info.fallbackReason = fallbackReason;
    return finish(sessions, decoder, info);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `onnxruntime could not load ${modelDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function finish(
  sessions: { encoder: ort.InferenceSession; decoder: ort.InferenceSession },
  decoder: { file: string; kind: DecoderKind },
  device: DeviceInfo,
): EngineSessions {
  return {
    ...sessions,
    decoderKind: decoder.kind,
    decoderFile: decoder.file,
    decoderInputs: new Set(sessions.decoder.inputNames),
    device,
  };
}
