/**
 * @module harness/stack — a whole mt-serve stack in fresh processes for one test file (the e2e, reliability
 * and browser tests): model server (its real entry, or the fault-drill entry when faults are asked for) with its
 * workers, router process(es), optionally a front (built-in proxy or nginx), each on a port of its own choosing
 * (reported over IPC), with a temp model store, setup_config.json, logs and run folder. The repository's `.env`
 * plays no part: processes run in the temp folder and get every setting through their environment.
 *
 * The bench and the soak start their stacks with bench/lib/stack.ts instead: a router cluster on one port, every
 * variable pinned to its default, the front pm2 would run — what a measurement needs, not a drill.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort, type ManagedProcess } from './process-registry.js';
import { archiveModels } from '../model-server/tools/archiver.js';
import { isListening, ROOT, startEntry, TSX } from './processes.js';

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
  /** Router processes, each on its own port (default 1; 0: none). */
  routers?: number;
  /** Start a front too. */
  front?: 'builtin' | 'nginx';
  /** Extra environment for every process (JOB_QUEUE_SIZE, RESPONSE_TIMEOUT_S, TOKEN_AUTH, LOG_LEVEL …). */
  env?: Record<string, string>;
  /** Register every language at start (default true) with these parameters. */
  register?: false | RegisterOptions;
}

export interface RegisterOptions {
  batchSize?: number;
  maxBatchDelayMs?: number;
  responseTimeoutS?: number;
  workers?: number;
}

export interface Stack {
  dir: string;
  store: string;
  /** The served model folder (an empty one for echo). */
  modelDir: string;
  modelServer: ManagedProcess;
  routers: ManagedProcess[];
  front: ManagedProcess | undefined;
  frontKind: string | undefined;
  inference: string;
  management: string;
  metrics: string;
  /** Base URL of each router process. */
  routerUrls: string[];
  frontUrl: string | undefined;
  /** The environment every process got (for restarting one). */
  env: Record<string, string>;
  /** Register one store entry; resolves with the management API's status and body. */
  register(
    name: string,
    options?: RegisterOptions,
    headers?: Record<string, string>,
  ): Promise<{ status: number; body: unknown }>;
  /**
   * Start the model server again on the same ports (after it was stopped): it registers again what it served
   * (its snapshot in LOG_DIR/config); resolves once those models are ready.
   */
  restartModelServer(): Promise<void>;
  stop(): Promise<void>;
}

interface ModelServerPorts {
  ports: { inference: number; management: number; metrics: number };
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-reliability-'));
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
  const cli = (script: string, args: string[]) =>
    execFileSync(process.execPath, ['--import', TSX, path.join(ROOT, script), ...args], { cwd: dir, stdio: 'pipe' });
  if (options.demoModel) cli('scripts/make-demo-model.ts', [options.demoModel, modelDir, '--no-check']);
  else mkdirSync(modelDir, { recursive: true });
  if (options.archiveWithCli) {
    const args = ['archive', '--model-dir', modelDir, '--store', store, '--setup-config', setupConfig];
    cli('model-server/cli.ts', [...args, '--handler', options.handler]);
  } else {
    archiveModels({ modelDir, store, names: options.languages, handler: options.handler });
  }

  const env: Record<string, string> = {
    LOG_LEVEL: 'warn',
    LOG_DIR: logs,
    RUN_DIR: run,
    MODEL_STORE: store,
    MODEL_DIR: modelDir,
    SETUP_CONFIG: setupConfig,
    KEY_FILE: path.join(dir, 'key_file.json'),
    INTRA_OP_THREADS: '1',
    NUM_BEAMS: '1',
    MAX_NEW_TOKENS: '16',
    ...options.env,
  };
  const register = options.register === false ? undefined : (options.register ?? {});
  const started: ManagedProcess[] = [];
  const cleanup = async () => {
    await Promise.all(started.map((p) => p.stop(5_000)));
    rmSync(dir, { recursive: true, force: true });
  };

  const startModelServer = async (ports?: ModelServerPorts['ports']) => {
    const proc = startEntry({
      name: 'model-server',
      entry: options.faults ? 'harness/model-server-with-faults.ts' : 'model-server/main.ts',
      cwd: dir,
      logFile: path.join(logs, 'model-server.log'),
      appendLog: true,
      env: {
        ...env,
        INFERENCE_ADDRESS: `127.0.0.1:${ports?.inference ?? 0}`,
        MANAGEMENT_ADDRESS: `127.0.0.1:${ports?.management ?? 0}`,
        METRICS_ADDRESS: `127.0.0.1:${ports?.metrics ?? 0}`,
        ...(options.faults ? { MT_TEST_FAULTS: JSON.stringify(options.faults) } : {}),
      },
    });
    started.push(proc);
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
    const registerOne = async (name: string, r: RegisterOptions = {}, headers = managementHeaders(env)) => {
      const query = new URLSearchParams({ url: name, synchronous: 'true' });
      if (r.batchSize !== undefined) query.set('batch_size', String(r.batchSize));
      if (r.maxBatchDelayMs !== undefined) query.set('max_batch_delay', String(r.maxBatchDelayMs));
      if (r.responseTimeoutS !== undefined) query.set('response_timeout', String(r.responseTimeoutS));
      if (r.workers !== undefined) query.set('initial_workers', String(r.workers));
      const res = await fetch(`${urls().management}/models?${query}`, { method: 'POST', headers });
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // keep the text
      }
      return { status: res.status, body };
    };
    const registerAll = async () => {
      if (register === undefined) return;
      for (const lang of options.languages) {
        const res = await registerOne(lang, register);
        if (res.status !== 200) throw new Error(`registering ${lang}: ${res.status} ${JSON.stringify(res.body)}`);
      }
    };
    await registerAll();

    const routers: ManagedProcess[] = [];
    const routerUrls: string[] = [];
    for (let i = 0; i < (options.routers ?? 1); i++) {
      const router = startEntry({
        name: `router-${i}`,
        entry: 'router/main.ts',
        cwd: dir,
        logFile: path.join(logs, `router-${i}.log`),
        env: {
          ...env,
          ROUTER_ADDRESS: '127.0.0.1:0',
          INFERENCE_ADDRESS: `127.0.0.1:${ms.ports.inference}`,
          // Where the router reads the status page's figures (router/status.ts).
          METRICS_ADDRESS: `127.0.0.1:${ms.ports.metrics}`,
        },
      });
      started.push(router);
      routers.push(router);
      const { port } = await router.message(isListening<{ port: number }>);
      routerUrls.push(`http://127.0.0.1:${port}`);
    }

    let front: ManagedProcess | undefined;
    let frontUrl: string | undefined;
    let frontKind: string | undefined;
    if (options.front) {
      const f = await startFront({ dir, env, routerUrl: routerUrls[0]!, kind: options.front, name: 'front' });
      started.push(f.proc);
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
      ...urls(),
      routerUrls,
      frontUrl,
      env,
      register: registerOne,
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
 * Start a front process (front/main.ts) in `dir` before `routerUrl`; resolves once it listens. The caller stops it
 * (it is registered with the others for `stopAll`).
 */
export async function startFront(options: {
  dir: string;
  env: Record<string, string>;
  routerUrl: string;
  kind: 'builtin' | 'nginx';
  name: string;
}): Promise<{ proc: ManagedProcess; url: string; kind: string }> {
  const port = await freePort();
  const run = path.join(options.dir, `run-${options.name}`);
  const proc = startEntry({
    name: options.name,
    entry: 'front/main.ts',
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
