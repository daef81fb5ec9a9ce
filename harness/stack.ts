/**
 * @module harness/stack — the one stack starter of the tests, the bench and the soak: a whole mt-serve stack in
 * fresh processes — model server (its real entry, or the fault-drill entry when faults are asked for) with its
 * workers, router process(es) or a router cluster on one port, optionally a front (built-in proxy, nginx, or `auto`)
 * — with its own model store, setup_config.json, logs and run folder. The repository's `.env` plays no part:
 * processes run in the stack's folder and get every setting through their environment.
 *
 * Who runs the processes (`supervisor`):
 *   children  this process starts each one (harness/processes.ts), on a port of its own choosing reported over IPC
 *   pm2       a private pm2 daemon runs them as ecosystem.config.js does (harness/pm2.ts), on free ports fixed
 *             beforehand; `stack.pm2` runs pm2 commands against it
 *
 * `startMeasuredStack` is the same starter with the bench's defaults (every variable pinned, a router cluster, the
 * front a user gets): what a measurement needs, not a drill.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { request } from 'undici';
import { ENV_DEFAULTS } from '../common/config.js';
import { archiveModels } from '../model-server/tools/archiver.js';
import { jsonOrText } from './http.js';
import { privatePm2, pm2Apps, PM2, type Pm2 } from './pm2.js';
import { until } from './polling.js';
import { freePort } from './ports.js';
import type { ManagedProcess } from './process-registry.js';
import { entryFile } from './compiled.js';
import { isListening, nodeArgs, ROOT, startEntry } from './processes.js';

/** What a test stack runs with unless told otherwise: quiet logs, one onnxruntime thread, greedy 16-token outputs. */
export const TEST_ENV: Readonly<Record<string, string>> = {
  LOG_LEVEL: 'warn',
  INTRA_OP_THREADS: '1',
  // One text thread, not the default two: each costs ~1 s of CPU to start, and a stack's tests send little text.
  TEXT_THREADS: '1',
  NUM_BEAMS: '1',
  MAX_NEW_TOKENS: '16',
};

export interface StackOptions {
  /** Languages served (setup_config.json keys); each is a registered model. */
  languages: readonly string[];
  /** `echo` (plumbing, no model) or `translation` on `modelDir`. */
  handler: 'echo' | 'translation';
  /** The model folder for `translation` (a generated tiny model). */
  modelDir?: string;
  /**
   * Generate this demo model preset (`tiny`) into the stack's folder with the real CLI (scripts/make-demo-model.ts)
   * and serve it: the model folder, instead of `modelDir`.
   */
  demoModel?: string;
  /** Archive the store with the real CLI (`model-server/cli.ts archive`, as start.sh does) instead of in process. */
  archiveWithCli?: boolean;
  /** setup_config.json's device id per language (default "0" for each). */
  devices?: Readonly<Record<string, string>>;
  /**
   * Faults per language (harness/fault-worker.ts names); set → the fault-drill model server entry runs.
   * Languages with different faults need an engine each: ENGINE_SHARING=language in `env`.
   */
  faults?: Record<string, string>;
  /** `children` (default) or `pm2` (see the module doc). */
  supervisor?: 'children' | 'pm2';
  /**
   * Router processes, each on its own port (default 1; 0: none). Under pm2: the instances of the router app, in
   * cluster mode on one port.
   */
  routers?: number;
  /**
   * Instead of `routers`: one router port shared by this many instances (bench/router-cluster.ts, the node:cluster
   * mechanism pm2's cluster mode uses); 0: one per core.
   */
  routerCluster?: number;
  /** Start a front too; `auto` is nginx when installed, else the built-in proxy. */
  front?: 'builtin' | 'nginx' | 'auto';
  /** The environment every process starts from (default TEST_ENV); the stack's folders go over it, `env` over those. */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** Extra environment for every process (JOB_QUEUE_SIZE, RESPONSE_TIMEOUT_S, TOKEN_AUTH, LOG_LEVEL …). */
  env?: Readonly<Record<string, string>>;
  /** Register every language at start (default true) with these parameters. */
  register?: false | RegisterOptions;
  /**
   * Make the stack's folder here, named after `name` and numbered, and keep it after `stop` (the bench's run
   * folder); default a temp folder that `stop` removes.
   */
  workDir?: string;
  /** Names the folder and the processes (in logs and errors). */
  name?: string;
  /** How long registering one language may take, ms (default 300 s). */
  registerTimeoutMs?: number;
  /** How long each process may drain at `stop` before it is killed, ms (default 5 s). */
  stopGraceMs?: number;
}

