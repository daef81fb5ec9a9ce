/**
 * @module bench/lib/stack — starts mt-serve's processes for one measurement, fresh, on free ports, with a
 * private model store, logs and run folder under the bench's temp folder, and stops them all afterwards.
 *
 * Layers, bottom up (each started only when asked for):
 *   model server (`model-server/main`, its workers)  ←  router cluster (`bench/router-cluster`: N × router/main
 *   on one port, pm2's cluster mechanism)  ←  front on its port (`front/main`: nginx when installed, else the
 *   built-in proxy — what `FRONT=auto` gives a user).
 * The processes run from source through tsx, so the bench measures the tree as it is without a build step.
 * The repository's `.env` does not change a measurement: every variable of the configuration is set explicitly
 * in each process's environment (the process env wins over `.env`), to its default unless the bench sets it.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { request } from 'undici';
import { ENV_DEFAULTS } from '../../common/config.js';
import { archiveModels } from '../../model-server/tools/archiver.js';
import type { BenchContext } from './context.js';
import { freePort, startProcess, type ManagedProcess } from '../../harness/process-registry.js';
import { tsExecArgv } from './probe-runner.js';
import { scrape, type Sample } from './metrics.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';

export interface StackOptions {
  /** Names this stack in logs, e.g. `serving-c64`. */
  name: string;
  /** Parent folder for this stack's store, logs and run files. */
  workDir: string;
  modelDir: string;
  /** Languages served: setup_config.json's keys (each pinned to `devices[lang]`, default "0"). */
  languages: readonly string[];
  /** setup_config device id per language (the seed's spread over GPUs 0–2); all fall back to the CPU here. */
  devices?: Readonly<Record<string, string>>;
  handler: 'translation' | 'echo';
  /** How far up to start: the model server only, plus the router cluster, plus the front. */
  layers: 'model-server' | 'router' | 'front';
  batchSize: number;
  maxBatchDelayMs: number;
  batchPolicy: 'immediate' | 'torchserve';
  engineSharing: 'device' | 'language';
  intraOpThreads: number;
  /**
   * MODEL_DTYPE. Default fp32: the figures compare like with like (the transformers.js baseline's fp32 arm, earlier
   * runs); the int8 arms name theirs.
   */
  modelDtype?: 'auto' | 'fp32' | 'q8' | 'q8-rows' | 'fp16';
  /** MAX_NEW_TOKENS of the served model. */
  maxNewTokens: number;
  /** MIN_NEW_TOKENS (default: maxNewTokens, a fixed output length); 0 lets rows end at `</s>` or their cap. */
  minNewTokens?: number;
  /**
   * CACHE_MAX_BYTES. Default 0: the figures measure the path through the engine, and their workloads repeat
   * sentences between arms (the cache scenario turns it on).
   */
  cacheMaxBytes?: number;
  /** Router instances; 0 = one per core (the default of ROUTER_INSTANCES). */
  routerInstances?: number;
  /** LOG_LEVEL for every process (default info, as deployed). */
  logLevel?: string;
  /** Fail the start after this long (the 418M model loads in seconds per engine; 14 engines take longer). */
  startTimeoutMs?: number;
  /**
   * Every language's response_timeout, s. Default 900: the throughput figures measure the engine, and a closed
   * loop at high concurrency must never see a deadline.
   */
  responseTimeoutS?: number;
  /** QUEUE_BUDGET_MS. Default: half the response timeout, so admission never refuses in the throughput figures. */
  queueBudgetMs?: number;
  /** FRONT: `auto` (default: nginx when installed, as a user gets it), `nginx` or `builtin`. */
  front?: 'auto' | 'nginx' | 'builtin';
  /** Set last in every process's environment, over the bench's settings (the soak's beam count). */
  env?: Readonly<Record<string, string>>;
}

export interface StackUrls {
  inference: string;
  management: string;
  metrics: string;
  router?: string;
  front?: string;
}

export class Stack {
  readonly urls: StackUrls;
  readonly processes: ManagedProcess[];
  /** `nginx` or `builtin` when a front runs. */
  readonly frontKind: string | undefined;

