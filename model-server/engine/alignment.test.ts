/**
 * alignment.ts through the engine: on the copy model (tools/demo-model/copy-weights.ts), whose translation is its
 * source and whose cross-attention peaks on the token it copies, every target word is linked to the very same
 * characters of the source; a random model (tiny) and its q8 weights give links inside both texts. The alignment
 * graph is found by what the Softmax reads (the generated models name no nodes) and by the export's node names.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { TranslationEngine } from './engine.js';
import { alignmentLayer, CROSS_ATTENTION_OUTPUT, exposeCrossAttention } from './graphs/cross-attention.js';
import { GraphBuilder, WeightSink, ElemType } from '../tools/demo-model/onnx-builder.js';
import { splitCrossAttention } from './graphs/decoder-split.js';
import { joinModel, splitModel } from './graphs/onnx-wire.js';
import { alignmentGraphs } from './graphs/session-graphs.js';
import { loadModelConfig } from './model-config.js';

const root = mkdtempSync(path.join(tmpdir(), 'alignment-'));
const engines: TranslationEngine[] = [];
const load = async (preset: string, dtype: 'fp32' | 'q8') => {
  const dir = path.join(root, preset);
  const engine = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, dtype });
  engines.push(engine);
  return engine;
};

beforeAll(() => {
  makeDemoModel('tiny-copy', path.join(root, 'tiny-copy'));
  makeDemoModel('tiny-copy-separate', path.join(root, 'tiny-copy-separate'));
  makeDemoModel('tiny', path.join(root, 'tiny'));
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  rmSync(root, { recursive: true, force: true });
});

const SENTENCES = [
  'Click here to continue.',
  'Hello world, this is the copy model.',
  'The quick brown fox jumps over the lazy dog 42 times!',
  'a b c d e f g h i j k l m n o p q r s t u v w x y z a b c d e f g h i j k l m n o p q r s t u v w x y z',
];

async function aligned(engine: TranslationEngine, text: string) {
  const row = engine.prepare({ text, srcLang: 'en', tgtLang: 'de' });
  const translation = await engine.generate(row);
  const links = await engine.align(text, row, translation);
  return { translation, links: links! };
}

describe('word alignment', () => {
  // tiny-copy-separate reads its translation in a target vocabulary of its own (Marian's separate vocabularies); its
  // int8 files copy as its fp32 ones do.
  for (const [preset, dtype] of [
    ['tiny-copy', 'fp32'],
    ['tiny-copy', 'q8'],
    ['tiny-copy-separate', 'fp32'],
    ['tiny-copy-separate', 'q8'],
  ] as const) {
    it(`links every word of the copy model's translation to the same characters of its source (${preset}, ${dtype})`, async () => {
      const engine = await load(preset, dtype);
      expect(await engine.alignmentUnavailable()).toBeNull();
      // Asked for together, rows of different lengths share one padded alignment run; the rows generated with
      // `align` read theirs from their own steps.
      const rows = SENTENCES.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));
      const before = engine.alignmentStats();
      const translations = await Promise.all(rows.map((row, i) => engine.generate(row, { align: i % 2 === 0 })));
      const results = await Promise.all(
        SENTENCES.map(async (text, i) => ({
          translation: translations[i]!,
          links: (await engine.align(text, rows[i]!, translations[i]!))!,
        })),
      );
      for (const [i, text] of SENTENCES.entries()) {
        const { translation, links } = results[i]!;
        expect(translation.text).toBe(text);
        const covered = new Set<number>();
        for (let i = 0; i < links.length; i += 4) {
          const [t0, t1, s0, s1] = links.slice(i, i + 4);
          expect([s0, s1]).toEqual([t0, t1]);
          for (let c = t0!; c < t1!; c++) covered.add(c);
        }
        // Every character but the spaces is some token's.
        expect(covered.size).toBe(text.replaceAll(' ', '').length);
      }
      expect(engine.alignmentStats().stepRows - before.stepRows).toBe(SENTENCES.length / 2);
    });
  }

  // Row 1 searches with beams, whose trail follows the hypothesis that wins; the others are greedy.
  const search = (i: number) => (i === 1 ? { numBeams: 2 } : {});
  for (const [graph, kept] of [
    ['rewritten', "its steps' own attention"],
    ['as-exported', "its generation's encoder states"],
  ] as const) {
    it(`gives a row generated with align, reading ${kept}, the links of a pass that encodes it again (${graph})`, async () => {
      const dir = path.join(root, 'tiny');
      const engine = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, decoderGraph: graph });
      engines.push(engine);
      // Alone and generated without `align`: a pass that encodes the source again.
      const alone: { tokens: number[]; links: number[] }[] = [];
      for (const [i, text] of SENTENCES.entries()) {
        const row = engine.prepare({ text, srcLang: 'en', tgtLang: 'de' });
        const translation = await engine.generate(row, search(i));
        alone.push({ tokens: translation.tokenIds, links: (await engine.align(text, row, translation))! });
      }
      expect(new Set(alone.map((a) => JSON.stringify(a.links))).size).toBe(SENTENCES.length);
      const before = engine.alignmentStats();
      // Together, rows of different lengths in one cohort; row 2 without `align`. Rewritten, the three others read
      // their steps' attention and row 2 takes a pass alone; as exported, the step graph offers none, so all four
      // share one padded pass, and only row 2 is encoded again.
      const rows = SENTENCES.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));
      const translations = await Promise.all(
        rows.map((row, i) => engine.generate(row, { ...search(i), align: i !== 2 })),
      );
      const links = await Promise.all(SENTENCES.map((text, i) => engine.align(text, rows[i]!, translations[i]!)));
      const after = engine.alignmentStats();
      const fromSteps = graph === 'rewritten' ? 3 : 0;
      expect(after.stepRows - before.stepRows).toBe(fromSteps);
      expect(after.runs - before.runs).toBe(1);
      expect(after.rows - before.rows).toBe(SENTENCES.length - fromSteps);
      expect(after.encodedRows - before.encodedRows).toBe(1);
      SENTENCES.forEach((_, i) => {
        expect(translations[i]!.tokenIds).toEqual(alone[i]!.tokens);
        expect(links[i]).toEqual(alone[i]!.links);
      });
    });
  }

  it("gathers a document's rows, finishing one per step, into few passes while the loop runs on", async () => {
    const engine = await load('tiny', 'fp32');
    const texts = Array.from({ length: 32 }, (_, i) => `Row ${i} of a document, with its own words.`);
    const before = engine.alignmentStats();
    const started = performance.now();
    // A row that keeps the loop stepping while the others finish, one per step, each asking as the handler does.
    // Generated without `align`, so that each takes a pass (with it, each would read its own steps' attention).
    const keeper = engine.prepare({ text: 'The row that runs longest.', srcLang: 'en', tgtLang: 'de' });
    const running = engine.generate(keeper, { minNewTokens: 48, maxNewTokens: 48 });
    const links = await Promise.all(
      texts.map(async (text, i) => {
        const row = engine.prepare({ text, srcLang: 'en', tgtLang: 'de' });
        const translation = await engine.generate(row, { minNewTokens: 4 + i, maxNewTokens: 4 + i });
        return engine.align(text, row, translation);
      }),
    );
    const elapsedMs = performance.now() - started;
    await running;
    for (const l of links) expect(l!.length).toBeGreaterThan(0);
    const passes = engine.alignmentStats().runs - before.runs;
    // Two by count (16 rows each), one per 200 ms a row waited at most, one as the loop stops. A pass per boundary
    // (no gathering) makes ~32.
    expect(passes).toBeLessThanOrEqual(2 + Math.floor(elapsedMs / 200) + 1);
    expect(passes).toBeLessThan(16);
  });

  it('gives links inside both texts on a random model', async () => {
    const engine = await load('tiny', 'fp32');
    const { translation, links } = await aligned(engine, SENTENCES[1]!);
    expect(links.length).toBeGreaterThan(0);
    for (let i = 0; i < links.length; i += 4) {
      const [t0, t1, s0, s1] = links.slice(i, i + 4) as [number, number, number, number];
      expect(0 <= t0 && t0 < t1 && t1 <= translation.text.length).toBe(true);
      expect(0 <= s0 && s0 < s1 && s1 <= SENTENCES[1]!.length).toBe(true);
    }
  });

  it('gives, with the cross-attention graph joined in front, the attention of the two graphs run apart', async () => {
    const dir = path.join(root, 'tiny');
    const config = loadModelConfig(dir);
    const file = path.join(dir, 'onnx', 'decoder_model_merged.onnx');
    const joined = alignmentGraphs(file, true, config);
    if ('reason' in joined) throw new Error(joined.reason);
    const { model, weights } = splitModel(readFileSync(file));
    const split = splitCrossAttention(model, config.decoderLayers);
    if (!split.ok) throw new Error(split.reason);
    expect(exposeCrossAttention(split.step.model, config.decoderLayers)).toMatchObject({ ok: true });
    const [one, cross, step] = await Promise.all(
      [joined.step, joinModel(split.cross.model, weights), joinModel(split.step.model, weights)].map((bytes) =>
        ort.InferenceSession.create(bytes, { intraOpNumThreads: 1 }),
      ),
    );
    expect(one!.inputNames.filter((name) => name.includes('.encoder.'))).toEqual([]);
    const [n, S, T, d, H] = [3, 7, 5, config.dModel, config.decoderHeads];
    let seed = 1;
    const random = () => ((seed = (seed * 16807) % 2147483647) / 2147483647) * 2 - 1;
    const states = new ort.Tensor('float32', Float32Array.from({ length: n * S * d }, random), [n, S, d]);
    const mask = new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: n * S }, (_, i) => (i % S < S - (i % 3) ? 1n : 0n)),
      [n, S],
    );
    const ids = new ort.Tensor(
      'int64',
      BigInt64Array.from({ length: n * T }, (_, i) => BigInt(4 + i)),
      [n, T],
    );
    const empty = new ort.Tensor('float32', new Float32Array(0), [n, H, 0, d / H]);
    const feed = (session: ort.InferenceSession, given: Record<string, ort.Tensor>) =>
      Object.fromEntries(session.inputNames.map((name) => [name, given[name] ?? empty]));
    const given = { input_ids: ids, encoder_attention_mask: mask, encoder_hidden_states: states };
    const made = await cross!.run(feed(cross!, given));
    const renamed = Object.fromEntries(
      Object.entries(made).map(([k, v]) => [k.replace('present.', 'past_key_values.'), v]),
    );
    const apart = await step!.run(feed(step!, { ...given, ...renamed }), [CROSS_ATTENTION_OUTPUT]);
    const together = await one!.run(feed(one!, given), [CROSS_ATTENTION_OUTPUT]);
    expect(together[CROSS_ATTENTION_OUTPUT]!.data).toEqual(apart[CROSS_ATTENTION_OUTPUT]!.data);
    await Promise.all([one, cross, step].map((session) => session!.release()));
  });

  it("finds the middle layer's cross-attention by the export's node name", () => {
    const g = new GraphBuilder(new WeightSink(1));
    const x = g.input('x', ElemType.FLOAT, ['batch_size', 4, 'T', 'S']);
    for (let layer = 0; layer < 6; layer++) {
      for (const kind of ['self_attn', 'encoder_attn']) {
        g.opN('Softmax', [x], { axis: { i: -1 } }, [`/model/decoder/layers.${layer}/${kind}/Softmax_output_0`]);
      }
    }
    const graph = g.graph('decoder');
    graph.node!.forEach((node, i) => {
      node.name = `/model/decoder/layers.${Math.floor(i / 2)}/${i % 2 === 0 ? 'self_attn' : 'encoder_attn'}/Softmax`;
    });
    const model = { opsetImport: [{ domain: '', version: 17 }], graph };
    expect(exposeCrossAttention(model, 6)).toMatchObject({ ok: true, layer: alignmentLayer(6) });
    // Cut down to what computes the attention: the other layers' Softmaxes are gone.
    expect(graph.node!.map((node) => node.opType)).toEqual(['Softmax', 'ReduceMean', 'Cast']);
    const reduce = graph.node!.find((node) => node.opType === 'ReduceMean')!;
    expect(reduce.input).toEqual([`/model/decoder/layers.2/encoder_attn/Softmax_output_0`]);
    expect(graph.output!.map((o) => o.name)).toContain(CROSS_ATTENTION_OUTPUT);
    expect(exposeCrossAttention({ graph: { node: [] } }, 6)).toMatchObject({ ok: false });
  });
});
