/**
 * @module test/reliability/support/processes — the stack's entry points as real child processes, for the
 * reliability tests and the soak: from source through the tsx loader, each in its own process group (so a stop
 * reaches the workers it spawned), output to a log file (never through the test's event loop), readiness from
 * what the process reports over IPC, never from sleeps. Every process started is registered; `stopAll()` ends
 * what is still running and `afterAll` hooks call it, so no test leaves a server behind.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('../../..', import.meta.url));
/** The tsx loader by absolute URL (`--import tsx` would resolve against the child's cwd). */
export const TSX = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface StartOptions {
  /** Shown in errors, e.g. `router`. */
  name: string;
  /** Entry point relative to the repository root, e.g. `router/main.ts`. */
  entry: string;
  /** The child's whole environment besides PATH and HOME: nothing else leaks in from the test runner. */
  env: Record<string, string>;
  cwd: string;
  /** Receives the child's stdout and stderr. */
  logFile: string;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

const running = new Set<Proc>();

/** One started process (group). */
export class Proc {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Resolves when the process exits. */
  readonly exited: Promise<ExitInfo>;
  #exit: ExitInfo | undefined;

  constructor(options: StartOptions) {
    this.name = options.name;
    this.logFile = options.logFile;
    const fd = openSync(options.logFile, 'a');
    try {
      this.child = fork(path.join(ROOT, options.entry), [], {
        cwd: options.cwd,
        execArgv: ['--import', TSX],
        env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
        stdio: ['ignore', fd, fd, 'ipc'],
        detached: true, // its own process group: stop() reaches the workers it forks
      });
    } finally {
      closeSync(fd);
    }
    running.add(this);
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.#exit = { code, signal };
        running.delete(this);
        resolve(this.#exit);
      });
    });
  }

  get pid(): number {
    return this.child.pid!;
  }

  get alive(): boolean {
    return this.#exit === undefined;
  }

  /** The log so far (last `maxChars` characters). */
  log(maxChars = 4000): string {
    return existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8').slice(-maxChars) : '';
  }

  /** The first IPC message that `match` accepts; rejects when the process exits first or after `timeoutMs`. */
  message<T>(match: (m: unknown) => m is T, timeoutMs = 60_000): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const onMessage = (m: unknown) => {
        if (!match(m)) return;
        cleanup();
        resolve(m);
      };
      const timer = setTimeout(() => {
        cleanup();
        reject(new Error(`${this.name}: no expected message within ${timeoutMs} ms\n${this.log()}`));
      }, timeoutMs);
      const cleanup = () => {
        clearTimeout(timer);
        this.child.off('message', onMessage);
      };
      this.child.on('message', onMessage);
      void this.exited.then((info) => {
        cleanup();
        reject(new Error(`${this.name} exited (${info.code ?? info.signal}) before reporting\n${this.log()}`));
      });
    });
  }

  /** Signal the main process only (SIGTERM: a drain; SIGKILL: a crash that leaves its workers orphaned). */
  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.child.kill(signal);
  }

  /** SIGKILL the whole process group. */
  killGroup(): void {
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }

  /** SIGTERM, wait up to `timeoutMs` for the exit, then SIGKILL the group (its workers included). */
  async stop(timeoutMs = 10_000): Promise<ExitInfo> {
    if (this.alive) {
      this.signal('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
      await Promise.race([this.exited, late]);
      clearTimeout(timer);
    }
    this.killGroup();
    return this.exited;
  }
}

export function startProcess(options: StartOptions): Proc {
  return new Proc(options);
}

/** Kill every process group still running (afterAll, and the soak's exit path). */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((p) => p.stop(5_000)));
}

/** `{type: 'listening', …}`: what the router, the front and the model server report over IPC. */
export function isListening<T extends object>(m: unknown): m is { type: 'listening' } & T {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'listening';
}

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

/** Polls `check` (state another process changes) every 20 ms until it returns a truthy value; throws after `timeoutMs`. */
export async function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 15_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
