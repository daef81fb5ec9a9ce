/**
 * @module harness/compiled — children from the build when the build is current. Under vitest the harness runs from
 * source, and a child started from source pays tsx transforming its modules first: about twice the CPU of a compiled
 * start, and tests start hundreds of children (servers, workers, text threads, CLIs). `npm test` builds first, so its
 * children run from dist/; while someone edits a product file, the build is stale and children run from source, so a
 * test never runs code older than the source. Importing this module is what turns it on (common/entry.ts
 * `startChildrenCompiled`) for the harness's processes, in-process model servers and stacks alike.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startChildrenCompiled } from '../common/entry.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const FROM_SOURCE = import.meta.url.endsWith('.ts');
const BUILD = path.join(ROOT, 'dist');

/** The build is current: its stamp is newer than every file the build compiles (tsconfig.build.json's folders). */
function buildIsCurrent(): boolean {
  const stamp = path.join(BUILD, '.build-stamp');
  if (!FROM_SOURCE || !existsSync(stamp)) return false;
  const builtAt = statSync(stamp).mtimeMs;
  const { include } = JSON.parse(readFileSync(path.join(ROOT, 'tsconfig.build.json'), 'utf8')) as { include: string[] };
  const newer = (dir: string): boolean =>
    readdirSync(dir, { withFileTypes: true }).some((entry) => {
      const file = path.join(dir, entry.name);
      if (entry.isDirectory()) return entry.name !== 'test' && entry.name !== 'node_modules' && newer(file);
      return !entry.name.endsWith('.test.ts') && statSync(file).mtimeMs > builtAt;
    });
  return !include.some((dir) => newer(path.join(ROOT, dir)));
}

export const BUILD_IS_CURRENT = buildIsCurrent();
if (BUILD_IS_CURRENT) startChildrenCompiled(ROOT, BUILD);

/**
 * An entry's file relative to the repository root, `router/main` → `dist/router/main.js` when the build is current,
 * `router/main.ts` otherwise (or `router/main.js` when the harness itself runs compiled, from dist/).
 */
export function entryFile(relativeWithoutExt: string): string {
  if (!FROM_SOURCE) return `${relativeWithoutExt}.js`;
  return BUILD_IS_CURRENT ? `dist/${relativeWithoutExt}.js` : `${relativeWithoutExt}.ts`;
}
