/**
 * @module harness/process-registry — every process the benchmark, the soak (scripts/soak.ts) and the process tests
 * (harness/processes.ts) start, and the guarantee that none outlives them.
 *
 * Each server runs in a fresh child process, in its own process group (`detached`), so stopping it also stops
 * whatever it spawned (workers, router instances). Output goes to a log file, never through this process. A server
 * is ready when it says so: a log line (`waitForLine`) or, with `ipc`, a message (`message`). Every group is
 * recorded in one registry; `stopAll()` runs at the end of a run (or in a test file's `afterAll`), and
 * `installCleanup()` makes Ctrl-C, SIGTERM, an uncaught error or a plain exit kill every group that is still
 * alive — nothing started here is left behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import {
  appendFileSync,
  closeSync,
  existsSync,
  mkdtempSync,
  openSync,
  readFileSync,
  readSync,
  rmSync,
  statSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { request } from 'undici';
import { parentMap, processTree } from './proc-tree.js';

export interface StartOptions {
  /** Shown in logs and errors, e.g. `model-server`. */
  name: string;
  /** Script to run with node. */
  file: string;
  args?: string[];
  /** Node flags (the tsx loader for .ts entries, `--cpu-prof` …). */
  execArgv?: string[];
  /** Environment of the child; the parent's environment is NOT inherited beyond PATH/HOME unless given. */
  env?: Record<string, string | undefined>;
  cwd?: string;
  /** File that receives the child's stdout and stderr. */
  logFile: string;
  /** Append to `logFile` (a restarted server keeps one log) instead of starting it afresh. */
  appendLog?: boolean;
  /** Open an IPC channel (servers that report `listening` over IPC, as to pm2). */
  ipc?: boolean;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** A started server process (group). */
export class ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Resolves when the process has exited (a spawn failure counts: code -1). */
  readonly exited: Promise<ExitInfo>;
  #exit: ExitInfo | undefined;

  constructor(options: StartOptions) {
    this.name = options.name;
    this.logFile = options.logFile;
    // Output goes straight to a file, not through this process: a busy load generator must never be the
    // reader a server's logging waits on.
    // A fresh file unless asked to append: waitForLine must never find an announcement left by an earlier process.
    const fd = openSync(options.logFile, options.appendLog ? 'a' : 'w');
    try {
      this.child = spawn(process.execPath, [...(options.execArgv ?? []), options.file, ...(options.args ?? [])], {
        cwd: options.cwd,
        env: options.env as NodeJS.ProcessEnv,
        detached: true, // own process group: stop() reaches everything it spawns
        stdio: options.ipc ? ['ignore', fd, fd, 'ipc'] : ['ignore', fd, fd],
      });
    } finally {
      closeSync(fd);
    }
    this.exited = new Promise((resolve) => {
      const exit = (info: ExitInfo) => {
        if (this.#exit !== undefined) return;
        this.#exit = info;
        resolve(info);
      };
      this.child.once('exit', (code, signal) => exit({ code, signal }));
      this.child.once('error', (err) => {
        appendFileSync(options.logFile, `spawn error: ${err.message}\n`);
        exit({ code: -1, signal: null });
      });
    });
    registry.add(this);
  }

  get pid(): number {
    return this.child.pid ?? -1;
  }

  /** False once the process has exited. */
  get alive(): boolean {
    return this.#exit === undefined;
  }

  /** The last `maxBytes` of its output, for error messages. */
  log(maxBytes = 4_000): string {
    return readTail(this.logFile, maxBytes);
  }

  /** How it ended, for messages: the exit code or the signal. */
  #ending(): string {
    return String(this.#exit?.code ?? this.#exit?.signal ?? 'running');
  }

  /**
   * Resolves with the first output line matching `pattern` (servers announce their ports in a log line);
   * rejects with the output so far when the process exits first or after `timeoutMs`.
   */
  async waitForLine(pattern: RegExp, timeoutMs: number): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = existsSync(this.logFile) ? readFileSync(this.logFile, 'utf8') : '';
      const line = text.split('\n').find((l) => pattern.test(l));
      if (line !== undefined) return line;
      if (!this.alive)
        throw new Error(`${this.name} exited (${this.#ending()}) before printing ${pattern}:\n${this.log()}`);
      if (Date.now() > deadline)
        throw new Error(`${this.name} did not print ${pattern} within ${timeoutMs} ms:\n${this.log()}`);
      await delay(100);
    }
  }

  /**
   * The first IPC message (`ipc` processes) that `match` accepts; rejects with the output so far when the process
   * exits first or after `timeoutMs`.
   */
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
      void this.exited.then(() => {
        cleanup();
        reject(new Error(`${this.name} exited (${this.#ending()}) before reporting\n${this.log()}`));
      });
    });
  }

  /** Signal the leader only (SIGTERM: its own drain; SIGKILL: a crash that leaves its children orphaned). */
  signal(signal: NodeJS.Signals): void {
    if (this.alive) this.child.kill(signal);
  }

  /** SIGKILL the whole process group. */
  killGroup(): void {
    signalGroup(this.pid, 'SIGKILL');
  }

  /**
   * SIGTERM the leader (it drains and stops what it started, as under pm2), SIGKILL the group after `graceMs`,
   * and whatever of its tree outlived the leader. Idempotent; resolves with how the leader exited.
   */
  async stop(graceMs = 5_000): Promise<ExitInfo> {
    // Descendants that left the group (a daemon, a detached worker) are found by ancestry before the leader
    // exits and they get re-parented out of reach.
    const tree = this.alive ? processTree(this.pid, parentMap()) : [];
    if (this.alive) {
      this.signal('SIGTERM');
      const killed = delay(graceMs, 'timeout' as const);
      if ((await Promise.race([this.exited, killed])) === 'timeout') signalGroup(this.pid, 'SIGKILL');
      await this.exited;
    }
    // Children that outlived a graceful leader exit (a worker mid-step) must not survive it.
    signalGroup(this.pid, 'SIGKILL');
    if (tree.length > 1) {
      // Only pids still in that tree (or orphaned to init), so a recycled pid is never hit.
      const inTree = new Set(tree);
      for (const [pid, ppid] of parentMap()) if (inTree.has(pid) && (inTree.has(ppid) || ppid === 1)) killPid(pid);
    }
    registry.delete(this);
    return this.exited;
  }
}

