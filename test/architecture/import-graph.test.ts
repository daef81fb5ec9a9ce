/**
 * The import rules of docs/architecture.md, read from the source: no import cycle among product files, product
 * folders never import test, bench or harness code, the model server's rooms import downwards only (http → translation
 * → wlm), and the runtime never imports the offline tools.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PRODUCT = ['common', 'router', 'front', 'model-server'];
/** Test and benchmark code, wherever it sits. */
const isTestCode = (file: string) =>
  /\.test\.ts$/.test(file) || /(^|\/)test\//.test(file) || /^(bench|harness|scripts|test)\//.test(file);

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (name === 'node_modules') continue;
    if (statSync(path.join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (/\.ts$/.test(name) && !name.endsWith('.d.ts')) out.push(rel);
  }
  return out;
}

/** Relative imports of a file (static, dynamic and `export … from`), as repository paths of `.ts` files. */
function importsOf(file: string): string[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const specs = [...text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*['"](\.{1,2}\/[^'"]+)['"]/g)].map((m) => m[1]!);
  return specs.map((spec) =>
    path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'),
  );
}

const product = PRODUCT.flatMap(sourceFiles).filter((file) => !isTestCode(file));
const graph = new Map(product.map((file) => [file, importsOf(file)]));

/** Every cycle's files, found by a depth-first search over the product graph. */
function cycles(): string[][] {
  const found: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const stack: string[] = [];
  const visit = (file: string) => {
    state.set(file, 'open');
    stack.push(file);
    for (const next of graph.get(file) ?? []) {
      if (!graph.has(next)) continue;
      if (state.get(next) === 'open') found.push(stack.slice(stack.indexOf(next)));
      else if (!state.has(next)) visit(next);
    }
    stack.pop();
    state.set(file, 'done');
  };
  for (const file of graph.keys()) if (!state.has(file)) visit(file);
  return found;
}

/** `[importer, imported]` pairs where a file of `from` imports a file under one of `banned`. */
function crossings(from: (file: string) => boolean, banned: RegExp): string[] {
  return [...graph]
    .filter(([file]) => from(file))
    .flatMap(([file, deps]) => deps.filter((d) => banned.test(d)).map((d) => `${file} → ${d}`));
}

describe('import graph', () => {
  it('reads the product files', () => {
    expect(product.length).toBeGreaterThan(50);
    expect(graph.get('model-server/http/inference-api.ts')).toContain('model-server/http/prediction.ts');
  });

  it('has no import cycle among product files', () => {
    expect(cycles()).toEqual([]);
  });

  it('keeps test, bench and harness code out of product folders', () => {
    expect(crossings(() => true, /(^|\/)test\/|\.test\.ts$|^(bench|harness|scripts)\//)).toEqual([]);
  });

  it('has the model server rooms import downwards only: http → translation → wlm', () => {
    expect(crossings((f) => f.startsWith('model-server/wlm/'), /^model-server\/(http|translation)\//)).toEqual([]);
    expect(crossings((f) => f.startsWith('model-server/translation/'), /^model-server\/http\//)).toEqual([]);
    const entries = ['model-server/main.ts'];
    expect(
      crossings((f) => !f.startsWith('model-server/http/') && !entries.includes(f), /^model-server\/http\//),
    ).toEqual([]);
    // The worker processes run the engine and the handlers; the scheduler and the HTTP apps stay in the frontend.
    expect(
      crossings((f) => /^model-server\/(worker|engine|text)\//.test(f), /^model-server\/(http|wlm|translation)\//),
    ).toEqual([]);
  });

  it('keeps the offline tools out of the runtime: only their command line (model-server/cli.ts) imports them', () => {
    const tools = /^model-server\/tools\//;
    expect(crossings((f) => !tools.test(f) && f !== 'model-server/cli.ts', tools)).toEqual([]);
  });
});
