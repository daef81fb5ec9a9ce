/**
 * @module engine/session — the onnxruntime-node sessions of one engine: an encoder and a decoder on one
 * device, shared by every language the engine serves.
 *
 * Device policy: CUDA (`deviceId` N) when asked for; if the CUDA provider or the GPU is missing the
 * sessions are created on the CPU and `DeviceInfo.fallbackReason` says why — never silently.
 */
import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo, DeviceRequest } from '../protocol.js';
import { exposeCacheAppends } from './decoder-graph.js';

/**
 * Largest decoder .onnx file rewritten in memory (decoder-graph.ts). Exports with external weights are a
 * few hundred KB; a graph with its weights inline would be decoded, copied and handed over in memory.
 */
const MAX_REWRITTEN_GRAPH_BYTES = 256 * 2 ** 20;

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
   * What a cached step fetches of the self-attention cache. `appended` (default): only the entries the step
   * appends, when the graph can be given such outputs (decoder-graph.ts), else the whole cache as
   * `present`. `present`: always the whole cache (the export as is; tests compare the two).
   */
  cacheFetch?: 'appended' | 'present';
}

/** How the step loop gets the self-attention cache of a step (see SessionOptions.cacheFetch). */
export type CacheFetch =
  /** Outputs of the appended entries, in cache order (layer i key, layer i value, …). */
  | { kind: 'appended'; outputs: string[] }
  /** The `present.*.decoder` outputs; `reason` says why not `appended`. */
  | { kind: 'present'; reason: string };

export interface EngineSessions {
  encoder: ort.InferenceSession;
  decoder: ort.InferenceSession;
  decoderKind: DecoderKind;
  /** The decoder file that was loaded (relative to the model folder). */
  decoderFile: string;
  /** Input names the decoder declares (optional ones such as `encoder_attention_mask` are fed only if here). */
  decoderInputs: ReadonlySet<string>;
  cacheFetch: CacheFetch;
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
    decoder.kind === 'merged'
      ? rewriteDecoder(decoderFile, options.cacheFetch ?? 'appended', layersOf(modelDir))
      : { bytes: null, cacheFetch: { kind: 'present', reason: 'no KV cache (no-cache decoder)' } as CacheFetch };

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
      return finish(sessions, decoder, rewritten.cacheFetch, { kind: 'cuda', id: device.id, provider: 'cuda' });
    } catch (err) {
      fallbackReason = `CUDA device ${device.id} unavailable: ${(err as Error).message}`;
    }
  }
  try {
    const sessions = await create('cpu' as unknown as ort.InferenceSession.ExecutionProviderConfig);
    const info: DeviceInfo = { kind: 'cpu', id: null, provider: 'cpu' };
    if (fallbackReason !== undefined) info.fallbackReason = fallbackReason;
    return finish(sessions, decoder, rewritten.cacheFetch, info);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `onnxruntime could not load ${modelDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

function finish(
  sessions: { encoder: ort.InferenceSession; decoder: ort.InferenceSession },
  decoder: { file: string; kind: DecoderKind },
  cacheFetch: CacheFetch,
  device: DeviceInfo,
): EngineSessions {
  return {
    ...sessions,
    decoderKind: decoder.kind,
    decoderFile: decoder.file,
    decoderInputs: new Set(sessions.decoder.inputNames),
    cacheFetch,
    device,
  };
}

/** `decoder_layers` from config.json (validated again, with the rest, by model-config.ts). */
function layersOf(modelDir: string): number {
  const config = JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as { decoder_layers?: unknown };
  const layers = config.decoder_layers;
  if (typeof layers !== 'number' || !Number.isInteger(layers) || layers < 1) {
    throw new ServeError('WORKER_START_FAILED', `${modelDir}/config.json: decoder_layers must be a positive integer.`);
  }
  return layers;
}

/**
 * The merged decoder with appended-entries outputs (decoder-graph.ts) as bytes, or null bytes (load the
 * file as is) with the reason. The weights stay in their external data file either way.
 */
function rewriteDecoder(
  file: string,
  wanted: 'appended' | 'present',
  layers: number,
): { bytes: Uint8Array | null; cacheFetch: CacheFetch } {
  const keep = (reason: string) => ({ bytes: null, cacheFetch: { kind: 'present', reason } as CacheFetch });
  if (wanted === 'present') return keep('asked for (cacheFetch: present)');
  const size = statSync(file).size;
  if (size > MAX_REWRITTEN_GRAPH_BYTES) return keep(`${path.basename(file)} holds its weights inline (${size} bytes)`);
  const { onnx } = onnxProto;
  const model = onnx.ModelProto.decode(readFileSync(file));
  const exposed = exposeCacheAppends(model, layers);
  if (!exposed.ok) return keep(exposed.reason);
  return { bytes: onnx.ModelProto.encode(model).finish(), cacheFetch: { kind: 'appended', outputs: exposed.outputs } };
}