  constructor(urls: StackUrls, processes: ManagedProcess[], frontKind: string | undefined) {
    this.urls = urls;
    this.processes = processes;
    this.frontKind = frontKind;
  }

  /** Root pids of every process (group) of the stack, for memory sampling. */
  pids(): number[] {
    return this.processes.map((p) => p.pid);
  }

  metrics(): Promise<Sample[]> {
    return scrape(`${this.urls.metrics}/metrics`);
  }

  /** Stop the front, then the routers, then the model server (and its workers). */
  async stop(): Promise<void> {
    for (const p of [...this.processes].reverse()) await p.stop(10_000);
  }
}

/** Where requests enter a stack at each layer, and the body each expects. */
export function entryOf(stack: Stack, layer: 'model-server' | 'router' | 'front'): string {
  const url = layer === 'front' ? stack.urls.front : layer === 'router' ? stack.urls.router : stack.urls.inference;
  if (url === undefined) throw new Error(`the stack was not started up to the ${layer}`);
  return url;
}

/** Start a stack (see StackOptions); on any failure every process it started is stopped before rethrowing. */
let stacksStarted = 0;

/**
 * A stack at this run's settings (batch size and delay, onnxruntime threads, output length) in the deployed layout
 * unless told otherwise: the translation handler, the front on top, immediate dispatch, one engine per device.
 */
export function startRunStack(
  ctx: BenchContext,
  options: Pick<StackOptions, 'name' | 'modelDir' | 'languages'> & Partial<Omit<StackOptions, 'workDir'>>,
): Promise<Stack> {
  const { settings } = ctx;
  return startStack({
    workDir: ctx.workDir,
    handler: 'translation',
    layers: 'front',
    batchSize: settings.batchSize,
    maxBatchDelayMs: settings.maxBatchDelayMs,
    batchPolicy: 'immediate',
    engineSharing: 'device',
    intraOpThreads: settings.intraOpThreads,
    maxNewTokens: settings.newTokens,
    ...options,
  });
}

