/**
 * @module model-server/http/server — wires one model server: the manager (registry, batchers, engines), the
 * metrics, and the three apps, from a validated config. It does not listen and reads no environment; main.ts
 * and the tests do both around it.
 */
import { fork } from 'node:child_process';
import { setPriority } from 'node:os';
import type { Hono } from 'hono';
import type { ModelServerConfig, SetupConfig } from '../../common/config.js';
import { resolveEntry, type EntryPoint } from '../../common/entry.js';
import type { Logger } from '../../common/logger.js';
import { ENGINE_MALLOC_ENV } from '../engine/malloc-env.js';
import {
  detectCuda,
  detectWebGpu,
  type CudaAvailability,
  WEBGPU_NOT_PROBED,
  type WebGpuAvailability,
} from '../wlm/devices.js';
import type { AppEnv } from './error-handler.js';
import { GpuMonitor } from '../wlm/gpu-monitor.js';
import { GlossaryStore } from '../translation/glossary-store.js';
import { createInferenceApp } from './inference-api.js';
import { createManagementApp } from './management-api.js';
import { createMetricsApp } from './metrics-api.js';
import { ServerMetrics } from '../wlm/metrics.js';
import { buildStatus } from '../translation/status.js';
import { ModelFingerprints } from '../wlm/model-fingerprint.js';
import type { ManagerTimings } from '../wlm/workers/worker-pool.js';
import { ModelManager } from '../wlm/model-manager.js';
import { TranslationCache } from '../translation/translation-cache.js';
import { TextPool } from '../translation/text-pool.js';
import type { WorkerSpawner } from '../wlm/workers/worker-handle.js';
import { childConnection } from '../wlm/workers/worker-connection.js';

export interface ModelServerDeps {
  config: ModelServerConfig;
  setupConfig: SetupConfig | undefined;
  log: Logger;
  /** Log level handed to worker processes. */
  workerLogLevel?: string;
  /** Defaults to forking worker/main with IPC; tests inject their own. */
  spawn?: WorkerSpawner;
  /** Defaults to probing the host once (`detectCuda`). */
  cuda?: CudaAvailability;
  /**
   * Defaults to probing once (`detectWebGpu`) when CUDA is unusable and setup_config.json pins a model to a GPU;
   * else not probed.
   */
  webgpu?: WebGpuAvailability;
  gpu?: GpuMonitor;
  timings?: Partial<ManagerTimings>;
  /** Keys when token authorization is on. */
  tokens?: { inference: string; management: string };
  /** Where registrations are saved and restored from (wlm/snapshot.ts); none: not saved. */
  snapshotDir?: string;
}

export interface ModelServer {
  manager: ModelManager;
  metrics: ServerMetrics;
  inferenceApp: Hono<AppEnv>;
  managementApp: Hono<AppEnv>;
  metricsApp: Hono<AppEnv>;
  cuda: CudaAvailability;
  /** CACHE_MAX_BYTES' translation cache (off when 0). */
  cache: TranslationCache;
  glossaries: GlossaryStore;
  /** Worker threads for translation requests' text work (TEXT_THREADS); close it after the manager. */
  textPool: TextPool;
}

