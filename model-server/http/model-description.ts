/**
 * @module model-server/http/model-description — a registered model as the management API describes it
 * (`GET /models/{name}`): TorchServe's JSON shape, built from the manager's registry, its engines and GPU figures.
 */
import type { DeviceInfo } from '../protocol.js';
import type { ModelManager } from '../wlm/model-manager.js';
import { dtypeOf, entryKey, loadedModelOf, residentBytesOf, type ModelEntry } from '../wlm/registry.js';
import { servedPair } from '../../common/config/setup-config.js';
import { deviceLabel } from '../wlm/devices.js';

/**
 * TorchServe's describe shape (one element), plus `batchPolicy`, `handler` and `engine` we add: the engine's device,
 * dtype, model family, the pairs of every entry it serves, and its memory (weight files, workers' resident).
 */
export async function describeModel(manager: ModelManager, entry: ModelEntry): Promise<Record<string, unknown>> {
  const gpu = manager.gpu;
  if (entry.pool.workers().some((w) => onGpu(w.device))) await gpu.sample();
  const sharedWith = manager.registry
    .entries()
    .filter((e) => e.pool === entry.pool && e !== entry)
    .map(entryKey);
  return {
    modelName: entry.name,
    modelVersion: entry.version,
    modelUrl: entry.url,
    runtime: entry.runtime,
    minWorkers: entry.minWorkers,
    maxWorkers: entry.maxWorkers,
    batchSize: entry.batcher.batchSize,
    maxBatchDelay: entry.batcher.maxBatchDelayMs,
    responseTimeout: entry.responseTimeoutS,
    loadedAtStartup: entry.loadedAtStartup,
    handler: entry.handler,
    batchPolicy: entry.batcher.policy,
    engine: {
      key: entry.pool.spec.key,
      modelDir: entry.modelDir,
      requestedDevice:
        entry.placement.requestedCudaId === undefined ? 'cpu' : `cuda:${entry.placement.requestedCudaId}`,
      device: deviceLabel(entry.placement.device),
      ...(entry.placement.fallbackReason ? { deviceFallback: entry.placement.fallbackReason } : {}),
      ...(dtypeOf(entry) === undefined ? {} : { dtype: dtypeOf(entry) }),
      sharedWith,
      family: loadedModelOf(entry.pool)?.family ?? null,
      pairs: [
        ...new Set(
          manager.registry
            .entries()
            .filter((e) => e.pool === entry.pool && e.handler === 'translation')
            .map((e) => servedPair(e.name)),
        ),
      ],
      weightsBytes: loadedModelOf(entry.pool)?.weightsBytes ?? null,
      residentBytes: residentBytesOf(entry.pool),
    },
    workers: entry.pool.workers().map((w) => {
      const device = w.device;
      const fallback = device?.fallbackReason ?? entry.placement.fallbackReason;
      return {
        id: w.id,
        startTime: w.startTime,
        status: w.state === 'ready' ? 'READY' : w.state.toUpperCase(),
        memoryUsage: w.memoryUsage(),
        pid: w.pid ?? -1,
        gpu: onGpu(device),
        gpuUsage: onGpu(device) && device.id !== null ? gpu.usageText(device.id) : 'N/A',
        device: device ? deviceLabel(device) : 'unknown',
        ...(fallback ? { deviceFallback: fallback } : {}),
      };
    }),
    jobQueueStatus: {
      remainingCapacity: entry.batcher.queue.remainingCapacity,
      pendingRequests: entry.batcher.queue.size,
    },
  };
}

/** A worker on a GPU (CUDA or WebGPU): nvidia-smi's figures for its index apply. */
function onGpu(device: DeviceInfo | undefined): device is DeviceInfo {
  return device !== undefined && device.kind !== 'cpu';
}
