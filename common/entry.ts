/**
 * @module common/entry — locate a sibling process entry, or a worker thread's module, whether we run compiled
 * (dist/*.js) or from source under vitest/tsx (*.ts). Spawned children get the tsx loader only in the second case;
 * worker threads get a bootstrap that registers it (tsx-thread.mjs).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/**
 * Set by the test harness when the build is newer than every source (harness/compiled.ts): children of a caller
 * running from source start from the build anyway, without tsx transforming their modules first (a third of the CPU
 * of a start; tests start hundreds).
 */
let compiledTwin: { sourceRoot: string; buildRoot: string } | undefined;

/** Start children from `buildRoot`'s `.js` twin of each entry under `sourceRoot` (see `compiledTwin`). */
export function startChildrenCompiled(sourceRoot: string, buildRoot: string): void {
  compiledTwin = { sourceRoot: path.resolve(sourceRoot), buildRoot: path.resolve(buildRoot) };
}

export interface EntryPoint {
  /** Absolute path of the script to run. */
  file: string;
  /** Node flags the child needs to run it (the tsx loader for .ts sources). */
  execArgv: string[];
}

/**
 * `resolveEntry(import.meta.url, '../worker/main')` → the `.js` beside a compiled caller, or the `.ts`
 * beside a source caller.
 */
export function resolveEntry(fromUrl: string, relativeWithoutExt: string): EntryPoint {
  const fromTs = fromUrl.endsWith('.ts');
  const file = fileURLToPath(new URL(`${relativeWithoutExt}.${fromTs ? 'ts' : 'js'}`, fromUrl));
  if (!existsSync(file)) throw new Error(`entry point not found: ${file}`);
  const twin = fromTs ? compiledTwinOf(file) : undefined;
  if (twin !== undefined) return { file: twin, execArgv: [] };
  // The loader by absolute URL: a bare `tsx` would resolve against the child's cwd, which may be anywhere.
  const tsx = () => pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return { file, execArgv: fromTs ? ['--import', tsx()] : [] };
}

function compiledTwinOf(sourceFile: string): string | undefined {
  if (compiledTwin === undefined) return undefined;
  const relative = path.relative(compiledTwin.sourceRoot, sourceFile);
  if (relative.startsWith('..')) return undefined;
  const twin = path.join(compiledTwin.buildRoot, relative.replace(/\.ts$/, '.js'));
  return existsSync(twin) ? twin : undefined;
}

/** A worker thread's module (piscina's `filename`), and the `workerData` its threads need to load it. */
export interface ThreadEntry {
  /** Absolute `file:` URL of the module the threads load. */
  filename: string;
  /** For the source bootstrap: the TypeScript module it loads. */
  workerData?: { tsxThreadModule: string };
}

/**
 * `resolveThreadEntry(import.meta.url, './text-task')` → the compiled `.js` beside a compiled caller; beside a source
 * caller, common/tsx-thread.mjs loading the `.ts` (the module's default export is what the thread runs). A worker
 * thread needs the bootstrap: `--import tsx` in its execArgv registers tsx's hooks on the main thread only.
 */
export function resolveThreadEntry(fromUrl: string, relativeWithoutExt: string): ThreadEntry {
  const { file } = resolveEntry(fromUrl, relativeWithoutExt);
  if (file.endsWith('.js')) return { filename: pathToFileURL(file).href };
  return {
    filename: new URL('./tsx-thread.mjs', import.meta.url).href,
    workerData: { tsxThreadModule: pathToFileURL(file).href },
  };
}
