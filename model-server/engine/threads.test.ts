import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveEntry } from '../../common/entry.js';
import '../../harness/compiled.js';
import { makeDemoModel } from '../tools/demo-model/index.js';

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const root = mkdtempSync(path.join(tmpdir(), 'threads-'));
const modelDir = path.join(root, 'tiny');
/** The engine's module: from dist/ when the build is current (harness/compiled.ts), else through tsx. */
const ENGINE = resolveEntry(import.meta.url, './engine');

/**
 * The threads an engine loaded with each of `asked` adds to a fresh process, in that order, each engine closed before
 * the next (a closed session joins its pool). A first engine, not counted, starts what a process starts once.
 */
function threadsAdded(asked: readonly number[]): number[] {
  const script = `
    const { readdirSync } = await import('node:fs');
    const { TranslationEngine } = await import(${JSON.stringify(ENGINE.file)});
    const threads = () => readdirSync('/proc/self/task').length;
    const load = (intraOpThreads) => TranslationEngine.load({ modelDir: ${JSON.stringify(modelDir)}, intraOpThreads, dtype: 'fp32' });
    await (await load(1)).close();
    const added = [];
    for (const n of ${JSON.stringify(asked)}) {
      const before = threads();
      const engine = await load(n);
      added.push(threads() - before);
      await engine.close();
    }
    process.stdout.write(JSON.stringify(added));`;
  const out = execFileSync(process.execPath, [...ENGINE.execArgv, '--input-type=module', '-e', script], {
    cwd: repo,
    encoding: 'utf8',
  });
  return JSON.parse(out) as number[];
}

describe('intra-op threads (engine-options.ts intraOpThreadCount)', () => {
  beforeAll(() => makeDemoModel('tiny', modelDir));
  afterAll(() => rmSync(root, { recursive: true, force: true }));

  it.runIf(process.platform === 'linux')('0 gives the sessions every core, as many threads as asking for them', () => {
    const cores = availableParallelism();
    const [one, zero, all] = threadsAdded([1, 0, cores]);
    expect(zero).toBe(all);
    // onnxruntime's own 0 made one thread on this project's 2-core VMs: the same as asking for 1.
    if (cores > 1) expect(zero).toBeGreaterThan(one!);
  });
});
