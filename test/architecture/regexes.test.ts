/**
 * No regex in product code has a super-linear worst case: a pattern that backtracks on what a client sends freezes
 * the whole process (one HTML comment pattern took 34 s over 283 bytes, a subtitle tag pattern 50 s over 6 KB).
 *
 * Every regex literal in common/, front/, router/ and model-server/ (tests aside; the offline tools too, since they are
 * cheap to keep clean) is found by parsing the source with the TypeScript compiler, and every RegExp those modules
 * build is caught as they are imported, so a new pattern is checked without being listed anywhere. The checker is
 * recheck (its automaton analysis, or, for look-arounds and back-references it does not model, its fuzzer with a fixed
 * seed), through the backend recheck picks (RECHECK_BACKEND, default `auto`: its native binary, which npm installs for
 * the platform, else Java, else a worker thread in pure JavaScript: the same code compiled three ways, so the same
 * verdicts — all 135 patterns compared, native 3.5 s against 16 s in the worker).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { check, type Diagnostics } from 'recheck';
import ts from 'typescript';
import { describe, expect, it, vi } from 'vitest';

const ROOT = path.resolve(import.meta.dirname, '../..');
const PRODUCT = ['common', 'front', 'router', 'model-server'];

/**
 * Patterns kept although recheck finds them super-linear, each keyed by file and pattern, with why. An entry that no
 * longer matches a pattern fails the test, so the list cannot outlive what it excuses.
 */
const EXCUSED: Record<string, string> = {
  'common/config/variables.ts /\\/+$/': "trims PUBLIC_URL, the operator's configuration, not a client's text",
  'model-server/engine/session.ts /(Failed to [^\\n]*|No supported adapters[^\\n]*)$/':
    "reads the first line of an error message from onnxruntime's WebGPU setup, not a client's text",
  'model-server/worker/webgpu-probe.ts /Failed to [^\\n]*$/':
    "reads the first line of an error message from onnxruntime's WebGPU setup, not a client's text",
};

interface Pattern {
  file: string;
  line: number;
  source: string;
  flags: string;
}

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(path.join(ROOT, dir))) {
    const rel = `${dir}/${name}`;
    if (name === 'node_modules' || name === 'test') continue;
    if (statSync(path.join(ROOT, rel)).isDirectory()) out.push(...sourceFiles(rel));
    else if (name.endsWith('.ts') && !name.endsWith('.d.ts') && !name.endsWith('.test.ts')) out.push(rel);
  }
  return out;
}

