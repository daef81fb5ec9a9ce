/**
 * @module harness/pm2-apps — the stack's three apps under pm2 with ecosystem.config.js's settings (model
 * server in fork mode, the router in cluster mode with wait_ready, the front; their drain budgets), run from
 * source through tsx so a drill needs no build. The model server is the fault-drill entry (echo handler, faults
 * from MT_TEST_FAULTS). Everything is private to the caller: a temp PM2_HOME (`kill()` ends its daemon and
 * removes the folder), temp folders, free ports. Nothing is registered: the caller does what `npm start` would.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { archiveModels } from '../model-server/tools/archiver.js';
import { freePort } from './process-registry.js';
import { until } from './polling.js';
import { ROOT, TSX } from './processes.js';

export const PM2 = path.join(ROOT, 'node_modules/.bin/pm2');

export interface Pm2Process {
  name: string;
  pid: number;
  pm2_env: { status: string; restart_time: number };
}

export interface Pm2AppsOptions {
  /** Temp folder name prefix. */
  prefix: string;
  front: 'builtin' | 'nginx';
  routerInstances: number;
  /** Store entries (echo handler); each is a language of setup_config.json. */
  languages: string[];
  /** More environment for every app (LOG_LEVEL, MT_TEST_FAULTS, RESPONSE_TIMEOUT_S, …). */
  env?: Record<string, string>;
}

export interface Pm2Apps {
  dir: string;
  /** The environment of pm2 commands (its PM2_HOME). */
  env: NodeJS.ProcessEnv;
  urls: { front: string; router: string; management: string; inference: string };
  /** Run a command in the repository with `env`; never rejects. */
  run(file: string, args: string[], timeoutMs?: number): Promise<{ code: number; out: string }>;
  jlist(): Promise<Pm2Process[]>;
  /** End the pm2 daemon and its apps; remove the folder. */
  kill(): Promise<void>;
}

/** Start the apps; resolves once the model server answers `/ping`. */
export async function startPm2Apps(options: Pm2AppsOptions): Promise<Pm2Apps> {
  const dir = mkdtempSync(path.join(tmpdir(), `${options.prefix}-`));
  const store = path.join(dir, 'model_store');
  const modelDir = path.join(dir, 'no-model');
  mkdirSync(modelDir);
  archiveModels({ modelDir, store, names: options.languages, handler: 'echo' });
  const setupConfig = path.join(dir, 'setup_config.json');
  writeFileSync(setupConfig, JSON.stringify({ cuda_id: Object.fromEntries(options.languages.map((l) => [l, '0'])) }));
  const [inference, management, metrics, router, front] = await Promise.all([1, 2, 3, 4, 5].map(() => freePort()));
  const urls = {
    front: `http://127.0.0.1:${front}`,
    router: `http://127.0.0.1:${router}`,
    management: `http://127.0.0.1:${management}`,
    inference: `http://127.0.0.1:${inference}`,
  };
  const appEnv = {
    MODEL_STORE: store,
    MODEL_DIR: modelDir,
    SETUP_CONFIG: setupConfig,
    LOG_DIR: path.join(dir, 'logs'),
    RUN_DIR: path.join(dir, 'run'),
    INFERENCE_ADDRESS: `127.0.0.1:${inference}`,
    MANAGEMENT_ADDRESS: `127.0.0.1:${management}`,
    METRICS_ADDRESS: `127.0.0.1:${metrics}`,
    ROUTER_ADDRESS: `127.0.0.1:${router}`,
    FRONT_ADDRESS: `127.0.0.1:${front}`,
    FRONT: options.front,
    ...options.env,
  };
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, PM2_HOME: path.join(dir, 'pm2') };
  const run = (file: string, args: string[], timeoutMs = 60_000) =>
    new Promise<{ code: number; out: string }>((resolve) =>
      execFile(file, args, { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
  const entry = (file: string) => ({
    script: path.join(ROOT, 'harness/pm2-entry.js'),
    env: { ...appEnv, MT_ENTRY: path.join(ROOT, file) },
  });
  const common = { cwd: dir, node_args: ['--import', TSX], merge_logs: true };
  const logs = (name: string) => ({
    out_file: path.join(dir, 'logs', `${name}.log`),
    error_file: path.join(dir, 'logs', `${name}.log`),
  });
  // ecosystem.config.js's settings: fork / cluster ×N with wait_ready / fork, and the drain budgets.
  const apps = [
    {
      name: 'model-server',
      ...entry('harness/model-server-with-faults.ts'),
      exec_mode: 'fork',
      kill_timeout: 35_000,
      max_restarts: 10,
      min_uptime: 5_000,
      ...common,
      ...logs('model-server'),
    },
    {
      name: 'router',
      ...entry('router/main.ts'),
      exec_mode: 'cluster',
      instances: options.routerInstances,
      wait_ready: true,
      listen_timeout: 15_000,
      kill_timeout: 130_000,
      ...common,
      ...logs('router'),
    },
    {
      name: 'front',
      ...entry('front/main.ts'),
      exec_mode: 'fork',
      wait_ready: true,
      listen_timeout: 20_000,
      kill_timeout: 30_000,
      treekill: false,
      ...common,
      ...logs('front'),
    },
  ];
  const file = path.join(dir, 'apps.json');
  writeFileSync(file, JSON.stringify({ apps }));
  const kill = async () => {
    await run(PM2, ['kill'], 30_000);
    rmSync(dir, { recursive: true, force: true });
  };
  const started = await run(PM2, ['start', file]);
  if (started.code !== 0) {
    await kill();
    throw new Error(`pm2 start failed: ${started.out}`);
  }
  await until('the model server', () => answers(`${urls.inference}/ping`), 60_000);
  return {
    dir,
    env,
    urls,
    run,
    jlist: async () => JSON.parse((await run(PM2, ['jlist'])).out) as Pm2Process[],
    kill,
  };
}

/** Whether `url` answers 200 now. */
export function answers(url: string): Promise<boolean> {
  return fetch(url).then(
    (r) => r.ok,
    () => false,
  );
}
