/**
 * @module model-server/translation/status — the model server's status document (`GET /status.json` on the metrics
 * port): per language and per engine what the status page (router/status-page.ts) and `scripts/gpu-watch` show,
 * read from one place so the two can never disagree.
 *
 * Why the metrics port: it is the server's read-only port for observers, bound to loopback like the management
 * API and never proxied; the inference port carries traffic (a poll must not share its connections or appear in
 * its metrics), and the management port changes things. The router reads this document and serves it on
 * :7777 as `/status.json` (router/status.ts), so the page never reaches a model server port itself.
 *
 * It is built to be shown: no address, port or path in it (a model folder is named by its last part), and it
 * changes nothing — reading it starts no process; GPU figures come from the monitor's short-lived cache.
 */
import path from 'node:path';
import type { GpuMonitor, GpuStat } from '../wlm/gpu-monitor.js';
import type { ModelManager } from '../wlm/model-manager.js';
import type { ActivityHistory, ModelWindow, RecentActivity } from '../wlm/recent-activity.js';
import { dtypeOf, loadedModelOf, residentBytesOf, type ModelEntry } from '../wlm/registry.js';
import { servedPair } from '../../common/config/setup-config.js';
import type { TranslationCache } from './translation-cache.js';
import { deviceLabel } from '../wlm/devices.js';
import type { WorkerPool } from '../wlm/workers/worker-pool.js';

export interface WorkerStatus {
  id: string;
  /** `starting`, `ready`, `stopping`, `dead` (the pool replaces a dead one after its backoff). */
  state: string;
  pid: number | null;
}

export interface EngineStatus {
  /** Device and model folder (and model, with ENGINE_SHARING=language): `cpu · tiny`. */
  id: string;
  /** Where its workers run (`cuda:0`, `cpu`), or the requested device before any is ready. */
  device: string;
  /** Why it runs on the CPU though a GPU was asked for. */
  deviceFallback?: string;
  /** The weights' type its workers loaded; null until one is ready. */
  dtype: string | null;
  /** Languages it serves. */
  models: string[];
  /** The model family its workers loaded (`M2M100`, `NLLB-200`, `mBART-50`, `Marian`); null until one is ready. */
  family: string | null;
  /** The pairs its entries serve: `any → ko` for a target's entry, `en → de` for a pair's own. */
  pairs: string[];
  /** Bytes of the weight files its workers loaded (one copy however many pairs it serves); null until one is ready. */
  weightsBytes: number | null;
  /** Resident memory of its workers (Linux /proc), bytes; null where not measured. */
  residentBytes: number | null;
  workers: WorkerStatus[];
  /** Rows generating at the last heartbeat. */
  liveRows: number;
  /** Decoder rows per decoder run over the window (the engine's real batch); null without steps. */
  rowsPerStep: number | null;
  /** nvidia-smi's index of its GPU, when it runs on one. */
  gpuIndex: number | null;
}

/** A language: its engine's figures, and its own over the window (rounded). */
export interface ModelStatus
  extends Pick<EngineStatus, 'device' | 'deviceFallback' | 'dtype' | 'workers' | 'rowsPerStep'>, ModelWindow {
  name: string;
  version: string;
  /** EngineStatus.id of the engine serving it. */
  engine: string;
  /** Where setup_config.json pins it (`cuda:0`), or `cpu`. */
  requestedDevice: string;
  queueDepth: number;
}

export interface ServerStatus {
  /** ISO time of the document. */
  time: string;
  /** Window of the rates, percentiles and ratios, seconds. */
  windowS: number;
  /** Time between two points of `history`, seconds. */
  sampleS: number;
  models: ModelStatus[];
  engines: EngineStatus[];
  /** Each GPU as nvidia-smi reports it. */
  gpus: GpuStat[];
  /** Why `gpus` is empty: nvidia-smi missing or failing. */
  gpuError?: string;
  cache: { enabled: boolean; maxBytes: number; bytes: number; entries: number };
  history: ActivityHistory;
}

export interface StatusDeps {
  manager: ModelManager;
  gpu: GpuMonitor;
  activity: RecentActivity;
  cache: TranslationCache | undefined;
}