export interface RegisterOptions {
  batchSize?: number;
  maxBatchDelayMs?: number;
  responseTimeoutS?: number;
  workers?: number;
}

/** What every stack has, whoever runs its processes. */
export interface StackBase {
  dir: string;
  store: string;
  /** The served model folder (an empty one for echo). */
  modelDir: string;
  inference: string;
  management: string;
  metrics: string;
  /** Base URL of each router port (one for a cluster). */
  routerUrls: string[];
  frontUrl: string | undefined;
  /** `nginx` or `builtin` when a front runs. */
  frontKind: string | undefined;
  /** The environment every process got (for restarting one). */
  env: Record<string, string>;
  /** Register one store entry; resolves with the management API's status and body. */
  register(
    name: string,
    options?: RegisterOptions,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: unknown }>;
  /** Stop every process (front first, model server last) and, unless under `workDir`, remove the folder. */
  stop(): Promise<void>;
}

/** A stack of child processes (`supervisor: 'children'`). */
export interface Stack extends StackBase {
  modelServer: ManagedProcess;
  routers: ManagedProcess[];
  front: ManagedProcess | undefined;
  /** Every process started, in start order (the roots for memory and CPU sampling). */
  processes: ManagedProcess[];
  /**
   * Start the model server again on the same ports (after it was stopped): it registers again what it served
   * (its snapshot in LOG_DIR/config); resolves once those models are ready.
   */
  restartModelServer(): Promise<void>;
}

/** A stack under a private pm2 (`supervisor: 'pm2'`). */
export interface Pm2Stack extends StackBase {
  pm2: Pm2;
}

interface ModelServerPorts {
  ports: { inference: number; management: number; metrics: number };
}

let stacksStarted = 0;

