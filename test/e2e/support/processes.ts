/**
 * @module test/e2e/support/processes — starting the stack's real entry points as child processes for tests:
 * from source through the tsx loader, in a temp cwd (no stray `.env`), with only the environment given, and
 * waiting on what they report over IPC rather than on sleeps.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** The tsx loader by absolute URL (`--import tsx` would resolve against the child's cwd). */
export const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface Child {
  process: ChildProcess;
  /** Resolves with the exit code (or the signal name) when the process ends. */
  exited: Promise<number | string>;
  /** Everything it wrote to stdout and stderr so far. */
  output(): string;
  /** Resolves with the first IPC message that matches; rejects if the process exits first or after `timeoutMs`. */
  message<T>(match: (m: unknown) => m is T, timeoutMs?: number): Promise<T>;
  /** SIGKILL if still running. */
  kill(): void;
  /**
   * SIGTERM, and SIGKILL after `timeoutMs` if it has not exited; resolves once it has. Use it for processes
   * that own children of their own (the front's nginx), which a SIGKILL would orphan.
   */
  stop(timeoutMs?: number): Promise<void>;
}

/** Fork `entry` (a path under ROOT, `.ts`) with the tsx loader, cwd `cwd` and exactly `env` (plus PATH, HOME). */
export function startEntry(entry: string, cwd: string, env: Record<string, string>): Child {
  let output = '';
  const child = fork(fileURLToPath(new URL(entry, pathToFileURL(ROOT + '/'))), [], {
    cwd,
    execArgv: ['--import', TSX],
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  child.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | string>((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal ?? 'unknown')),
  );
  return {
    process: child,
    exited,
    output: () => output,
    message<T>(match: (m: unknown) => m is T, timeoutMs = 30_000) {
      return new Promise<T>((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no matching message within ${timeoutMs} ms:\n${output}`)),
          timeoutMs,
        );
        child.on('message', (m) => {
          if (match(m)) {
            clearTimeout(timer);
            resolve(m);
          }
        });
        void exited.then((code) => {
          clearTimeout(timer);
          reject(new Error(`${entry} exited (${code}) before reporting:\n${output}`));
        });
      });
    },
    kill: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
    stop: async (timeoutMs = 10_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** A `{type: 'listening', port}` IPC message, as the router, the front and the model server send. */
export const isListening = (m: unknown): m is { type: 'listening'; port: number; front?: string } =>
  typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'listening';

/**
 * A port free right now, for processes that cannot report theirs (nginx, pm2 cluster instances). The OS does
 * not hand the same ephemeral port out again at once, so the window for a clash is small.
 */
export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

/** Polls `condition` (state another process changes) every 20 ms; throws after `timeoutMs`. */
export async function waitFor(
  condition: () => boolean | Promise<boolean>,
  timeoutMs = 10_000,
  what = 'condition',
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`${what} not met within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
