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
import path from 'node:path';
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { ServeError } from '../../common/errors.js';
import type { DeviceInfo } from '../protocol.js';
import { beamHeadModel, DeviceHeads } from './beam-head.js';
import { DeviceLayout } from './device-layout.js';
import { type EngineOptions, intraOpThreadCount } from './engine-options.js';
import { type EngineSession, float32Boundary } from './float16.js';
import type { ModelConfig } from './model-config.js';
import {
  chooseDecoder,
  chooseDtype,
  type DecoderKind,
  DTYPE_SUFFIX,
  type DtypeChoice,
  type ModelDtype,
} from './model-files.js';
import {
  alignmentGraphs,
  asExported,
  type DecoderOutputs,
  deviceGraphs,
  rewriteDecoder,
} from './graphs/session-graphs.js';
import { restrictVulkanDrivers, webgpuDrivers } from './vulkan-drivers.js';

/** Which decoder graph drives generation. */
export type { DecoderOutputs } from './graphs/session-graphs.js';
export {
  AUTO_DTYPES,
  chooseDtype,
  type DecoderKind,
  DTYPE_REQUESTS,
  DTYPE_SUFFIX,
  type DtypeChoice,
  dtypeOfFile,
  type DtypeRequest,
  type ModelDtype,
} from './model-files.js';

/** One engine's sessions on the path chosen at load: the decoder's state on the host, or on the device (WebGPU). */
export type EngineSessions = HostSessions | DeviceSessions;

export interface HostSessions extends SessionsOfEitherPath {
  kind: 'host';
  /** decoder-split.ts' cross-attention graph (`decoder` is then the cache branch alone); null: the first step's. */
  cross: EngineSession | null;
  /** beam-head.ts; null: beam steps scan the logits on the host. */
  beamHead: EngineSession | null;
}

/**
 * The cross graph's outputs and the decoder's `present.*.decoder` and `logits` are `gpu-buffer` tensors, re-laid by
 * `layout` when rows change; a step reads its logits through one of `deviceHeads` (beam-head.ts, per k).
 */
export interface DeviceSessions extends SessionsOfEitherPath {
  kind: 'device';
  cross: EngineSession;
  deviceHeads: DeviceHeads;
  layout: DeviceLayout;
}

interface SessionsOfEitherPath {
  /** Float32 at their boundary whatever the graph's float type (float16.ts). */
  encoder: EngineSession;
  decoder: EngineSession;
  decoderKind: DecoderKind;
  /** The decoder file that was loaded (relative to the model folder). */
  decoderFile: string;
  /** Input names the decoder declares (optional ones such as `encoder_attention_mask` are fed only if here). */
  decoderInputs: ReadonlySet<string>;
  decoderOutputs: DecoderOutputs;
  /** The alignment pass's sessions, opened when a row first asks for an alignment (alignment.ts). */
  alignment: AlignmentOpener;
  device: DeviceInfo;
  dtype: DtypeChoice;
}

/**
 * What a teacher-forced alignment pass runs: the encoder (the engine's own on the host path) for rows that bring no
 * encoder states, and the decoder cut down to a layer's cross-attention, its cross-attention graph in front where the
 * decoder was split (graphs/session-graphs.ts `alignmentGraphs`). Their outputs are on the host whatever the device.
 */
export interface AlignmentSessions {
  encoder: EngineSession;
  step: EngineSession;
  /** The decoder layer whose cross-attention is read. */
  layer: number;
}

