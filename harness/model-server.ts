/**
 * @module harness/model-server — a real model server in this process for integration tests (the model server's,
 * the router's, the deploy and script tests): a temp store of echo entries, the three apps listening on
 * 127.0.0.1:0, real worker processes (or, asked for, the real worker loop in this process: in-process-worker.ts). Nothing is mocked; timings (restart backoff, unhealthy threshold) are
 * shortened and faults injected through the server's `spawn` seam (fault-spawner.ts). A whole stack in fresh
 * processes is harness/stack.ts.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { serve } from '@hono/node-server';
import { afterEach } from 'vitest';
import type { Hono } from 'hono';
import { loadConfig, type ModelServerConfig, type SetupConfig } from '../common/config.js';
import { createLogger } from '../common/logger.js';
import { type CudaAvailability, WEBGPU_NOT_PROBED, type WebGpuAvailability } from '../model-server/wlm/devices.js';
import type { AppEnv } from '../model-server/http/error-handler.js';
import type { GpuMonitor } from '../model-server/wlm/gpu-monitor.js';
import type { ManagerTimings } from '../model-server/wlm/model-manager.js';
import { createModelServer, type ModelServer } from '../model-server/http/server.js';
import type { WorkerSpawner } from '../model-server/wlm/workers/worker-handle.js';
import { makeDemoModel } from '../model-server/tools/demo-model/index.js';
import { archiveModels } from '../model-server/tools/archiver.js';
import './compiled.js';
import { faultSpawner } from './fault-spawner.js';
import { inProcessSpawner } from './in-process-worker.js';
import { call } from './http.js';

export interface TestServerOptions {
  /** Overrides of the default model-server config (e.g. batchPolicy, jobQueueSize). */
  config?: Partial<ModelServerConfig>;
  setupConfig?: SetupConfig;
  /** Store entries to write; default ['echo']. */
  entries?: string[];
  /** Handler of those entries (default echo). */
  handler?: string;
  /** Shared model folder the entries refer to (default an empty temp folder: echo needs none). */
  modelDir?: string;
  /**
   * Faults per model (harness/fault-worker.ts names), injected by forking the fault-drill worker for those
   * models' engines (`faultSpawner`); models with different faults need an engine each (engineSharing: 'language').
   */
  faults?: Record<string, string>;
  timings?: Partial<ManagerTimings>;
  cuda?: CudaAvailability;
  /** Default: not probed (GPU-pinned models without CUDA run on the CPU, whatever this host's Vulkan offers). */
  webgpu?: WebGpuAvailability;
  /**
   * Where workers run: `process` (default) forks the real worker entry (the fault-drill one for engines with
   * `faults`); `in-process` runs the same worker loop in this process (in-process-worker.ts): seconds faster per
   * worker, for tests that neither inject faults nor look at worker processes.
   */
  workers?: 'process' | 'in-process';
  /** Worker factory, in place of what `workers` chooses. */
  spawn?: WorkerSpawner;
  /** GPU monitor (e.g. on a fake nvidia-smi); default: the host's. */
  gpu?: GpuMonitor;
  /** More store entries, of other versions, written before the server starts. */
  versionedEntries?: { names: string[]; version: string }[];
  /** Save registrations there, and restore from there before listening (as model-server/main.ts does). */
  snapshotDir?: string;
}

export interface TestServer {
  server: ModelServer;
  store: string;
  modelDir: string;
  inference: string;
  management: string;
  metrics: string;
  close(): Promise<void>;
}

export const NO_CUDA: CudaAvailability = { gpus: [], unavailableReason: 'no GPU on the test host' };