export async function buildStatus(deps: StatusDeps): Promise<ServerStatus> {
  const { manager, gpu, activity, cache } = deps;
  const gpus = await gpu.sample();
  const entries = manager.registry.entries();
  const pools = [...new Set(entries.map((e) => e.pool))];
  const engines = pools.map((pool) => engineStatus(pool, entries, activity));
  const engineOf = new Map(pools.map((pool, i) => [pool, engines[i]!]));
  const models = entries.map((entry): ModelStatus => {
    const engine = engineOf.get(entry.pool)!;
    const recent = activity.model(entry.name);
    return {
      name: entry.name,
      version: entry.version,
      engine: engine.id,
      requestedDevice:
        entry.placement.requestedCudaId === undefined ? 'cpu' : `cuda:${entry.placement.requestedCudaId}`,
      device: engine.device,
      ...(engine.deviceFallback === undefined ? {} : { deviceFallback: engine.deviceFallback }),
      dtype: engine.dtype,
      workers: engine.workers,
      queueDepth: entry.batcher.queue.size,
      requestsPerS: round(recent.requestsPerS),
      errorsPerS: round(recent.errorsPerS),
      p50Ms: roundOrNull(recent.p50Ms),
      p99Ms: roundOrNull(recent.p99Ms),
      rowsPerStep: engine.rowsPerStep,
      cacheHitRatio: roundOrNull(recent.cacheHitRatio, 3),
      cacheHits: recent.cacheHits,
      cacheMisses: recent.cacheMisses,
    };
  });
  const error = gpu.error;
  return {
    time: new Date().toISOString(),
    windowS: activity.windowMs / 1000,
    sampleS: activity.sampleMs / 1000,
    models,
    engines,
    gpus: gpus.map(({ index, name, utilizationPercent, memoryUsedBytes, memoryTotalBytes }) => ({
      index,
      name,
      utilizationPercent,
      memoryUsedBytes,
      memoryTotalBytes,
    })),
    ...(error === undefined ? {} : { gpuError: error }),
    cache: {
      enabled: cache?.enabled ?? false,
      maxBytes: cache?.maxBytes ?? 0,
      bytes: cache?.bytes ?? 0,
      entries: cache?.entries ?? 0,
    },
    history: activity.history(),
  };
}

function engineStatus(pool: WorkerPool, entries: readonly ModelEntry[], activity: RecentActivity): EngineStatus {
  const served = entries.filter((e) => e.pool === pool);
  const first = served[0]!;
  const { spec } = pool;
  const workers = pool.workers();
  const ready = workers.find((w) => w.device !== undefined);
  const requested = deviceLabel(spec.device);
  const device = ready?.device ? deviceLabel(ready.device) : requested;
  const fallback = ready?.device?.fallbackReason ?? spec.deviceFallback;
  // The key names the folder by its absolute path; the document names it by its last part only.
  const id = spec.key
    .split('|')
    .slice(1)
    .map((part) => (part === spec.modelDir ? path.basename(part) : part))
    .join(' · ');
  return {
    id,
    device,
    ...(fallback === undefined ? {} : { deviceFallback: fallback }),
    dtype: dtypeOf(first) ?? null,
    models: served.map((e) => e.name),
    family: loadedModelOf(pool)?.family ?? null,
    pairs: [...new Set(served.filter((e) => e.handler === 'translation').map((e) => servedPair(e.name)))],
    weightsBytes: loadedModelOf(pool)?.weightsBytes ?? null,
    residentBytes: residentBytesOf(pool),
    workers: workers.map((w) => ({ id: w.id, state: w.state, pid: w.pid ?? null })),
    liveRows: workers.reduce((n, w) => n + (w.state === 'dead' ? 0 : w.liveRows), 0),
    rowsPerStep: roundOrNull(activity.rowsPerStep(spec.key)),
    gpuIndex: ready?.device !== undefined && ready.device.kind !== 'cpu' ? ready.device.id : null,
  };
}

const round = (n: number, digits = 2) => Math.round(n * 10 ** digits) / 10 ** digits;
const roundOrNull = (n: number | null, digits = 2) => (n === null ? null : round(n, digits));