export function createModelServer(deps: ModelServerDeps): ModelServer {
  const { config, log } = deps;
  const cuda = deps.cuda ?? detectCuda();
  if (cuda.unavailableReason)
    log.warn({ reason: cuda.unavailableReason }, 'CUDA unavailable: every model runs on the CPU');
  else log.info({ gpus: cuda.gpus }, 'CUDA available');
  const pinned = Object.keys(deps.setupConfig?.cuda_id ?? {}).length > 0;
  const webgpu = deps.webgpu ?? (cuda.unavailableReason !== undefined && pinned ? detectWebGpu() : WEBGPU_NOT_PROBED);
  if (webgpu.available) log.info({ software: webgpu.software }, 'WebGPU available: GPU-pinned models run on it');
  else if (webgpu !== WEBGPU_NOT_PROBED) log.warn({ reason: webgpu.unavailableReason }, 'WebGPU unavailable');
  const gpu = deps.gpu ?? new GpuMonitor();
  let manager: ModelManager | undefined;
  const fingerprints = new ModelFingerprints();
  const cache = new TranslationCache(config.cacheMaxBytes, fingerprints);
  const glossaries = new GlossaryStore(config.glossaryDir, log);
  const textPool = new TextPool({ threads: config.textThreads, timeoutMs: config.textTimeoutMs, log });
  const metrics = new ServerMetrics({
    gpu,
    snapshot: () => manager?.snapshot() ?? { queues: [], workers: {}, liveRows: [] },
    cacheBytes: () => cache.bytes,
  });
  manager = new ModelManager({
    config,
    setupConfig: deps.setupConfig,
    cuda,
    webgpu,
    spawn: deps.spawn ?? forkWorker(deps.workerLogLevel ?? 'info'),
    log,
    metrics,
    gpu,
    ...(deps.timings ? { timings: deps.timings } : {}),
    fingerprints,
    ...(deps.snapshotDir === undefined ? {} : { snapshotDir: deps.snapshotDir }),
  });
  const managed = manager;
  metrics.recent.start(() =>
    managed.closing ? undefined : new Map(managed.snapshot().queues.map((q) => [q.model, q.depth])),
  );
  const maxBodyBytes = config.maxRequestBytes;
  return {
    manager,
    metrics,
    cuda,
    cache,
    glossaries,
    textPool,
    inferenceApp: createInferenceApp({
      manager,
      metrics,
      log,
      maxBodyBytes,
      token: deps.tokens?.inference,
      translationLimits: { maxChars: deps.config.maxRequestChars, maxSentences: deps.config.maxRequestSentences },
      textPool,
      cache,
      glossaries,
      cacheHeader: deps.config.cacheDisclose,
    }),
    managementApp: createManagementApp({ manager, log, maxBodyBytes, token: deps.tokens?.management }),
    metricsApp: createMetricsApp({
      metrics,
      log,
      maxBodyBytes,
      status: () => buildStatus({ manager: managed, gpu, activity: metrics.recent, cache }),
    }),
  };
}

/** What `forkWorker` forks besides the defaults. */
export interface ForkWorkerOptions {
  /** The worker entry (default worker/main: compiled .js, or .ts through tsx under vitest). */
  entry?: EntryPoint;
  /** Variables added to the worker's environment. */
  env?: Record<string, string>;
}

/** The default spawner: fork the worker entry with an IPC channel. */
export function forkWorker(logLevel: string, options: ForkWorkerOptions = {}): WorkerSpawner {
  const entry = options.entry ?? resolveEntry(import.meta.url, '../worker/main');
  return (workerId) => {
    const child = fork(entry.file, [], {
      // A profiled model server (node --cpu-prof …, as `npm run bench -- --profile` starts it) profiles its workers.
      execArgv: [...entry.execArgv, ...process.execArgv.filter((flag) => flag.startsWith('--cpu-prof'))],
      serialization: 'advanced',
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
      // Allocator settings for onnxruntime-node's output copies (engine/malloc-env.ts); the environment's own win.
      env: {
        ...ENGINE_MALLOC_ENV,
        ...process.env,
        MT_WORKER_LOG_LEVEL: logLevel,
        MT_WORKER_ID: workerId,
        ...options.env,
      },
    });
    // The engine yields to the HTTP side (this frontend, the router, nginx, all at nice 0): under overload its
    // onnxruntime threads would take both cores and leave refusals to be answered late; a lower priority costs the
    // engine only the HTTP side's own share. Threads the worker starts later (onnxruntime's) inherit it.
    if (child.pid !== undefined) {
      try {
        setPriority(child.pid, WORKER_NICENESS);
      } catch {
        // Not permitted here (some containers): the worker runs at the frontend's priority.
      }
    }
    return childConnection(child);
  };
}

/**
 * The workers' nice value (0–19; the HTTP processes run at 0). At 5, refusals through the front at 10× overload
 * took 47–92 ms at p99 over the quick runs of bench figure 7 (target < 50 ms); at 10, 31 and 35 ms, with goodput
 * within the runs' usual spread.
 */
export const WORKER_NICENESS = 10;