/** Regex literals, and the lines where a RegExp is built, per file. */
function patternsInSource(files: readonly string[]): { literals: Pattern[]; built: { file: string; line: number }[] } {
  const literals: Pattern[] = [];
  const built: { file: string; line: number }[] = [];
  for (const file of files) {
    const source = ts.createSourceFile(file, readFileSync(path.join(ROOT, file), 'utf8'), ts.ScriptTarget.Latest, true);
    const lineOf = (node: ts.Node) => source.getLineAndCharacterOfPosition(node.getStart()).line + 1;
    const visit = (node: ts.Node): void => {
      if (ts.isRegularExpressionLiteral(node)) {
        const slash = node.text.lastIndexOf('/');
        literals.push({
          file,
          line: lineOf(node),
          source: node.text.slice(1, slash),
          flags: node.text.slice(slash + 1),
        });
      } else if (
        (ts.isNewExpression(node) || ts.isCallExpression(node)) &&
        ts.isIdentifier(node.expression) &&
        node.expression.text === 'RegExp'
      ) {
        built.push({ file, line: lineOf(node) });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return { literals, built };
}

/** The RegExps the product files build while `files` are imported, with the product line that built each. */
async function patternsBuilt(files: readonly string[]): Promise<Pattern[]> {
  const built: Pattern[] = [];
  const Native = RegExp;
  const record = (regex: RegExp) => {
    for (const frame of new Error().stack?.split('\n') ?? []) {
      const at = /(\/[^\s()]+\.ts):(\d+):\d+\)?$/.exec(frame);
      const file = at && path.relative(ROOT, at[1]!);
      if (file && PRODUCT.some((room) => file.startsWith(`${room}/`))) {
        built.push({ file, line: Number(at[2]), source: regex.source, flags: regex.flags });
        return;
      }
    }
  };
  globalThis.RegExp = new Proxy(Native, {
    construct(target, args, newTarget) {
      const regex = Reflect.construct(target, args, newTarget) as RegExp;
      record(regex);
      return regex;
    },
    apply(target, self, args) {
      const regex = Reflect.apply(target, self, args) as RegExp;
      record(regex);
      return regex;
    },
  });
  try {
    // Evaluated afresh: another file of this tier may have imported them already (vitest.config.ts, `shared`).
    vi.resetModules();
    for (const file of files) await import(path.join(ROOT, file));
  } finally {
    globalThis.RegExp = Native;
  }
  return built;
}

const verdicts = new Map<string, Promise<Diagnostics>>();

/** recheck's verdict: by automaton where it models the pattern, else by its fuzzer (seeded). */
function verdict({ source, flags }: Pattern): Promise<Diagnostics> {
  const key = `/${source}/${flags}`;
  let found = verdicts.get(key);
  if (found === undefined) {
    found = (async () => {
      // No wall-clock limit: a verdict bounded by time depends on the machine's load (on a loaded 2-core machine a
      // fuzzed attack slower than attackTimeout made a linear pattern "vulnerable"); recheck's limits on characters
      // read bound the work instead, and the test's timeout is what catches a hang.
      const untimed = { timeout: null, attackTimeout: null, incubationTimeout: null };
      const byAutomaton = await check(source, flags, { checker: 'automaton', ...untimed });
      if (byAutomaton.status !== 'unknown' || byAutomaton.error.kind !== 'unsupported') return byAutomaton;
      return check(source, flags, { checker: 'fuzz', randomSeed: 40, ...untimed });
    })();
    verdicts.set(key, found);
  }
  return found;
}

describe('regexes in product code', () => {
  const files = PRODUCT.flatMap(sourceFiles);
  const { literals, built } = patternsInSource(files);

  it('finds the patterns', () => {
    expect(literals.length).toBeGreaterThan(50);
    expect(literals).toContainEqual(expect.objectContaining({ file: 'model-server/text/subtitles.ts' }));
    expect(built).toContainEqual(expect.objectContaining({ file: 'model-server/text/atoms.ts' }));
  });

  it('has none with a super-linear worst case, or the checker unsure, but those excused', async () => {
    const made = await patternsBuilt([...new Set(built.map(({ file }) => file))]);
    // Each place that builds a RegExp built one on import: one built later, inside a function, would go unchecked.
    const unseen = built.filter(({ file, line }) => !made.some((m) => m.file === file && m.line === line));
    expect(unseen, 'RegExps built after import: build them once, at module level').toEqual([]);
    const problems: string[] = [];
    const excused = new Set<string>();
    for (const pattern of [...literals, ...made]) {
      const result = await verdict(pattern);
      if (result.status === 'safe') continue;
      const key = `${pattern.file} /${pattern.source}/${pattern.flags}`;
      if (result.status === 'vulnerable' && key in EXCUSED) {
        excused.add(key);
        continue;
      }
      const why =
        result.status === 'vulnerable'
          ? `${result.complexity.summary}, e.g. ${result.attack.pattern}`
          : `checker unsure: ${result.error.kind}`;
      problems.push(`${pattern.file}:${pattern.line} /${pattern.source}/${pattern.flags}: ${why}`);
    }
    expect(problems).toEqual([]);
    expect(
      Object.keys(EXCUSED).filter((key) => !excused.has(key)),
      'excuses for patterns that are gone',
    ).toEqual([]);
  }, 300_000);
});
