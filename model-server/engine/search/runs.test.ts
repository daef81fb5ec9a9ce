import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../../tools/demo-model/index.js';
import { seededRows } from '../../test/engine-fixtures.js';
import { type TranslateOptions, TranslationEngine } from '../engine.js';

const root = mkdtempSync(path.join(tmpdir(), 'search-runs-'));
const dir = path.join(root, 'tiny');
let inGraph: TranslationEngine;
let stepLoop: TranslationEngine;

beforeAll(async () => {
  makeDemoModel('tiny', dir);
  inGraph = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, dtype: 'fp32', search: 'in-graph' });
  stepLoop = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, dtype: 'fp32', search: 'step-loop' });
});
afterAll(async () => {
  await inGraph?.close();
  await stepLoop?.close();
  rmSync(root, { recursive: true, force: true });
});

const WORDS = 'the of and to in is hello world good morning thank you please translate quick brown fox 42 , . !'.split(
  ' ',
);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('an engine generating in one run per batch (GENERATION=in-graph)', () => {
  it('says so; `auto` keeps the step loop off CUDA', async () => {
    expect(inGraph.generation).toEqual({ mode: 'in-graph' });
    expect(stepLoop.generation).toEqual({ mode: 'step-loop' });
    const auto = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, dtype: 'fp32' });
    expect(auto.generation).toEqual({ mode: 'step-loop' });
    await auto.close();
  });

  it('rows submitted together are one run', async () => {
    const before = inGraph.searchStats()!.runs;
    await inGraph.translate(seededRows(12, 2, WORDS, 30), { numBeams: 1, maxNewTokens: 20 });
    expect(inGraph.searchStats()!.runs - before).toBe(1);
  });

  it('rows arriving while runs are in flight are batched into later runs, each with the step loop tokens', async () => {
    const rows = seededRows(30, 21, WORDS, 30);
    for (const options of [
      { numBeams: 1, maxNewTokens: 30 },
      { numBeams: 2, maxNewTokens: 24 },
    ] as TranslateOptions[]) {
      const before = inGraph.searchStats()!;
      const got = await Promise.all(
        rows.map(async (row, i) => {
          // Three waves: the first starts runs, the others arrive while they are in flight.
          await sleep(Math.floor(i / 10) * 5);
          return inGraph.translate([row], options);
        }),
      );
      const expected = await stepLoop.translate(rows, options);
      expect(got.map((t) => t[0]!.tokenIds)).toEqual(expected.map((e) => e.tokenIds));
      expect(got.map((t) => t[0]!.text)).toEqual(expected.map((e) => e.text));
      const after = inGraph.searchStats()!;
      expect(after.rows - before.rows).toBe(rows.length);
      expect(after.runs - before.runs).toBeLessThan(rows.length);
    }
  });

  it('rows with glossary terms or alternatives take the step loop', async () => {
    const [row] = seededRows(1, 4, WORDS, 20);
    const term = inGraph.encodeTerm('fox');
    const runs = inGraph.searchStats()!.runs;
    const steps = inGraph.stats().decoderRuns;
    const constrained = await inGraph.translate([row!], { numBeams: 2, maxNewTokens: 30, constraints: [term] });
    const alternatives = await inGraph.translate([row!], { numBeams: 2, maxNewTokens: 20, alternatives: 1 });
    expect(inGraph.searchStats()!.runs).toBe(runs);
    expect(inGraph.stats().decoderRuns).toBeGreaterThan(steps);
    const expected = await stepLoop.translate([row!], { numBeams: 2, maxNewTokens: 30, constraints: [term] });
    expect(constrained[0]!.tokenIds).toEqual(expected[0]!.tokenIds);
    expect(alternatives[0]!.alternatives).toBeDefined();
  });

  it('a row its run cannot take fails alone; the others of that run are answered', async () => {
    const rows = seededRows(5, 8, WORDS, 20).map((r) => inGraph.prepare(r));
    const options = { numBeams: 1, maxNewTokens: 16 };
    const retried = inGraph.searchStats()!.retriedRuns;
    const bad = [...rows[0]!.inputIds.slice(0, -1), 10_000, 2];
    const results = await Promise.allSettled([
      ...rows.map((r) => inGraph.generateIds(r.inputIds, r.forcedTokenId, options)),
      inGraph.generateIds(bad, rows[0]!.forcedTokenId, options),
      inGraph.generateIds(rows[1]!.inputIds, 10_000, options),
    ]);
    expect(results.slice(-2).map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results.at(-1) as PromiseRejectedResult).reason.message).toMatch(/forced token 10000 is outside/);
    const expected = await Promise.all(rows.map((r) => stepLoop.generateIds(r.inputIds, r.forcedTokenId, options)));
    expect(results.slice(0, -2).map((r) => (r.status === 'fulfilled' ? r.value.tokens : null))).toEqual(
      expected.map((h) => h.tokens),
    );
    expect(inGraph.searchStats()!.retriedRuns).toBeGreaterThan(retried);
  });

  it('a cancelled row is answered at once with its reason', async () => {
    const rows = seededRows(40, 9, WORDS, 30).map((r) => inGraph.prepare(r));
    const controller = new AbortController();
    const options = { numBeams: 2, maxNewTokens: 40 };
    const busy = rows.map((r) => inGraph.generateIds(r.inputIds, r.forcedTokenId, options));
    const cancelled = inGraph.generateIds(rows[0]!.inputIds, rows[0]!.forcedTokenId, options, controller.signal);
    controller.abort(new Error('client went away'));
    await expect(cancelled).rejects.toThrow('client went away');
    await Promise.all(busy);
  });
});
