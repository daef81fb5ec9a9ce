/**
 * @module common/entry — locate a sibling process entry whether we run compiled (dist/*.js) or from
 * source under vitest/tsx (*.ts). Spawned children get the tsx loader only in the second case.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

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
  // The loader by absolute URL: a bare `tsx` would resolve against the child's cwd, which may be anywhere.
  const tsx = () => pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
  return { file, execArgv: fromTs ? ['--import', tsx()] : [] };
}