export function startStack(options: StackOptions & { supervisor: 'pm2' }): Promise<Pm2Stack>;
export function startStack(options: StackOptions & { supervisor?: 'children' }): Promise<Stack>;
export async function startStack(options: StackOptions): Promise<Stack | Pm2Stack> {
  const name = options.name ?? 'stack';
  let dir: string;
  if (options.workDir === undefined) {
    dir = mkdtempSync(path.join(tmpdir(), `mt-${name}-`));
  } else {
    // Numbered, so two stacks of the same name never share a store or logs.
    dir = path.join(options.workDir, `${String(++stacksStarted).padStart(2, '0')}-${name}`);
    mkdirSync(dir, { recursive: true });
  }
  const store = path.join(dir, 'model_store');
  const logs = path.join(dir, 'logs');
  const run = path.join(dir, 'run');
  for (const d of [store, logs, run]) mkdirSync(d, { recursive: true });
  const modelDir = options.demoModel
    ? path.join(dir, 'models', options.demoModel)
    : (options.modelDir ?? path.join(dir, 'no-model'));
  const setupConfig = path.join(dir, 'setup_config.json');
  const cudaId = Object.fromEntries(options.languages.map((l) => [l, options.devices?.[l] ?? '0']));
  writeFileSync(setupConfig, JSON.stringify({ cuda_id: cudaId }));
  const cli = (script: string, args: string[]) => {
    const file = entryFile(script);
    execFileSync(process.execPath, [...nodeArgs(file), path.join(ROOT, file), ...args], { cwd: dir, stdio: 'pipe' });
  };
  if (options.demoModel) cli('scripts/make-demo-model', [options.demoModel, modelDir, '--no-check']);
  else mkdirSync(modelDir, { recursive: true });
  if (options.archiveWithCli) {
    const args = ['archive', '--model-dir', modelDir, '--store', store, '--setup-config', setupConfig];
    cli('model-server/cli', [...args, '--handler', options.handler]);
  } else {
    archiveModels({ modelDir, store, names: options.languages, handler: options.handler });
  }

  const env = {
    ...(options.baseEnv ?? TEST_ENV),
    LOG_DIR: logs,
    RUN_DIR: run,
    MODEL_STORE: store,
    MODEL_DIR: modelDir,
    SETUP_CONFIG: setupConfig,
    KEY_FILE: path.join(dir, 'key_file.json'),
    ...(options.faults ? { MT_TEST_FAULTS: JSON.stringify(options.faults) } : {}),
    ...options.env,
  } as Record<string, string>;
  const modelServerEntry = entryFile(options.faults ? 'harness/model-server-with-faults' : 'model-server/main');
  const files = { dir, store, modelDir, env, modelServerEntry };
  const removeDir = () => {
    if (options.workDir === undefined) rmSync(dir, { recursive: true, force: true });
  };
  const registerAll = async (register: StackBase['register'], log: () => string) => {
    if (options.register === false) return;
    for (const lang of options.languages) {
      const res = await register(lang, options.register);
      if (res.status !== 200) {
        throw new Error(`registering ${lang}: ${res.status} ${JSON.stringify(res.body)}\n${log()}`);
      }
    }
  };
  const registerOn =
    (management: () => string) =>
    async (model: string, r: RegisterOptions = {}, headers = managementHeaders(env)) => {
      const query = new URLSearchParams({ url: model, synchronous: 'true' });
      if (r.batchSize !== undefined) query.set('batch_size', String(r.batchSize));
      if (r.maxBatchDelayMs !== undefined) query.set('max_batch_delay', String(r.maxBatchDelayMs));
      if (r.responseTimeoutS !== undefined) query.set('response_timeout', String(r.responseTimeoutS));
      if (r.workers !== undefined) query.set('initial_workers', String(r.workers));
      // A synchronous registration answers once the worker is ready: a large model on a busy host takes minutes.
      const timeoutMs = options.registerTimeoutMs ?? 300_000;
      const res = await request(`${management()}/models?${query}`, {
        method: 'POST',
        headers,
        headersTimeout: timeoutMs,
        bodyTimeout: timeoutMs,
      });
      return { status: res.statusCode, body: jsonOrText(await res.body.text()) };
    };

  if (options.supervisor === 'pm2') return startUnderPm2(options, files, registerOn, registerAll, removeDir);

  const started: ManagedProcess[] = [];
  const modelServers: ManagedProcess[] = [];
  const routers: ManagedProcess[] = [];
  const fronts: ManagedProcess[] = [];
  // Clients first: the front, then the routers, then the model server, so none is left sending to a stopped one.
  const cleanup = async () => {
    const graceMs = options.stopGraceMs ?? 5_000;
    for (const layer of [fronts, routers, modelServers]) await Promise.all(layer.map((p) => p.stop(graceMs)));
    removeDir();
  };

  const startModelServer = async (ports?: ModelServerPorts['ports']) => {
    const proc = startEntry({
      name: `${name} model-server`,
      entry: modelServerEntry,
      cwd: dir,
      logFile: path.join(logs, 'model-server.log'),
      appendLog: true,
      env: {
        ...env,
        INFERENCE_ADDRESS: `127.0.0.1:${ports?.inference ?? 0}`,
        MANAGEMENT_ADDRESS: `127.0.0.1:${ports?.management ?? 0}`,
        METRICS_ADDRESS: `127.0.0.1:${ports?.metrics ?? 0}`,
      },
    });
    started.push(proc);
    modelServers.push(proc);
    // model-server/main.ts says 'ready' once the models it restored from its snapshot have their workers.
    const ready = proc.message((m): m is 'ready' => m === 'ready', 120_000);
    ready.catch(() => undefined);
    const { ports: actual } = await proc.message(isListening<ModelServerPorts>, 60_000);
    return { proc, ports: actual, ready };
  };

  try {
    let ms = await startModelServer();
    const urls = () => ({
      inference: `http://127.0.0.1:${ms.ports.inference}`,
      management: `http://127.0.0.1:${ms.ports.management}`,
      metrics: `http://127.0.0.1:${ms.ports.metrics}`,
    });
    const register = registerOn(() => urls().management);
    await registerAll(register, () => ms.proc.log());

    const routerEnv = {
      ...env,
      ROUTER_ADDRESS: '127.0.0.1:0',
      INFERENCE_ADDRESS: `127.0.0.1:${ms.ports.inference}`,
      // Where the router reads the status page's figures (router/status.ts).
      METRICS_ADDRESS: `127.0.0.1:${ms.ports.metrics}`,
    };
    const routerUrls: string[] = [];
    const startRouter = async (routerName: string, entry: string, args?: string[]) => {
      const router = startEntry({
        name: `${name} ${routerName}`,
        entry,
        ...(args ? { args } : {}),
        cwd: dir,
        logFile: path.join(logs, `${routerName}.log`),
        env: routerEnv,
      });
      started.push(router);
      routers.push(router);
      const { port } = await router.message(isListening<{ port: number }>);
      routerUrls.push(`http://127.0.0.1:${port}`);
    };
    if (options.routerCluster !== undefined) {
      const instances = options.routerCluster > 0 ? options.routerCluster : availableParallelism();
      await startRouter('router', entryFile('bench/router-cluster'), [String(instances)]);
    } else {
      for (let i = 0; i < (options.routers ?? 1); i++) await startRouter(`router-${i}`, entryFile('router/main'));
    }

    let front: ManagedProcess | undefined;
    let frontUrl: string | undefined;
    let frontKind: string | undefined;
    if (options.front) {
      const f = await startFront({ dir, env, routerUrl: routerUrls[0]!, kind: options.front, name: 'front' });
      started.push(f.proc);
      fronts.push(f.proc);
      front = f.proc;
      frontUrl = f.url;
      frontKind = f.kind;
    }

    const stack: Stack = {
      dir,
      store,
      modelDir,
      modelServer: ms.proc,
      routers,
      front,
      frontKind,
      processes: started,
      ...urls(),
      routerUrls,
      frontUrl,
      env,
      register,
      async restartModelServer() {
        ms = await startModelServer(ms.ports);
        stack.modelServer = ms.proc;
        await ms.ready;
      },
      stop: cleanup,
    };
    return stack;
  } catch (err) {
    await cleanup();
    throw err;
  }
}

