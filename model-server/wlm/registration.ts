/**
 * @module model-server/wlm/registration — a registration request made concrete: its store entry read, TorchServe's
 * parameters checked and defaulted from the config, the model placed on a device, and the engine and batcher it
 * will get. model-manager.ts checks it against the registry and registers it.
 */
import type { ModelServerConfig, SetupConfig } from '../../common/config.js';
import { deviceOf, targetOf } from '../../common/config/setup-config.js';
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import { checkExport } from '../store/export-check.js';
import { DEFAULT_MODEL_VERSION, MODEL_NAME_PATTERN, RUNTIMES, resolveStoreEntry } from '../store/manifest.js';
import { HANDLER_NAMES, isHandlerName } from '../worker/handlers/index.js';
import type { BatcherOptions } from './batcher.js';
import { placeModel, type CudaAvailability, type WebGpuAvailability, gpuWorkers } from './devices.js';
import type { ModelFingerprints } from './model-fingerprint.js';
import type { ModelEntry } from './registry.js';
import type { EngineSpec } from './workers/worker-pool.js';

/** A registration, with TorchServe's parameters already validated and typed. */
export interface RegisterRequest {
  url: string;
  modelName?: string;
  handler?: string;
  runtime?: string;
  batchSize?: number;
  maxBatchDelayMs?: number;
  initialWorkers?: number;
  synchronous: boolean;
  responseTimeoutS?: number;
  startupTimeoutS?: number;
}

/** What a registration reads besides the request. */
export interface RegistrationContext {
  config: ModelServerConfig;
  /** setup_config.json (languages and pairs → GPU id); models it does not name run on the CPU. */
  setupConfig: SetupConfig | undefined;
  cuda: CudaAvailability;
  /** Whether GPU-pinned models may run on WebGPU when CUDA is unusable (default: not probed, so the CPU). */
  webgpu?: WebGpuAvailability;
  /** Fingerprints of the model folders, computed at registration (the translation cache keys on them). */
  fingerprints?: ModelFingerprints;
  log: Logger;
}

/** A checked registration: the registry entry but for its engine and batcher, and what those are built from. */
export interface Registration {
  model: Omit<ModelEntry, 'batcher' | 'pool' | 'loadedAtStartup'>;
  /** The engine to serve it, but for its key (engine-set.ts). */
  engine: Omit<EngineSpec, 'key'>;
  batcher: BatcherOptions;
}

/** TorchServe's startup_timeout default, seconds. */
export const DEFAULT_STARTUP_TIMEOUT_S = 120;

/**
 * Read the request's store entry, fingerprint its folder and check its parameters (not yet against the registry).
 * @throws ServeError BAD_REQUEST (runtime, model name, handler, or a translation export whose files disagree), or the
 * store entry's errors
 */
export async function resolveRegistration(request: RegisterRequest, ctx: RegistrationContext): Promise<Registration> {
  const { config, log } = ctx;
  const { model: stored, runtime: storedRuntime } = resolveStoreEntry(config.modelStore, request.url).manifest;
  await ctx.fingerprints?.compute(stored.modelDir).catch((err: Error) => {
    log.warn({ modelDir: stored.modelDir, err: err.message }, 'model folder not fingerprinted: no cache');
  });
  const runtime = request.runtime ?? storedRuntime;
  if (!(RUNTIMES as readonly string[]).includes(runtime)) {
    throw new ServeError('BAD_REQUEST', `Invalid RuntimeType value: ${runtime}`);
  }
  const name = request.modelName ?? stored.modelName;
  if (!MODEL_NAME_PATTERN.test(name)) throw new ServeError('BAD_REQUEST', `Invalid model name: ${name}`);
  const handler = request.handler ?? stored.handler;
  if (!isHandlerName(handler)) {
    throw new ServeError(
      'BAD_REQUEST',
      `Parameter handler must be one of ${HANDLER_NAMES.join(', ')}, got: ${handler}`,
    );
  }
  // A folder whose files disagree is refused here, naming the file, before anything is registered or spawned.
  if (handler === 'translation') checkExport(stored.modelDir, targetOf(name));
  const placement = placeModel(deviceOf(ctx.setupConfig, name), ctx.cuda, ctx.webgpu);
  const workers =
    request.initialWorkers ??
    (placement.device.kind === 'cpu' ? config.defaultWorkersPerModel : gpuWorkers(config.gpuWorkers, placement.device));
  const responseTimeoutS = request.responseTimeoutS ?? config.defaultResponseTimeoutS;
  const { intraOpThreads, numBeams, maxNewTokens, minNewTokens, modelDtype, generation } = config;
  return {
    model: {
      name,
      version: stored.modelVersion || DEFAULT_MODEL_VERSION,
      url: request.url,
      handler,
      modelDir: stored.modelDir,
      runtime,
      placement,
      responseTimeoutS,
      startupTimeoutS: request.startupTimeoutS ?? DEFAULT_STARTUP_TIMEOUT_S,
      minWorkers: workers,
      maxWorkers: workers,
    },
    engine: {
      handler,
      modelDir: stored.modelDir,
      device: placement.device,
      deviceFallback: placement.fallbackReason,
      options: { intraOpThreads, numBeams, maxNewTokens, minNewTokens, modelDtype, generation },
    },
    batcher: {
      policy: config.batchPolicy,
      batchSize: request.batchSize ?? config.defaultBatchSize,
      maxBatchDelayMs: request.maxBatchDelayMs ?? config.defaultMaxBatchDelayMs,
      queueSize: config.jobQueueSize,
      // Half the response timeout at most, so a job that waited its whole budget still has time to run.
      queueBudgetMs: Math.min(config.queueBudgetMs, (responseTimeoutS * 1000) / 2),
    },
  };
}
