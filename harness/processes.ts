/**
 * @module harness/processes — the stack's entry points as real child processes for tests: from source through
 * the tsx loader (or compiled, for a `.js` entry), in the cwd given (a temp folder: no stray `.env`), with only the
 * environment given, each in its own process group with its output in a log file, ready when it reports
 * `listening` over IPC — never after a sleep. The processes are harness/process-registry.ts's ManagedProcess (the one
 * implementation the bench, the soak and the tests share); a test file's `afterAll(stopAll)` ends whatever it left
 * running, and the test process's exit kills what even that missed.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import './compiled.js';
import { killAll, startProcess, type ManagedProcess } from './process-registry.js';

/** The repository root. */
export const ROOT = fileURLToPath(new URL('..', import.meta.url));
/**
 * The tsx loader by absolute URL (`--import tsx` would resolve against the child's cwd), found when first needed: the
 * compiled harness also runs where only the production modules are (bench/gpu/served.ts on a GPU machine).
 */
export const tsx = (): string => pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

/** The Node flags a child needs to run `file`: the tsx loader for TypeScript. */
export function nodeArgs(file: string): string[] {
  return file.endsWith('.ts') ? ['--import', tsx()] : [];
}

export interface EntryOptions {
  /** Entry point relative to the repository root: `router/main.ts` (through tsx) or `dist/router/main.js`. */
  entry: string;
  /** Arguments after the entry. */
  args?: string[];
  cwd: string;
  /** The child's whole environment besides PATH and HOME: nothing else leaks in from the test runner. */
  env: Record<string, string>;
  /** Shown in errors and names the default log file (default: the entry's path). */
  name?: string;
  /** Receives the child's stdout and stderr (default: a file in this test process's log folder). */
  logFile?: string;
  /** Append to `logFile` (a restarted server keeps one log). */
  appendLog?: boolean;
}

let logDir: string | undefined;
/** One folder per test process for logs nobody asked to keep, removed when the process exits. */
function defaultLogFile(name: string): string {
  if (logDir === undefined) {
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-test-logs-'));
    process.once('exit', () => rmSync(dir, { recursive: true, force: true }));
    logDir = dir;
  }
  return path.join(logDir, `${name.replace(/[^\w.-]+/g, '_')}-${Date.now()}.log`);
}

let killOnExit = false;

/** Start `entry` with an IPC channel (see the module doc). */
export function startEntry(options: EntryOptions): ManagedProcess {
  if (!killOnExit) {
    // A test process that ends without its afterAll (a crash, a timeout) still leaves no server behind.
    process.once('exit', killAll);
    killOnExit = true;
  }
  const name = options.name ?? options.entry;
  return startProcess({
    name,
    file: path.join(ROOT, options.entry),
    ...(options.args ? { args: options.args } : {}),
    execArgv: nodeArgs(options.entry),
    cwd: options.cwd,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...options.env },
    logFile: options.logFile ?? defaultLogFile(name),
    ...(options.appendLog ? { appendLog: true } : {}),
    ipc: true,
  });
}

/** `{type: 'listening', …}`: what the router, the front and the model server report over IPC. */
export function isListening<T extends object>(m: unknown): m is { type: 'listening' } & T {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'listening';
}

/** Whether a process with this pid is alive (signal 0 reaches it). */
export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