/**
 * A front of each of `kinds` before `stack`'s first router, in that order, each named `${namePrefix}${kind}` (its
 * log file and run folder); they are registered for `stopAll`.
 */
export async function startFronts(
  stack: StackBase,
  kinds: readonly ('builtin' | 'nginx')[],
  namePrefix = '',
): Promise<{ proc: ManagedProcess; url: string; kind: string }[]> {
  const fronts = [];
  for (const kind of kinds) {
    const base = { dir: stack.dir, env: stack.env, routerUrl: stack.routerUrls[0]! };
    fronts.push(await startFront({ ...base, kind, name: `${namePrefix}${kind}` }));
  }
  return fronts;
}

/** A stack of child processes with fronts before it: each front by its kind. */
export type StackWithFronts = Stack & { fronts: Record<string, { proc: ManagedProcess; url: string; kind: string }> };

/**
 * `startStack(options)` with a front of each of `kinds` before its first router (startFronts); its `stop()` stops
 * the fronts first. A front that fails to start stops the stack again.
 */
export async function startStackWithFronts(
  options: StackOptions & { supervisor?: 'children' },
  kinds: readonly ('builtin' | 'nginx')[],
): Promise<StackWithFronts> {
  const stack = await startStack(options);
  try {
    const fronts = await startFronts(stack, kinds);
    const stopStack = stack.stop;
    stack.stop = async () => {
      await Promise.all(fronts.map(({ proc }) => proc.stop()));
      await stopStack();
    };
    return Object.assign(stack, { fronts: Object.fromEntries(fronts.map((front) => [front.kind, front])) });
  } catch (err) {
    await stack.stop();
    throw err;
  }
}

