/**
 * alignment.ts through the engine: on the copy model (tools/demo-model/copy-weights.ts), whose translation is its
 * source and whose cross-attention peaks on the token it copies, every target word is linked to the very same
 * characters of the source; a random model (tiny) and its q8 weights give links inside both texts. The alignment
 * graph is found by what the Softmax reads (the generated models name no nodes) and by the export's node names.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { TranslationEngine } from './engine.js';
import { alignmentLayer, CROSS_ATTENTION_OUTPUT, exposeCrossAttention } from './graphs/cross-attention.js';
import { GraphBuilder, WeightSink, ElemType } from '../tools/demo-model/onnx-builder.js';

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
  for (const dtype of ['fp32', 'q8'] as const) {
    it(`links every word of the copy model's translation to the same characters of its source (${dtype})`, async () => {
      const engine = await load('tiny-copy', dtype);
      expect(await engine.alignmentUnavailable()).toBeNull();
      // Asked for together, rows of different lengths share one padded alignment run.
      const rows = SENTENCES.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));
      const translations = await Promise.all(rows.map((row) => engine.generate(row)));
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
    });
  }

  it("aligns each row with its own generation's encoder states, in one run with rows of other lengths", async () => {
    const engine = await load('tiny', 'fp32');
    // Alone and generated without `align`: the pass encodes the source again (the path every row took before).
    const alone: { tokens: number[]; links: number[] }[] = [];
    for (const text of SENTENCES) {
      const { translation, links } = await aligned(engine, text);
      alone.push({ tokens: translation.tokenIds, links });
    }
    expect(new Set(alone.map((a) => JSON.stringify(a.links))).size).toBe(SENTENCES.length);
    const before = engine.alignmentStats();
    // Together: the rows of even index keep their states, the others are encoded again, all in one padded run.
    const rows = SENTENCES.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));
    const translations = await Promise.all(rows.map((row, i) => engine.generate(row, { align: i % 2 === 0 })));
    const links = await Promise.all(SENTENCES.map((text, i) => engine.align(text, rows[i]!, translations[i]!)));
    const after = engine.alignmentStats();
    expect(after.runs - before.runs).toBe(1);
    expect(after.encodedRows - before.encodedRows).toBe(SENTENCES.length / 2);
    SENTENCES.forEach((_, i) => {
      expect(translations[i]!.tokenIds).toEqual(alone[i]!.tokens);
      expect(links[i]).toEqual(alone[i]!.links);
    });
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
