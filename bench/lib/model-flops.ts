/**
 * @module bench/lib/model-flops — the GEMM work of an M2M100 (BART-family) encoder–decoder, from its
 * config.json, as a list of MatMul shapes with how often each runs.
 *
 * What is counted (2·K·N FLOPs per row of a [rows,K]×[K,N] MatMul):
 * - per generated token (one decoder step of one row): per decoder layer the self-attention q, k, v, o
 *   projections (4 × d×d), the cross-attention q and o projections (2 × d×d), the FFN (d×ffn and ffn×d);
 *   then the LM head (d×vocab).
 * - per source token (once per sentence): per encoder layer q, k, v, o (4 × d×d) and the FFN; per decoder layer
 *   the cross-attention k and v projections of the encoder output (2 × d×d), which the merged decoder computes
 *   on its first step.
 * Not counted: attention scores and context (QKᵀ and AV: 4·d·t FLOPs per layer for t cached positions, under
 * 1% at the lengths benchmarked), layer norms, softmax, embeddings, KV-cache copies. They are real work the
 * engine does that the ceiling leaves out, so they show up as efficiency below 1.
 */

/** The config.json keys that size the model (M2M100 / BART naming). */
export interface Seq2SeqShape {
  dModel: number;
  encoderLayers: number;
  decoderLayers: number;
  encoderFfnDim: number;
  decoderFfnDim: number;
  vocabSize: number;
}

/** Read the shape from a parsed config.json; throws naming the missing key. */
export function shapeFromConfig(config: Record<string, unknown>): Seq2SeqShape {
  const num = (key: string): number => {
    const v = config[key];
    if (typeof v !== 'number' || !(v > 0))
      throw new Error(`config.json: ${key} must be a positive number, got ${JSON.stringify(v)}`);
    return v;
  };
  return {
    dModel: num('d_model'),
    encoderLayers: num('encoder_layers'),
    decoderLayers: num('decoder_layers'),
    encoderFfnDim: num('encoder_ffn_dim'),
    decoderFfnDim: num('decoder_ffn_dim'),
    vocabSize: num('vocab_size'),
  };
}

/** One weight shape [K, N] and how many times it is applied per token (per generated or per source token). */
export interface GemmUse {
  /** Stable key, e.g. `d×d`, used to look up its measured rate. */
  key: string;
  k: number;
  n: number;
  /** MatMuls of this shape per token. */
  count: number;
}

function merge(uses: GemmUse[]): GemmUse[] {
  const byKey = new Map<string, GemmUse>();
  for (const u of uses) {
    const prev = byKey.get(u.key);
    if (prev) prev.count += u.count;
    else byKey.set(u.key, { ...u });
  }
  return [...byKey.values()];
}

/** The GEMMs of one decoder step for one row (see module doc). */
export function decoderStepGemms(s: Seq2SeqShape): GemmUse[] {
  const d = s.dModel;
  return merge([
    { key: gemmKey(d, d), k: d, n: d, count: 6 * s.decoderLayers },
    { key: gemmKey(d, s.decoderFfnDim), k: d, n: s.decoderFfnDim, count: s.decoderLayers },
    { key: gemmKey(s.decoderFfnDim, d), k: s.decoderFfnDim, n: d, count: s.decoderLayers },
    { key: gemmKey(d, s.vocabSize), k: d, n: s.vocabSize, count: 1 },
  ]);
}

/** The GEMMs per source token: encoder layers plus the decoder's cross-attention k/v of the encoder output. */
export function sourceTokenGemms(s: Seq2SeqShape): GemmUse[] {
  const d = s.dModel;
  return merge([
    { key: gemmKey(d, d), k: d, n: d, count: 4 * s.encoderLayers + 2 * s.decoderLayers },
    { key: gemmKey(d, s.encoderFfnDim), k: d, n: s.encoderFfnDim, count: s.encoderLayers },
    { key: gemmKey(s.encoderFfnDim, d), k: s.encoderFfnDim, n: d, count: s.encoderLayers },
  ]);
}

export function gemmKey(k: number, n: number): string {
  return `${k}x${n}`;
}

/** FLOPs of a list of GEMM uses for one row (token). */
export function flopsPerRow(uses: readonly GemmUse[]): number {
  return uses.reduce((sum, u) => sum + 2 * u.k * u.n * u.count, 0);
}

/** Every distinct weight shape either list uses. */
export function distinctShapes(...lists: GemmUse[][]): { key: string; k: number; n: number }[] {
  const seen = new Map<string, { key: string; k: number; n: number }>();
  for (const u of lists.flat()) if (!seen.has(u.key)) seen.set(u.key, { key: u.key, k: u.k, n: u.n });
  return [...seen.values()];
}

/**
 * Seconds the GEMMs of `uses` take for `rows` rows when each shape runs at its measured rate
 * (`gflops(key)` in GFLOP/s at that row count).
 */
export function gemmSeconds(uses: readonly GemmUse[], rows: number, gflops: (key: string) => number): number {
  let seconds = 0;
  for (const u of uses) seconds += (2 * rows * u.k * u.n * u.count) / (gflops(u.key) * 1e9);
  return seconds;
}

/**
 * The machine's ceiling for this model, in generated tokens/s, at batch `batch`:
 * - `decoderOnly`: batch ÷ (time of one decoder step of `batch` rows at the measured GEMM rates) — the
 *   issue's "GFLOP/s ÷ FLOPs per generated token", with the GFLOP/s of each layer shape at that batch.
 * - `allWork`: the same, plus each sentence's source-token GEMMs (encoder, cross-attention k/v) at
 *   `batch × sourceTokens` rows, spread over its `newTokens` generated tokens — the work the engine cannot
 *   skip to produce those tokens.
 */
export function ceilingTokensPerS(
  shape: Seq2SeqShape,
  batch: number,
  newTokens: number,
  sourceTokens: number,
  decoderRate: (key: string) => number,
  encoderRate: (key: string) => number,
): { decoderOnly: number; allWork: number; decoderGflopPerToken: number; allWorkGflopPerToken: number } {
  const step = decoderStepGemms(shape);
  const source = sourceTokenGemms(shape);
  const stepSeconds = gemmSeconds(step, batch, decoderRate);
  const encodeSeconds = gemmSeconds(source, batch * sourceTokens, encoderRate);
  const decoderFlops = flopsPerRow(step);
  return {
    decoderOnly: batch / stepSeconds,
    allWork: (batch * newTokens) / (newTokens * stepSeconds + encodeSeconds),
    decoderGflopPerToken: decoderFlops / 1e9,
    allWorkGflopPerToken: (decoderFlops + (flopsPerRow(source) * sourceTokens) / newTokens) / 1e9,
  };
}