/** The pm2 half of startStack: free ports fixed beforehand, the apps file, `pm2 start`, registration. */
async function startUnderPm2(
  options: StackOptions,
  files: { dir: string; store: string; modelDir: string; env: Record<string, string>; modelServerEntry: string },
  registerOn: (management: () => string) => StackBase['register'],
  registerAll: (register: StackBase['register'], log: () => string) => Promise<void>,
  removeDir: () => void,
): Promise<Pm2Stack> {
  const { dir, env } = files;
  const addresses = await fixedAddresses();
  Object.assign(env, addresses.env, options.front ? { FRONT: options.front } : {}, options.env);
  const pm2 = privatePm2(path.join(dir, 'pm2'));
  const appsFile = path.join(dir, 'apps.json');
  const apps = pm2Apps({
    dir,
    env,
    modelServerEntry: files.modelServerEntry,
    routerInstances: options.routers ?? 1,
  });
  writeFileSync(appsFile, JSON.stringify(apps));
  const stop = async () => {
    await pm2.kill();
    removeDir();
  };
  const log = () => {
    try {
      return readFileSync(path.join(dir, 'logs', 'model-server.log'), 'utf8').slice(-4_000);
    } catch {
      return '';
    }
  };
  try {
    const started = await pm2.run(PM2, ['start', appsFile]);
    if (started.code !== 0) throw new Error(`pm2 start failed: ${started.out}`);
    const { urls } = addresses;
    await until('the model server', () => answers(`${urls.inference}/ping`), 60_000);
    const stack: Pm2Stack = {
      dir,
      store: files.store,
      modelDir: files.modelDir,
      inference: urls.inference,
      management: urls.management,
      metrics: urls.metrics,
      routerUrls: [urls.router],
      frontUrl: options.front ? urls.front : undefined,
      frontKind: options.front,
      env,
      register: registerOn(() => urls.management),
      stop,
      pm2,
    };
    await registerAll(stack.register, log);
    if (options.front) await until('the front', () => answers(`${urls.front}/health`), 60_000);
    return stack;
  } catch (err) {
    await stop();
    throw err;
  }
}

/**
 * Five free ports fixed beforehand, as the environment of every process (INFERENCE_ADDRESS … FRONT_ADDRESS) and as
 * URLs: for processes that cannot report the port they chose (pm2's apps, start.sh).
 */
export async function fixedAddresses(): Promise<{
  env: Record<string, string>;
  urls: Record<'inference' | 'management' | 'metrics' | 'router' | 'front', string>;
}> {
  const [inference, management, metrics, router, front] = await Promise.all([1, 2, 3, 4, 5].map(() => freePort()));
  const url = (port: number | undefined) => `http://127.0.0.1:${port}`;
  return {
    env: {
      INFERENCE_ADDRESS: `127.0.0.1:${inference}`,
      MANAGEMENT_ADDRESS: `127.0.0.1:${management}`,
      METRICS_ADDRESS: `127.0.0.1:${metrics}`,
      ROUTER_ADDRESS: `127.0.0.1:${router}`,
      FRONT_ADDRESS: `127.0.0.1:${front}`,
    },
    urls: {
      inference: url(inference),
      management: url(management),
      metrics: url(metrics),
      router: url(router),
      front: url(front),
    },
  };
}

/**
 * Start a front process (front/main.ts) in `dir` before `routerUrl`; resolves once it listens. The caller stops it
 * (it is registered with the others for `stopAll`).
 */