export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-test-'));
  const store = path.join(dir, 'store');
  const modelDir = options.modelDir ?? path.join(dir, 'model');
  mkdirSync(modelDir, { recursive: true });
  archiveModels({ modelDir, store, names: options.entries ?? ['echo'], handler: options.handler ?? 'echo' });
  for (const { names, version } of options.versionedEntries ?? []) {
    archiveModels({ modelDir, store, names, handler: options.handler ?? 'echo', version });
  }
  // One text thread, as a stack's (stack.ts TEST_ENV); tests of more set `config.textThreads`.
  const base = loadConfig({ MODEL_STORE: store, MODEL_DIR: modelDir, TEXT_THREADS: '1' }, dir).modelServer;
  const config: ModelServerConfig = { ...base, ...options.config };
  const server = createModelServer({
    config,
    setupConfig: options.setupConfig,
    log: createLogger('test', 'silent'),
    workerLogLevel: 'warn',
    cuda: options.cuda ?? NO_CUDA,
    webgpu: options.webgpu ?? WEBGPU_NOT_PROBED,
    timings: { backoffUnitMs: 50, stopTimeoutMs: 3000, ...options.timings },
    spawn: options.spawn ?? spawnerFor(options),
    ...(options.gpu ? { gpu: options.gpu } : {}),
    ...(options.snapshotDir === undefined ? {} : { snapshotDir: options.snapshotDir }),
  });
  if (options.snapshotDir !== undefined) await server.manager.restore();
  // From source each text thread takes seconds to load (tsx): not on a first request's text budget.
  if (options.handler === 'translation') await server.textPool.warm();
  const listening = await Promise.all([server.inferenceApp, server.managementApp, server.metricsApp].map(listen));
  const [inference, management, metrics] = listening.map(
    (s) => `http://127.0.0.1:${(s.address() as AddressInfo).port}`,
  );
  return {
    server,
    store,
    modelDir,
    inference: inference!,
    management: management!,
    metrics: metrics!,
    async close() {
      await server.manager.close(5000);
      for (const s of listening) s.closeAllConnections();
      await Promise.all(listening.map((s) => new Promise((resolve) => s.close(resolve))));
      await server.textPool.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

function spawnerFor(options: TestServerOptions): WorkerSpawner {
  if (options.workers !== 'in-process') return faultSpawner(options.faults ?? {});
  if (options.faults !== undefined) throw new Error('faults are injected into worker processes: drop `in-process`');
  return inProcessSpawner();
}

function listen(app: Hono<AppEnv>): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' }) as Server;
    server.once('listening', () => resolve(server));
    server.once('error', reject);
  });
}

/** The management API's description of a registered model (its first version). */
export async function describeModel(t: TestServer, model: string): Promise<any> {
  return (await call(`${t.management}/models/${model}`)).body[0];
}

/**
 * A model server with the generated tiny M2M100 (or another demo `preset`) serving `models` (each registered with
 * `batchSize`, default 8, and a 5 ms batch delay), one CPU engine for all, greedy 16-token outputs unless `config`
 * says otherwise; `close` also removes the generated model.
 */
export async function startTinyTranslationServer(
  models: string[],
  options: Omit<TestServerOptions, 'entries' | 'handler' | 'modelDir'> & { batchSize?: number; preset?: string } = {},
): Promise<TestServer> {
  const { batchSize = 8, preset = 'tiny', ...serverOptions } = options;
  const modelRoot = mkdtempSync(path.join(tmpdir(), 'mt-serve-tiny-'));
  makeDemoModel(preset, modelRoot);
  const t = await startTestServer({
    ...serverOptions,
    entries: models,
    handler: 'translation',
    modelDir: modelRoot,
    config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1, ...serverOptions.config },
  });
  for (const model of models) {
    await registerModel(t, `url=${model}&batch_size=${batchSize}&max_batch_delay=5`);
  }
  const close = t.close;
  return {
    ...t,
    async close() {
      await close();
      rmSync(modelRoot, { recursive: true, force: true });
    },
  };
}

/**
 * `startTestServer` for servers that live for one test: every server started through the returned function is
 * closed after the test that started it (vitest's afterEach), pass or fail. Call it in a `describe` body.
 */
export function startPerTest(): (options?: TestServerOptions) => Promise<TestServer> {
  const open: TestServer[] = [];
  afterEach(async () => {
    for (const t of open.splice(0)) await t.close();
  });
  return async (options) => {
    const t = await startTestServer(options);
    open.push(t);
    return t;
  };
}

/** POST `query` to the management API's /models (a registration); throws unless it answers 200. */
export async function registerModel(t: TestServer, query: string): Promise<void> {
  const res = await call(`${t.management}/models?${query}`, { method: 'POST' });
  if (res.status !== 200) throw new Error(`POST /models?${query}: ${res.status} ${JSON.stringify(res.body)}`);
}

/** The model server's Prometheus metrics page, as text. */
export async function metricsText(t: TestServer): Promise<string> {
  return (await call(`${t.metrics}/metrics`)).body as string;
}

/**
 * Runs `use` on a model server built in this process over an empty store (nothing registered, no CUDA, silent,
 * not listening) with token authorization's `tokens`; closes it and removes the store after, pass or fail.
 */
export async function withTokenServer(
  tokens: { inference: string; management: string },
  use: (server: ModelServer, config: ModelServerConfig) => Promise<void>,
): Promise<void> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-tokens-'));
  const config = loadConfig({ MODEL_STORE: dir, MODEL_DIR: dir }, dir).modelServer;
  const log = createLogger('test', 'silent');
  const server = createModelServer({ config, setupConfig: undefined, log, cuda: NO_CUDA, tokens });
  try {
    await use(server, config);
  } finally {
    await server.manager.close(1000);
    await server.textPool.close();
    rmSync(dir, { recursive: true, force: true });
  }
}
