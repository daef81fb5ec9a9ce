/**
 * @module harness/pm2 — a private pm2 for a test: its own PM2_HOME (so a user's pm2 is never touched; `kill()` ends
 * the daemon and its apps), commands run in the repository with that environment, and the stack's three apps with
 * ecosystem.config.js's settings (model server in fork mode, the router in cluster mode with wait_ready, the front;
 * their drain budgets), run from the build when it is current and from source through tsx otherwise
 * (harness/compiled.ts), so a drill needs no build. harness/stack.ts starts a stack under
 * it (`supervisor: 'pm2'`); the start.sh suite (test/e2e/pm2-operations.ts) runs the real scripts with it.
 */
import { execFile } from 'node:child_process';
import path from 'node:path';
import { entryFile } from './compiled.js';
import { nodeArgs, ROOT } from './processes.js';

export const PM2 = path.join(ROOT, 'node_modules/.bin/pm2');

export interface Pm2Process {
  name: string;
  pid: number;
  pm2_env: { status: string; restart_time: number };
}

export interface CommandResult {
  /** Exit code; 1 when it could not run or was killed at its deadline. */
  code: number;
  stdout: string;
  stderr: string;
  /** stdout and stderr, for messages. */
  out: string;
}

export interface Pm2 {
  /** The environment of pm2 commands (PATH, HOME, PM2_HOME and what the caller added). */
  env: NodeJS.ProcessEnv;
  /** Run a command in the repository with `env`; never rejects. */
  run(file: string, args: string[], timeoutMs?: number): Promise<CommandResult>;
  jlist(): Promise<Pm2Process[]>;
  /** End the daemon and its apps. */
  kill(): Promise<void>;
}

/** A pm2 whose daemon lives in `home`, its commands run with `env` besides PATH, HOME and PM2_HOME. */
export function privatePm2(home: string, env: NodeJS.ProcessEnv = {}): Pm2 {
  const fullEnv: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, PM2_HOME: home, ...env };
  const run = (file: string, args: string[], timeoutMs = 60_000) =>
    new Promise<CommandResult>((resolve) =>
      execFile(
        file,
        args,
        { cwd: ROOT, env: fullEnv, timeout: timeoutMs, maxBuffer: 16 << 20 },
        (err, stdout, stderr) =>
          resolve({
            code: err ? Number((err as { code?: number }).code ?? 1) : 0,
            stdout,
            stderr,
            out: stdout + stderr,
          }),
      ),
    );
  return {
    env: fullEnv,
    run,
    jlist: async () => JSON.parse((await run(PM2, ['jlist'])).stdout) as Pm2Process[],
    kill: async () => void (await run(PM2, ['kill'], 30_000)),
  };
}

export interface Pm2AppsOptions {
  /** The apps' working folder; logs go to its logs/. */
  dir: string;
  /** Every app's environment. */
  env: Record<string, string>;
  /** The model server's entry (relative to the repository root). */
  modelServerEntry: string;
  routerInstances: number;
}

/** The apps file (`pm2 start <file>`) for the stack's three apps, as ecosystem.config.js defines them. */
export function pm2Apps(options: Pm2AppsOptions): { apps: object[] } {
  const { dir } = options;
  const app = (name: string, file: string) => ({
    name,
    script: path.join(ROOT, 'harness/pm2-entry.js'),
    env: { ...options.env, MT_ENTRY: path.join(ROOT, file) },
    cwd: dir,
    node_args: nodeArgs(file),
    merge_logs: true,
    out_file: path.join(dir, 'logs', `${name}.log`),
    error_file: path.join(dir, 'logs', `${name}.log`),
  });
  // ecosystem.config.js's settings: fork / cluster ×N with wait_ready / fork, and the drain budgets.
  return {
    apps: [
      {
        ...app('model-server', options.modelServerEntry),
        exec_mode: 'fork',
        kill_timeout: 35_000,
        max_restarts: 10,
        min_uptime: 5_000,
      },
      {
        ...app('router', entryFile('router/main')),
        exec_mode: 'cluster',
        instances: options.routerInstances,
        wait_ready: true,
        listen_timeout: 15_000,
        kill_timeout: 130_000,
      },
      {
        ...app('front', entryFile('front/main')),
        exec_mode: 'fork',
        wait_ready: true,
        listen_timeout: 20_000,
        kill_timeout: 30_000,
        treekill: false,
      },
    ],
  };
}
