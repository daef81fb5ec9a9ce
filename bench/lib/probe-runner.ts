/**
 * @module bench/lib/probe-runner — runs one in-process measurement (`bench/probe.ts`) in a fresh child process
 * and returns its JSON result. Fresh processes keep one measurement's allocations, thread pools and page-cache
 * warmth from leaking into the next; the child is a ManagedProcess, so it dies with the bench.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { startProcess } from '../../harness/process-registry.js';
import { ENGINE_MALLOC_ENV } from '../../model-server/engine/malloc-env.js';

/**
 * Flags a child needs to run a .ts entry when the bench itself runs from source (always, via tsx). The loader is
 * given by absolute URL so the child may run in any working folder.
 */
export function tsExecArgv(): string[] {
  // `tsx` exports one unconditional entry, so require.resolve finds the same file as an ESM import would.
  return import.meta.url.endsWith('.ts')
    ? ['--import', pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href]
    : [];
}

export interface ProbeOptions {
  /** Folder for the result file and the child's log. */
  workDir: string;
  /** Name used in the log file name and errors. */
  label: string;
  /** Kill the probe after this long. */
  timeoutMs: number;
  /** Extra node flags (e.g. `--cpu-prof`). */
  execArgv?: string[];
  env?: Record<string, string | undefined>;
}

const probeFile = fileURLToPath(new URL(`../probe.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url));

/** Run `bench/probe.ts` with `request` (a JSON-serialisable probe request) and return what it wrote. */
export async function runProbe<T>(request: { kind: string }, options: ProbeOptions): Promise<T> {
  const safe = options.label.replace(/[^a-zA-Z0-9_.-]+/g, '_');
  const resultFile = path.join(options.workDir, `${safe}.result.json`);
  const proc = startProcess({
    name: `probe ${options.label}`,
    file: probeFile,
    args: [resultFile, JSON.stringify(request)],
    execArgv: [...tsExecArgv(), ...(options.execArgv ?? [])],
    // A probe runs an engine as a worker does: with the allocator settings a worker starts with.
    env: { ...ENGINE_MALLOC_ENV, ...process.env, ...options.env },
    logFile: path.join(options.workDir, `${safe}.log`),
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    void proc.stop(2_000);
  }, options.timeoutMs);
  try {
    const { code, signal } = await proc.exited;
    if (code !== 0 || !existsSync(resultFile)) {
      throw new Error(
        `probe ${options.label} failed (${timedOut ? `timed out after ${options.timeoutMs} ms` : `exit ${code ?? signal}`}):\n${proc.log()}`,
      );
    }
    return JSON.parse(readFileSync(resultFile, 'utf8')) as T;
  } finally {
    clearTimeout(timer);
    await proc.stop(1_000);
  }
}