const registry = new Set<ManagedProcess>();

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  if (pid <= 0) return;
  try {
    process.kill(-pid, signal);
  } catch {
    // ESRCH: the group is already gone
  }
}

function readTail(file: string, bytes: number): string {
  try {
    const size = statSync(file).size;
    const fd = openSync(file, 'r');
    try {
      const buffer = Buffer.alloc(Math.min(bytes, size));
      readSync(fd, buffer, 0, buffer.length, size - buffer.length);
      return buffer.toString('utf8');
    } finally {
      closeSync(fd);
    }
  } catch {
    return '';
  }
}

function killPid(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Start a server process (see StartOptions); it is stopped by `stopAll()` or on exit at the latest. */
export function startProcess(options: StartOptions): ManagedProcess {
  if (profileDir === undefined) return new ManagedProcess(options);
  // As node flags, not NODE_OPTIONS (Node 20 refuses --cpu-prof there). The processes these start pass them on:
  // cluster instances inherit execArgv, and the model server hands its --cpu-prof flags to its workers.
  const flags = ['--cpu-prof', `--cpu-prof-dir=${profileDir}`];
  return new ManagedProcess({ ...options, execArgv: [...(options.execArgv ?? []), ...flags] });
}

let profileDir: string | undefined;

/**
 * Make every process started from now on write a V8 CPU profile (`--cpu-prof`) into `dir` when it exits
 * (`npm run bench -- --profile`); open them in Chrome DevTools or speedscope.
 */
export function profileProcessesInto(dir: string): void {
  profileDir = dir;
}

/** Stop every process this benchmark started and has not stopped yet. */
export async function stopAll(): Promise<void> {
  await Promise.all([...registry].map((p) => p.stop(3_000)));
}

/** SIGKILL every group still registered, synchronously (the last thing a process does on its way out). */
export function killAll(): void {
  for (const p of registry) signalGroup(p.pid, 'SIGKILL');
}

let cleanupInstalled = false;

/**
 * Kill every started group on Ctrl-C, SIGTERM, SIGHUP, an uncaught exception or process exit. `onSignal` runs
 * first on a signal (e.g. to abort the load generator and write a partial report) and may take up to
 * `graceMs`; then the groups are killed and the process exits 130.
 */
export function installCleanup(onSignal?: () => Promise<void> | void, graceMs = 10_000): void {
  if (cleanupInstalled) return;
  cleanupInstalled = true;
  process.on('exit', killAll);
  let signalled = false;
  const onSignalReceived = (signal: NodeJS.Signals) => {
    if (signalled) {
      killAll();
      process.exit(130);
    }
    signalled = true;
    process.stderr.write(`\nbench: ${signal} received, stopping every server it started…\n`);
    const hardStop = setTimeout(() => {
      killAll();
      process.exit(130);
    }, graceMs);
    hardStop.unref();
    Promise.resolve()
      .then(() => onSignal?.())
      .catch(() => undefined)
      .then(() => stopAll())
      .finally(() => process.exit(130));
  };
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, onSignalReceived);
  process.on('uncaughtException', (err) => {
    process.stderr.write(`bench: uncaught ${err.stack ?? err}\n`);
    killAll();
    process.exit(1);
  });
}

/**
 * Poll `url` until it answers with a status for which `ready` is true. Fails fast, with the process's last
 * output, when `proc` exits first; fails after `timeoutMs`.
 */
export async function waitForHttp(
  url: string,
  proc: ManagedProcess | undefined,
  timeoutMs = 120_000,
  ready: (status: number, body: string) => boolean = (s) => s === 200,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer yet';
  while (Date.now() < deadline) {
    if (proc && !proc.alive) throw new Error(`${proc.name} exited before ${url} was ready:\n${proc.log()}`);
    try {
      const res = await request(url, { headersTimeout: 5_000, bodyTimeout: 5_000 });
      const body = await res.body.text();
      if (ready(res.statusCode, body)) return;
      last = `${res.statusCode} ${body.slice(0, 200)}`;
    } catch (err) {
      last = (err as Error).message;
    }
    await delay(100);
  }
  throw new Error(`${url} not ready after ${timeoutMs} ms (${last})${proc ? `:\n${proc.log()}` : ''}`);
}

/** A private temp folder (model store, logs) removed by the returned `remove()`. */
export function tempDir(prefix: string): { dir: string; remove: () => void } {
  const dir = mkdtempSync(path.join(tmpdir(), `mt-bench-${prefix}-`));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}
