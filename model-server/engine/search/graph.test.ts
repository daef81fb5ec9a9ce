import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../../tools/demo-model/index.js';
import { seededRows } from '../../test/engine-fixtures.js';
import { type TranslateOptions, TranslationEngine } from '../engine.js';
import { loadModelConfig } from '../model-config.js';
import { convertModelToFloat16 } from '../float16.js';
import { searchGraph } from './graph.js';
import { SearchSession } from './session.js';

const root = mkdtempSync(path.join(tmpdir(), 'search-graph-'));
const dir = path.join(root, 'tiny');
let engine: TranslationEngine;
let search: SearchSession;

beforeAll(async () => {
  makeDemoModel('tiny', dir);
  const { graph, config } = graphOf();
  search = await SearchSession.create(graph, config, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
  engine = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, dtype: 'fp32' });
});
afterAll(async () => {
  await search?.release();
  await engine?.close();
  rmSync(root, { recursive: true, force: true });
});

/** The search graph of the tiny model's `_suffix` files. */
function graphOf(suffix = '', options: Parameters<typeof searchGraph>[4] = {}) {
  const config = loadModelConfig(dir);
  const graph = searchGraph(
    path.join(dir, `onnx/encoder_model${suffix}.onnx`),
    path.join(dir, `onnx/decoder_model_merged${suffix}.onnx`),
    config,
    { earlyStopping: config.generation.earlyStopping },
    options,
  );
  if (!graph.ok) throw new Error(graph.reason);
  return { graph, config };
}

const WORDS = 'the of and to in is hello world good morning thank you please translate quick brown fox 42 , . !'.split(
  ' ',
);

describe('the search graph (BeamSearch over the split decoder)', () => {
  // Rows of 1–30 words to several target languages in one run: sources of different lengths, rows ending by `</s>`
  // at different steps and rows reaching the cap.
  const cases: [string, Required<Pick<TranslateOptions, 'numBeams' | 'maxNewTokens'>> & TranslateOptions][] = [
    ['greedy', { numBeams: 1, maxNewTokens: 40 }],
    ['greedy with </s> suppressed for 12 tokens', { numBeams: 1, maxNewTokens: 30, minNewTokens: 12 }],
    ['beam 2', { numBeams: 2, maxNewTokens: 30 }],
    ['beam 3, short cap', { numBeams: 3, maxNewTokens: 12 }],
  ];
  for (const [name, options] of cases) {
    it(`${name}: one run over the batch gives the step loop's tokens, row for row`, async () => {
      const rows = seededRows(24, 5, WORDS, 30);
      const expected = await engine.translate(rows, options);
      const got = await search.run(
        rows.map((r) => engine.prepare(r)),
        {
          numBeams: options.numBeams,
          maxNewTokens: options.maxNewTokens,
          minNewTokens: options.minNewTokens ?? 0,
          lengthPenalty: 1,
        },
      );
      expect(got.map((g) => g.tokenIds)).toEqual(expected.map((e) => e.tokenIds));
      if (options.numBeams > 1) got.forEach((g, i) => expect(g.score).toBeCloseTo(expected[i]!.score, 4));
      // Not all rows alike: some end by </s>, some at the cap.
      const ended = got.filter((g) => g.tokenIds.at(-1) === 2).length;
      expect(ended).toBeGreaterThan(0);
      if (options.minNewTokens !== undefined)
        expect(got.every((g) => g.tokenIds.length >= options.minNewTokens!)).toBe(true);
    });
  }

  it("an fp16 export: the graph passes the operator's checks at load; its tokens are compared on CUDA (bench/gpu)", async () => {
    for (const name of ['encoder_model', 'decoder_model_merged'])
      convertModelToFloat16(path.join(dir, `onnx/${name}.onnx`), path.join(dir, `onnx/${name}_fp16.onnx`));
    const { graph, config } = graphOf('_fp16');
    // Loading validates both subgraphs against the operator's contract (types, names, shapes).
    const half = await SearchSession.create(graph, config, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
    try {
      const row = engine.prepare(seededRows(1, 3, WORDS, 30)[0]!);
      await expect(
        half.run([row], { numBeams: 1, maxNewTokens: 8, minNewTokens: 0, lengthPenalty: 1 }),
      ).rejects.toThrow(/does not support float16 model on CPU/);
    } finally {
      await half.release();
    }
  });

  it('weights past the inline limit go to one data file, with the same tokens', async () => {
    const scratchDir = path.join(root, 'scratch');
    const { graph, config } = graphOf('', { scratchDir, inlineLimit: 0 });
    expect(graph.weightsDir).toBe(scratchDir);
    expect(statSync(path.join(scratchDir, 'search_weights.bin')).size).toBeGreaterThan(graph.bytes.length);
    const moved = await SearchSession.create(graph, config, { executionProviders: ['cpu'], intraOpNumThreads: 1 });
    try {
      const rows = seededRows(8, 4, WORDS, 30).map((r) => engine.prepare(r));
      const settings = { numBeams: 2, maxNewTokens: 20, minNewTokens: 0, lengthPenalty: 1 };
      expect((await moved.run(rows, settings)).map((r) => r.tokenIds)).toEqual(
        (await search.run(rows, settings)).map((r) => r.tokenIds),
      );
    } finally {
      await moved.release();
    }
  });

  it('a row alone gives what it gives in a batch', async () => {
    const rows = seededRows(6, 9, WORDS, 30).map((r) => engine.prepare(r));
    const settings = { numBeams: 2, maxNewTokens: 24, minNewTokens: 0, lengthPenalty: 1 };
    const batched = await search.run(rows, settings);
    for (let i = 0; i < rows.length; i++) {
      const [alone] = await search.run([rows[i]!], settings);
      expect(alone!.tokenIds).toEqual(batched[i]!.tokenIds);
      expect(alone!.score).toBeCloseTo(batched[i]!.score, 4);
    }
  });
});