export async function startFront(options: {
  dir: string;
  env: Record<string, string>;
  routerUrl: string;
  kind: 'builtin' | 'nginx' | 'auto';
  name: string;
}): Promise<{ proc: ManagedProcess; url: string; kind: string }> {
  const port = await freePort();
  const run = path.join(options.dir, `run-${options.name}`);
  const proc = startEntry({
    name: options.name,
    entry: entryFile('front/main'),
    cwd: options.dir,
    logFile: path.join(options.dir, 'logs', `${options.name}.log`),
    env: {
      ...options.env,
      RUN_DIR: run, // each front its own rendered nginx.conf and pid file
      FRONT: options.kind,
      FRONT_ADDRESS: `127.0.0.1:${port}`,
      ROUTER_ADDRESS: new URL(options.routerUrl).host,
    },
  });
  const { front } = await proc.message(isListening<{ front: string }>).catch(async (err: unknown) => {
    await proc.stop(1_000);
    throw err;
  });
  return { proc, url: `http://127.0.0.1:${port}`, kind: front };
}

/** The settings a measurement states; everything else is pinned to its default (ENV_DEFAULTS). */
export interface MeasuredStackOptions {
  /** Names this stack in logs, e.g. `serving-c64`. */
  name: string;
  /** Parent folder for this stack's store, logs and run files (kept). */
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
  /** How long registering one language may take (the 418M model loads in seconds per engine; 14 engines take longer). */
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

/**
 * startStack with the bench's defaults, for the bench and the soak: every variable of the configuration set
 * explicitly (its default unless stated), each language registered with one worker at the stated batch settings
 * and a response timeout no closed loop reaches, a router cluster on one port, the front a user gets (`auto`).
 */
export function startMeasuredStack(options: MeasuredStackOptions): Promise<Stack> {
  const responseTimeoutS = options.responseTimeoutS ?? 900;
  return startStack({
    name: options.name,
    workDir: options.workDir,
    modelDir: options.modelDir,
    languages: options.languages,
    ...(options.devices ? { devices: options.devices } : {}),
    handler: options.handler,
    baseEnv: {
      ...ENV_DEFAULTS,
      LOG_LEVEL: options.logLevel ?? 'info',
      RESPONSE_TIMEOUT_S: String(responseTimeoutS),
      QUEUE_BUDGET_MS: String(options.queueBudgetMs ?? (responseTimeoutS * 1000) / 2),
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
      ROUTER_UPSTREAM_CONNECTIONS: '256',
    },
    ...(options.env ? { env: options.env } : {}),
    register: {
      batchSize: options.batchSize,
      maxBatchDelayMs: options.maxBatchDelayMs,
      workers: 1,
      responseTimeoutS,
    },
    registerTimeoutMs: options.startTimeoutMs ?? 10 * 60_000,
    stopGraceMs: 10_000,
    ...(options.layers === 'model-server' ? { routers: 0 } : { routerCluster: options.routerInstances ?? 0 }),
    ...(options.layers === 'front' ? { front: options.front ?? 'auto' } : {}),
  });
}

/** Whether `url` answers 200 now. */
export function answers(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.ok,
    () => false,
  );
}

/** The generated keys (TOKEN_AUTH=true), read from the key file the model server writes at start. */
export function apiKeys(env: Record<string, string>): { inference: string; management: string } {
  const file = JSON.parse(readFileSync(env.KEY_FILE!, 'utf8')) as Record<'inference' | 'management', { key: string }>;
  return { inference: file.inference.key, management: file.management.key };
}

/** `Authorization` for the management API when token authorization is on, else nothing. */
export function managementHeaders(env: Record<string, string>): Record<string, string> {
  return env.TOKEN_AUTH === 'true' ? { authorization: `Bearer ${apiKeys(env).management}` } : {};
}

/** A translation body for the router and the front. */
export const translateBody = (tgt: string, text: string | string[], src = 'en') =>
  JSON.stringify({ src_lang: src, src_text: text, tgt_lang: tgt });