export async function startStack(options: StackOptions): Promise<Stack> {
  // Numbered, so two stacks of the same name never share a store or logs.
  const dir = path.join(options.workDir, `${String(++stacksStarted).padStart(2, '0')}-${options.name}`);
  const store = path.join(dir, 'model_store');
  const logs = path.join(dir, 'logs');
  const run = path.join(dir, 'run');
  for (const d of [dir, store, logs, run]) mkdirSync(d, { recursive: true });
  const setupConfig = path.join(dir, 'setup_config.json');
  const cudaId = Object.fromEntries(options.languages.map((l) => [l, options.devices?.[l] ?? '0']));
  writeFileSync(setupConfig, `${JSON.stringify({ cuda_id: cudaId }, null, 2)}\n`);
  archiveModels({ modelDir: options.modelDir, store, names: options.languages, handler: options.handler });

  const timeoutMs = options.startTimeoutMs ?? 10 * 60_000;
  const responseTimeoutS = options.responseTimeoutS ?? 900;
  const baseEnv = {
    ...ENV_DEFAULTS,
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    LOG_LEVEL: options.logLevel ?? 'info',
    LOG_DIR: logs,
    RUN_DIR: run,
    SETUP_CONFIG: setupConfig,
    MODEL_STORE: store,
    MODEL_DIR: options.modelDir,
    RESPONSE_TIMEOUT_S: String(responseTimeoutS),
    QUEUE_BUDGET_MS: String(options.queueBudgetMs ?? (responseTimeoutS * 1000) / 2),
  };
  const started: ManagedProcess[] = [];
  try {
    const modelServer = startProcess({
      name: `${options.name} model-server`,
      file: path.join(root, 'model-server', `main.${ext}`),
      execArgv: tsExecArgv(),
      cwd: root, // workers are spawned with the tsx loader, which resolves from the working folder
      logFile: path.join(logs, 'model-server.log'),
      env: {
        ...baseEnv,
        INFERENCE_ADDRESS: '127.0.0.1:0',
        MANAGEMENT_ADDRESS: '127.0.0.1:0',
        METRICS_ADDRESS: '127.0.0.1:0',
        BATCH_SIZE: String(options.batchSize),
        MAX_BATCH_DELAY_MS: String(options.maxBatchDelayMs),
        BATCH_POLICY: options.batchPolicy,
        ENGINE_SHARING: options.engineSharing,
        INTRA_OP_THREADS: String(options.intraOpThreads),
        MODEL_DTYPE: options.modelDtype ?? 'fp32',
        NUM_BEAMS: '1',
        MAX_NEW_TOKENS: String(options.maxNewTokens),
        // Every row the same length, as the transformers.js baseline is given (min_new_tokens = max_new_tokens):
        // the source-length cap never undercuts it.
        MIN_NEW_TOKENS: String(options.minNewTokens ?? options.maxNewTokens),
        JOB_QUEUE_SIZE: '4096',
        CACHE_MAX_BYTES: String(options.cacheMaxBytes ?? 0),
        ...options.env,
      },
    });
    started.push(modelServer);
    const line = await modelServer.waitForLine(/model server listening/, 60_000);
    const ports = (JSON.parse(line) as { ports: { inference: number; management: number; metrics: number } }).ports;
    const urls: StackUrls = {
      inference: `http://127.0.0.1:${ports.inference}`,
      management: `http://127.0.0.1:${ports.management}`,
      metrics: `http://127.0.0.1:${ports.metrics}`,
    };
    // Register every language as start.sh does (synchronous: returns once its worker is ready).
    for (const lang of options.languages) {
      const query = new URLSearchParams({
        url: lang,
        batch_size: String(options.batchSize),
        max_batch_delay: String(options.maxBatchDelayMs),
        initial_workers: '1',
        synchronous: 'true',
        response_timeout: String(responseTimeoutS),
      });
      const res = await request(`${urls.management}/models?${query}`, {
        method: 'POST',
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      const body = await res.body.text();
      if (res.statusCode !== 200)
        throw new Error(`registering ${lang}: ${res.statusCode} ${body}\n${modelServer.log()}`);
    }

    let frontKind: string | undefined;
    if (options.layers !== 'model-server') {
      const instances =
        options.routerInstances && options.routerInstances > 0 ? options.routerInstances : os.availableParallelism();
      const router = startProcess({
        name: `${options.name} router`,
        file: path.join(root, 'bench', `router-cluster.${ext}`),
        args: [String(instances)],
        execArgv: tsExecArgv(),
        cwd: root,
        logFile: path.join(logs, 'router.log'),
        env: {
          ...baseEnv,
          ROUTER_ADDRESS: '127.0.0.1:0',
          INFERENCE_ADDRESS: `127.0.0.1:${ports.inference}`,
          ROUTER_UPSTREAM_CONNECTIONS: '256',
          ...options.env,
        },
      });
      started.push(router);
      const routerLine = await router.waitForLine(/router cluster listening/, 60_000);
      urls.router = `http://127.0.0.1:${(JSON.parse(routerLine) as { port: number }).port}`;

      if (options.layers === 'front') {
        const frontPort = await freePort();
        const front = startProcess({
          name: `${options.name} front`,
          file: path.join(root, 'front', `main.${ext}`),
          execArgv: tsExecArgv(),
          cwd: root,
          logFile: path.join(logs, 'front.log'),
          env: {
            ...baseEnv,
            FRONT_ADDRESS: `127.0.0.1:${frontPort}`,
            ROUTER_ADDRESS: urls.router.replace('http://', ''),
            FRONT: options.front ?? 'auto',
            ...options.env,
          },
        });
        started.push(front);
        const frontLine = await front.waitForLine(/front listening/, 60_000);
        frontKind = (JSON.parse(frontLine) as { front?: string }).front;
        urls.front = `http://127.0.0.1:${frontPort}`;
      }
    }
    return new Stack(urls, started, frontKind);
  } catch (err) {
    for (const p of started.reverse()) await p.stop(3_000);
    throw err;
  }
}
