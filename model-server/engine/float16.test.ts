import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { type TranslateRow, TranslationEngine } from './engine.js';
import { seededRows } from '../test/engine-fixtures.js';
import { convertModelToFloat16, float16Bits, float16Value, fromFloat16, toFloat16 } from './float16.js';

const root = mkdtempSync(path.join(tmpdir(), 'float16-'));
const dir = path.join(root, 'tiny');
const engines: TranslationEngine[] = [];

beforeAll(() => {
  makeDemoModel('tiny', dir);
  for (const name of ['encoder_model', 'decoder_model_merged']) {
    convertModelToFloat16(path.join(dir, 'onnx', `${name}.onnx`), path.join(dir, 'onnx', `${name}_fp16.onnx`));
  }
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  rmSync(root, { recursive: true, force: true });
});

async function load(extra: Partial<Parameters<typeof TranslationEngine.load>[0]>) {
  const engine = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1, ...extra });
  engines.push(engine);
  return engine;
}

const WORDS = 'the of and to in is hello world good morning thank you please quick brown fox 42 , . !'.split(' ');
const rows = (count: number, seed: number): TranslateRow[] => seededRows(count, seed, WORDS, 30);

describe('float16', () => {
  it('converts to and from IEEE half exactly where half can hold the value, rounding to nearest even', () => {
    expect(float16Bits(1)).toBe(0x3c00);
    expect(float16Bits(-2)).toBe(0xc000);
    expect(float16Bits(65504)).toBe(0x7bff);
    expect(float16Bits(1e9)).toBe(0x7c00);
    expect(float16Bits(2 ** -24)).toBe(1);
    expect(float16Bits(1 + 2 ** -11)).toBe(0x3c00); // a tie rounds to the even mantissa
    expect(float16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02);
    expect(float16Value(0x3555)).toBeCloseTo(1 / 3, 3);
    const values = Float32Array.from([0, -0.5, 3.140625, 2 ** -20, -65504, 0.1]);
    const back = fromFloat16(toFloat16(values));
    for (const [i, v] of values.entries()) expect(Math.abs(back[i]! - v)).toBeLessThanOrEqual(Math.abs(v) * 2 ** -11);
    // Every finite half survives the round trip bit for bit.
    const all = Uint16Array.from({ length: 0x7c00 }, (_, i) => i);
    expect(toFloat16(fromFloat16(all))).toEqual(all);
  });

  it('an fp16 export runs behind the float32 boundary, on the fast path, with the tokens of its graph as exported', async () => {
    const fast = await load({ dtype: 'fp16' });
    expect(fast.dtype).toBe('fp16');
    expect(fast.decoderOutputs.appendedCache).toHaveLength(2 * fast.config.decoderLayers);
    expect(fast.decoderOutputs.greedyTop2).not.toBeNull();
    const slow = await load({ dtype: 'fp16', decoderGraph: 'as-exported' });
    const fp32 = await load({ dtype: 'fp32' });
    const list = rows(16, 3);
    const greedy = { numBeams: 1, maxNewTokens: 30 };
    const half = (await fast.translate(list, greedy)).map((t) => t.tokenIds);
    expect(half).toEqual((await slow.translate(list, greedy)).map((t) => t.tokenIds));
    // fp16 is a rounding of the same weights: most first tokens after the language token agree with fp32.
    const full = (await fp32.translate(list, greedy)).map((t) => t.tokenIds);
    const agree = half.filter((ids, i) => ids[1] === full[i]![1]).length;
    expect(agree).toBeGreaterThanOrEqual(12);
  });
});
