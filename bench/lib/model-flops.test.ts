import { describe, expect, it } from 'vitest';
import { buildMatmulModel, copiesFor, measureMatmuls } from './matmul-ceiling.js';
import {
  ceilingTokensPerS,
  decoderStepGemms,
  distinctShapes,
  flopsPerRow,
  shapeFromConfig,
  sourceTokenGemms,
} from './model-flops.js';

const m2m100 = shapeFromConfig({
  d_model: 1024,
  encoder_layers: 12,
  decoder_layers: 12,
  encoder_ffn_dim: 4096,
  decoder_ffn_dim: 4096,
  vocab_size: 128112,
});

describe('model FLOPs', () => {
  it("counts M2M100-418M's decoder step: 6 d×d + FFN per layer, plus the LM head", () => {
    const perLayer = 6 * 1024 * 1024 + 2 * 1024 * 4096;
    expect(flopsPerRow(decoderStepGemms(m2m100))).toBe(2 * (12 * perLayer + 1024 * 128112));
    expect(flopsPerRow(decoderStepGemms(m2m100)) / 1e9).toBeCloseTo(0.6148, 3);
    // Per source token: 12 encoder layers (4 d×d + FFN) and 12 cross-attention k, v projections.
    expect(flopsPerRow(sourceTokenGemms(m2m100))).toBe(
      2 * (12 * (4 * 1024 * 1024 + 2 * 1024 * 4096) + 12 * 2 * 1024 * 1024),
    );
    expect(distinctShapes(decoderStepGemms(m2m100), sourceTokenGemms(m2m100)).map((s) => s.key)).toEqual([
      '1024x1024',
      '1024x4096',
      '4096x1024',
      '1024x128112',
    ]);
  });

  it("turns one GEMM rate into the issue's ceiling: GFLOP/s ÷ GFLOPs per token", () => {
    // At a flat 116 GFLOP/s the issue quotes ~185 tokens/s for M2M100-418M.
    const c = ceilingTokensPerS(
      m2m100,
      64,
      16,
      20,
      () => 116,
      () => 116,
    );
    expect(c.decoderOnly).toBeCloseTo(116 / c.decoderGflopPerToken, 6);
    expect(c.decoderOnly).toBeGreaterThan(180);
    expect(c.decoderOnly).toBeLessThan(195);
    // The all-work ceiling spreads 20 source tokens of encoder work over 16 generated tokens.
    expect(c.allWork).toBeCloseTo(116 / c.allWorkGflopPerToken, 6);
    expect(c.allWorkGflopPerToken).toBeCloseTo(
      c.decoderGflopPerToken + (flopsPerRow(sourceTokenGemms(m2m100)) * 20) / 16 / 1e9,
      9,
    );
    expect(() => shapeFromConfig({ d_model: 1024 })).toThrow(/encoder_layers/);
  });

  it('builds MatMul graphs with enough weight copies to leave the cache', () => {
    expect(copiesFor(1024, 1024)).toBe(16);
    expect(copiesFor(1024, 128112)).toBe(1);
    const bytes = buildMatmulModel(16, 8, 2);
    expect(bytes.length).toBeGreaterThan(2 * 16 * 8 * 4);
    // Deterministic: the same graph every time.
    expect(Buffer.from(buildMatmulModel(16, 8, 2)).equals(Buffer.from(bytes))).toBe(true);
  });

  it('measures GFLOP/s on a real onnxruntime session', async () => {
    const results = await measureMatmuls([{ key: '64x32', k: 64, n: 32 }], [1, 4], {
      intraOpThreads: 1,
      minTimeMs: 20,
    });
    expect(results.map((r) => [r.key, r.rows, r.copies])).toEqual([
      ['64x32', 1, copiesFor(64, 32)],
      ['64x32', 4, copiesFor(64, 32)],
    ]);
    for (const r of results) {
      expect(r.runs).toBeGreaterThanOrEqual(3);
      expect(r.gflops).toBeCloseTo((2 * r.rows * 64 * 32 * r.copies) / r.runSeconds / 1e9, 6);
      expect(r.gflops).toBeGreaterThan(0);
    }
  });
});