/** Opens the alignment sessions once (or says why there are none) and releases them with the engine. */
export interface AlignmentOpener {
  open(): Promise<AlignmentSessions | { reason: string }>;
  release(): Promise<void>;
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

/**
 * Create the encoder and decoder sessions (of the engine's options, those about its files and device); the graphs
 * prepared in memory take their shapes from `config` (model-config.ts, read once).
 * @throws ServeError WORKER_START_FAILED when the files are missing or onnxruntime rejects them on the CPU.
 */
export async function loadSessions(options: EngineOptions, config: ModelConfig): Promise<EngineSessions> {
  const { modelDir, device = { kind: 'cpu' }, profilePrefix } = options;
  const threads = intraOpThreadCount(options.intraOpThreads);
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
        ? rewriteDecoder(decoderFile, config)
        : {
            bytes: null,
            cross: null,
            outputs: asExported(decoder.kind === 'merged' ? 'asked for (as-exported)' : 'no-cache decoder'),
          });
    let onDevice: ReturnType<typeof deviceGraphs> | undefined;
    const forDevice = () => (onDevice ??= editable ? deviceGraphs(encoderFile, decoderFile, config) : null);
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
    choice: DtypeChoice,
    info: DeviceInfo,
    provider: ort.InferenceSession.ExecutionProviderConfig,
    deviceState = false,
  ): Promise<EngineSessions> => {
    const created: ort.InferenceSession[] = [];
    let layout: DeviceLayout | null = null;
    // The device-state path needs the cross-attention graph apart, and the heads to read the logits (exactly
    // vocab_size wide).
    const device = deviceState && wantsBeamHead ? files.forDevice() : null;
    const open = async (
      source: string | Uint8Array,
      outputs?: ort.InferenceSession.SessionOptions['preferredOutputLocation'],
    ) => {
      const options = sessionOptions(threads, provider);
      if (profilePrefix !== undefined) {
        options.enableProfiling = true;
        options.profileFilePrefix = `${profilePrefix}-${created.length}`;
      }
      if (device !== null && outputs !== undefined) options.preferredOutputLocation = outputs;
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
      // On the device path the encoder's states go straight to the cross graph (encode-device.ts).
      const encoder = await open(device?.encoder ?? files.encoderFile, 'gpu-buffer');
      // Every decoder output stays on the device and a step fetches them all (onnxruntime-node 1.30 mislays output
      // locations when a run fetches some only): the host reads a head's top-k of the logits, greedy steps included.
      const graphs = device ?? files.rewritten();
      const decoder = await open(graphs.bytes ?? files.decoderFile, 'gpu-buffer');
      const plain = (source: string | Uint8Array) => {
        const options = sessionOptions(threads, provider);
        // The pass runs beside the step loop: threads that spin waiting for work would take the loop's cores.
        options.extra = {
          session: {
            'session.intra_op.allow_spinning': '0',
            ...(typeof source === 'string'
              ? {}
              : { model_external_initializers_file_folder_path: path.dirname(files.decoderFile) }),
          },
        };
        return typeof source === 'string'
          ? ort.InferenceSession.create(source, options)
          : ort.InferenceSession.create(source, options);
      };
      const either = {
        encoder: float32Boundary(encoder),
        decoder: float32Boundary(decoder),
        // The device path's encoder leaves its states on the device: the pass has an encoder of its own there.
        alignment: alignmentOpener(
          () => alignmentGraphs(files.decoderFile, files.decoder.kind === 'merged', config),
          plain,
          device !== null ? files.encoderFile : float32Boundary(encoder),
        ),
        decoderKind: files.decoder.kind,
        decoderFile: files.decoder.file,
        decoderInputs: new Set(decoder.inputNames),
        decoderOutputs: graphs.outputs,
        device: info,
        dtype: choice,
      };
      if (device === null) {
        const cross = graphs.cross === null ? null : float32Boundary(await open(graphs.cross));
        const beamHead = wantsBeamHead ? await open(beamHeadModel()) : null;
        return { kind: 'host', ...either, cross, beamHead };
      }
      const cross = float32Boundary(await open(device.cross, 'gpu-buffer'));
      const deviceHeads = new DeviceHeads(open, config.vocabSize, config.eosTokenId);
      // Made now, so that a provider unable to run it fails the load (and falls back), not a step.
      await deviceHeads.for(2);
      layout = await DeviceLayout.create(provider, { floatMask: device.floatMask });
      return { kind: 'device', ...either, cross, deviceHeads, layout };
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
      const info: DeviceInfo = { kind: 'cuda', id: device.id, provider: 'cuda' };
      return await create(filesFor(choice.dtype), choice, info, { name: 'cuda', deviceId: device.id });
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
        const info: DeviceInfo = { kind: 'webgpu', id: device.id, provider: 'webgpu' };
        if (device.software === true) info.software = true;
        return await create(
          filesFor(choice.dtype),
          choice,
          info,
          // Dawn's validation of every GPU call costs host time per program; onnxruntime's kernels are what calls it.
          { name: 'webgpu', validationMode: 'disabled' } as ort.InferenceSession.ExecutionProviderConfig,
          choice.dtype !== 'fp16' && options.deviceState !== false,
        );
      } catch (err) {
        fallbackReason = `WebGPU on GPU ${device.id} unavailable: ${firstLine((err as Error).message)}`;
      }
    }
  }
  const choice = chooseDtype(modelDir, options.dtype ?? 'auto', 'cpu');
  const files = filesFor(choice.dtype);
  try {
    const info: DeviceInfo = { kind: 'cpu', id: null, provider: 'cpu' };
    if (fallbackReason !== undefined) info.fallbackReason = fallbackReason;
    return await create(files, choice, info, 'cpu' as unknown as ort.InferenceSession.ExecutionProviderConfig);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `onnxruntime could not load ${modelDir}: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/**
 * The alignment sessions, created on the first `open` from `graphs()` with the engine's provider and threads;
 * `encoder`: the engine's encoder session, or a file to open one from.
 */
function alignmentOpener(
  graphs: () => ReturnType<typeof alignmentGraphs>,
  create: (source: string | Uint8Array) => Promise<ort.InferenceSession>,
  encoder: EngineSession | string,
): AlignmentOpener {
  let opened: Promise<AlignmentSessions | { reason: string }> | undefined;
  const owned: ort.InferenceSession[] = [];
  const own = async (source: string | Uint8Array) => {
    const session = await create(source);
    owned.push(session);
    return float32Boundary(session);
  };
  return {
    open: () =>
      (opened ??= (async () => {
        try {
          const made = graphs();
          if ('reason' in made) return made;
          return {
            encoder: typeof encoder === 'string' ? await own(encoder) : encoder,
            step: await own(made.step),
            layer: made.layer,
          };
        } catch (err) {
          return { reason: `the alignment sessions could not be made: ${(err as Error).message}` };
        }
      })()),
    async release() {
      await opened;
      for (const session of owned.splice(0)) await session.release();
    },
  };
}

/** onnxruntime's messages carry a source location first: `…/webgpu_context.cc:136 … Failed to get a WebGPU adapter`. */
function firstLine(message: string): string {
  const line = message.split('\n')[0] ?? message;
  const reason = /(Failed to [^\n]*|No supported adapters[^\n]*)$/.exec(line);
  return reason?.[1] ?? line;
}
