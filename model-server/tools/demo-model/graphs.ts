/**
 * @module tools/demo-model/graphs — the encoder and decoder graphs of a BART-style translation transformer, in
 * the input/output layout of the Hugging Face ONNX export (see shared/M2M100_ONNX.md).
 *
 * The computation is M2M100's (and NLLB's): scaled token embeddings plus sinusoidal positions (offset 2), pre-norm
 * layers (self-attention, cross-attention, ReLU feed-forward), final layer norms, an LM head. mBART's learns its
 * positions, normalises the embeddings and uses GELU; Marian's sinusoids start at 0, its layers normalise after the
 * residual add, it has no final norms, uses SiLU and adds `final_logits_bias` (families.ts `FamilyTraits`).
 *
 * One optional addition over the export (`decoderSelfMask`): a `decoder_attention_mask` input over
 * cached + new decoder positions, from which positions are also derived. With it, rows whose caches have
 * different lengths can share one decoder batch (rows joining mid-generation merge into the running
 * batch). transformers.js does not feed that input, so the `tiny` preset keeps the export's exact layout,
 * where the engine merges only rows that have taken the same number of steps, as it must for real exports.
 */
import { type Dim, ElemType, GraphBuilder, valueInfo } from './onnx-builder.js';
import { FAMILIES, type FamilyTraits, specialIds } from './families.js';
import { decoderVocabSize, type DemoPreset } from './presets.js';
import { Mulberry32 } from './prng.js';

/** Large negative added to masked attention scores: exp() underflows to exactly 0, no inf arithmetic. */
const MASKED = -1e9;
/** The position table's first row: fairseq's (M2M100, NLLB, mBART) skip padding_idx + 1 rows; Marian's none. */
const positionOffset = (traits: FamilyTraits) => (traits.positions === 'sinusoidal' ? 0 : 2);

/**
 * A side's token embedding, its HF name and rows: one table shared by both sides, or with a separate target
 * vocabulary each side's own (`model.{encoder,decoder}.embed_tokens.weight`, as MarianMTModel names them).
 */
export function embeddingTable(p: DemoPreset, side: 'encoder' | 'decoder'): [string, number] {
  if (p.targetVocabSize === undefined) return ['model.shared.weight', p.vocabSize];
  return [`model.${side}.embed_tokens.weight`, side === 'encoder' ? p.vocabSize : p.targetVocabSize];
}

/** fairseq/M2M100 sinusoidal table: rows [sin | cos] per position, the padding row (1) zero. */
export function sinusoidalTable(rows: number, dim: number): Float32Array {
  const half = dim / 2;
  const scale = Math.log(10000) / (half - 1);
  const table = new Float32Array(rows * dim);
  for (let pos = 0; pos < rows; pos++) {
    if (pos === 1) continue;
    for (let i = 0; i < half; i++) {
      const angle = pos * Math.exp(-scale * i);
      table[pos * dim + i] = Math.sin(angle);
      table[pos * dim + half + i] = Math.cos(angle);
    }
  }
  return table;
}

/** Marian's sinusoidal table: row p is [sin(p·ω_j) | cos(p·ω_j)], ω_j = 10000^(−2j/dim), from position 0. */
export function marianSinusoidalTable(rows: number, dim: number): Float32Array {
  const half = dim / 2;
  const table = new Float32Array(rows * dim);
  for (let pos = 0; pos < rows; pos++) {
    for (let j = 0; j < half; j++) {
      const angle = pos / Math.pow(10000, (2 * j) / dim);
      table[pos * dim + j] = Math.sin(angle);
      table[pos * dim + half + j] = Math.cos(angle);
    }
  }
  return table;
}

/** Helpers shared by both graphs; `g` is the graph being built. */
class Layers {
  readonly traits: FamilyTraits;
  readonly offset: number;

  constructor(
    readonly g: GraphBuilder,
    readonly p: DemoPreset,
  ) {
    this.traits = FAMILIES[p.family];
    this.offset = positionOffset(this.traits);
  }

  /** A residual block: `x + f(norm(x))` before-norm, `norm(x + f(x))` after-norm (Marian). */
  block(x: string, normName: string, f: (h: string) => string): string {
    if (this.traits.normBefore) return this.g.op('Add', [x, f(this.layerNorm(x, normName))]);
    return this.layerNorm(this.g.op('Add', [x, f(x)]), normName);
  }

  /** The final layer norm of a stack, where the family has one. */
  finalNorm(x: string, name: string): string {
    return this.traits.finalNorm ? this.layerNorm(x, name) : x;
  }

  activation(x: string): string {
    const g = this.g;
    switch (this.p.activation ?? this.traits.activation) {
      case 'relu':
        return g.op('Relu', [x]);
      case 'swish':
        return g.op('Mul', [x, g.op('Sigmoid', [x])]);
      case 'gelu': // exact GELU (opset 17 has no Gelu op): x · ½(1 + erf(x/√2))
        return g.op('Mul', [
          g.op('Mul', [x, g.float(0.5)]),
          g.op('Add', [g.float(1), g.op('Erf', [g.op('Mul', [x, g.float(Math.SQRT1_2)])])]),
        ]);
    }
  }

  get headDim(): number {
    return this.p.dModel / this.p.heads;
  }

  /** `x W + b`; `gain` scales the weights' spread (query/key gain makes random attention less uniform). */
  linear(x: string, name: string, inDim: number, outDim: number, g: GraphBuilder = this.g, gain = 1): string {
    const w = this.g.weight(`${name}.weight`, [inDim, outDim], { kind: 'uniform', std: gain / Math.sqrt(inDim) });
    const b = this.g.weight(`${name}.bias`, [outDim], { kind: 'uniform', std: 0.02 });
    return g.op('Add', [g.op('MatMul', [x, w]), b]);
  }

  layerNorm(x: string, name: string): string {
    const d = this.p.dModel;
    const scale = this.g.weight(`${name}.weight`, [d], { kind: 'constant', value: 1 });
    const bias = this.g.weight(`${name}.bias`, [d], { kind: 'constant', value: 0 });
    return this.g.op('LayerNormalization', [x, scale, bias], { axis: { i: -1 }, epsilon: { f: 1e-5 } });
  }

  /** [B, T, d] → [B, H, T, dh] */
  splitHeads(x: string, g: GraphBuilder = this.g): string {
    const shaped = g.op('Reshape', [x, g.int64([0, 0, this.p.heads, this.headDim])]);
    return g.op('Transpose', [shaped], { perm: { ints: [0, 2, 1, 3] } });
  }

  /** Projected, head-split, pre-scaled queries. */
  queries(x: string, name: string): string {
    const q = this.linear(x, `${name}.q_proj`, this.p.dModel, this.p.dModel, this.g, this.p.attentionGain);
    return this.g.op('Mul', [this.splitHeads(q), this.g.float(1 / Math.sqrt(this.headDim))]);
  }

  /** softmax(q kᵀ + bias) v, merged back to [B, T, d] and projected out. */
  attend(q: string, k: string, v: string, bias: string, name: string): string {
    const g = this.g;
    const scores = g.op('Add', [g.op('MatMul', [q, g.op('Transpose', [k], { perm: { ints: [0, 1, 3, 2] } })]), bias]);
    const probs = g.op('Softmax', [scores], { axis: { i: -1 } });
    const context = g.op('Transpose', [g.op('MatMul', [probs, v])], { perm: { ints: [0, 2, 1, 3] } });
    const merged = g.op('Reshape', [context, g.int64([0, 0, this.p.dModel])]);
    return this.linear(merged, `${name}.out_proj`, this.p.dModel, this.p.dModel);
  }

  feedForward(x: string, name: string): string {
    const hidden = this.activation(this.linear(x, `${name}.fc1`, this.p.dModel, this.p.ffnDim));
    return this.linear(hidden, `${name}.fc2`, this.p.ffnDim, this.p.dModel);
  }

  /** Scaled token embedding plus the position table rows `positionIds` (already offset), normalised for mBART. */
  embed(inputIds: string, positionIds: string, side: 'encoder' | 'decoder'): string {
    const g = this.g;
    const d = this.p.dModel;
    const [name, v] = embeddingTable(this.p, side);
    const table = g.weight(name, [v, d], { kind: 'uniform', std: 1 / Math.sqrt(d) });
    const rows = this.p.maxPositions + this.offset;
    const positions =
      this.traits.positions === 'learned'
        ? g.weight(`model.${side}.embed_positions.weight`, [rows, d], { kind: 'uniform', std: 1 / Math.sqrt(d) })
        : g.weight(`model.${side}.embed_positions.weights`, [rows, d], {
            kind: 'data',
            data: this.offset === 0 ? marianSinusoidalTable(rows, d) : sinusoidalTable(rows, d),
          });
    const tokens = g.op('Mul', [g.op('Gather', [table, inputIds]), g.float(Math.sqrt(d))]);
    const x = g.op('Add', [tokens, g.op('Gather', [positions, positionIds])]);
    return this.traits.embeddingNorm ? this.layerNorm(x, `model.${side}.layernorm_embedding`) : x;
  }

  /** [B, S] int64 key mask → additive [B, 1, 1, S] float bias. */
  keyMaskBias(mask: string): string {
    const g = this.g;
    const keep = g.op('Cast', [mask], { to: { i: ElemType.FLOAT } });
    const bias = g.op('Mul', [g.op('Sub', [g.float(1), keep]), g.float(MASKED)]);
    return g.op('Unsqueeze', [bias, g.int64([1, 2])]);
  }

  /** A `[1]` int64 dimension of `x` as a scalar. */
  dimScalar(x: string, axis: number): string {
    const g = this.g;
    return g.op('Squeeze', [g.op('Shape', [x], { start: { i: axis }, end: { i: axis + 1 } }), g.int64([0])]);
  }
}

/** The encoder: input_ids, attention_mask → last_hidden_state. */
export function buildEncoder(g: GraphBuilder, p: DemoPreset): void {
  const L = new Layers(g, p);
  const d = p.dModel;
  const dims: Dim[] = ['batch_size', 'encoder_sequence_length'];
  const inputIds = g.input('input_ids', ElemType.INT64, dims);
  const mask = g.input('attention_mask', ElemType.INT64, dims);

  const length = L.dimScalar(inputIds, 1);
  const positionIds = g.op('Range', [
    g.int64([L.offset], []),
    g.op('Add', [length, g.int64([L.offset], [])]),
    g.int64([1], []),
  ]);
  let x = L.embed(inputIds, positionIds, 'encoder');
  const bias = L.keyMaskBias(mask);
  for (let i = 0; i < p.encoderLayers; i++) {
    const name = `model.encoder.layers.${i}`;
    x = L.block(x, `${name}.self_attn_layer_norm`, (h) => {
      const k = L.splitHeads(L.linear(h, `${name}.self_attn.k_proj`, d, d, g, p.attentionGain));
      const v = L.splitHeads(L.linear(h, `${name}.self_attn.v_proj`, d, d));
      return L.attend(L.queries(h, `${name}.self_attn`), k, v, bias, `${name}.self_attn`);
    });
    x = L.block(x, `${name}.final_layer_norm`, (h) => L.feedForward(h, name));
  }
  g.output(L.finalNorm(x, 'model.encoder.layer_norm'), 'last_hidden_state', ElemType.FLOAT, [...dims, d]);
}

/**
 * The decoder. `merged`: decoder_model_merged.onnx (past inputs, `use_cache_branch` choosing between the
 * cached encoder keys/values and computing them); `no-cache`: decoder_model.onnx (no past at all).
 */
export function buildDecoder(g: GraphBuilder, p: DemoPreset, variant: 'merged' | 'no-cache'): void {
  const L = new Layers(g, p);
  const { dModel: d, heads: H } = p;
  const dh = L.headDim;
  const inputIds = g.input('input_ids', ElemType.INT64, ['batch_size', 'decoder_sequence_length']);
  const encoderMask = g.input('encoder_attention_mask', ElemType.INT64, ['batch_size', 'encoder_sequence_length']);
  const encoderStates = g.input('encoder_hidden_states', ElemType.FLOAT, ['batch_size', 'encoder_sequence_length', d]);
  const pastDims: Dim[] = ['batch_size', H, 'past_decoder_sequence_length', dh];
  const encoderKvDims: Dim[] = ['batch_size', H, 'encoder_sequence_length_out', dh];
  const past: { key: string; value: string }[] = [];
  if (variant === 'merged') {
    for (let i = 0; i < p.decoderLayers; i++) {
      past.push({
        key: g.input(`past_key_values.${i}.decoder.key`, ElemType.FLOAT, pastDims),
        value: g.input(`past_key_values.${i}.decoder.value`, ElemType.FLOAT, pastDims),
      });
    }
    for (let i = 0; i < p.decoderLayers; i++) {
      g.input(`past_key_values.${i}.encoder.key`, ElemType.FLOAT, encoderKvDims);
      g.input(`past_key_values.${i}.encoder.value`, ElemType.FLOAT, encoderKvDims);
    }
  }
  const useCache = variant === 'merged' ? g.input('use_cache_branch', ElemType.BOOL, [1]) : null;

  // Lengths: T new tokens after P cached ones; total = P + T.
  const newLength = g.op('Shape', [inputIds], { start: { i: 1 }, end: { i: 2 } });
  const pastLength =
    variant === 'merged' ? g.op('Shape', [past[0]!.key], { start: { i: 2 }, end: { i: 3 } }) : g.int64([0]);
  const totalLength = g.op('Add', [pastLength, newLength]);
  // Which cached + new decoder positions are real. Without the input (the export's layout) all are.
  const selfMask = p.decoderSelfMask
    ? g.input('decoder_attention_mask', ElemType.INT64, ['batch_size', 'total_sequence_length'])
    : g.op('Expand', [
        g.int64([1], []),
        g.op('Concat', [g.op('Shape', [inputIds], { start: { i: 0 }, end: { i: 1 } }), totalLength], {
          axis: { i: 0 },
        }),
      ]);

  // Position of a token = number of real tokens up to it − 1 (mask cumsum), + the family's offset.
  const realSoFar = g.op('CumSum', [selfMask, g.int64([1], [])]);
  const current = g.op('Slice', [realSoFar, pastLength, totalLength, g.int64([1])]);
  const positionIds = g.op('Add', [g.op('Max', [current, g.int64([1], [])]), g.int64([L.offset - 1], [])]);
  let x = L.embed(inputIds, positionIds, 'decoder');

  // Self-attention bias: key j visible to query i (absolute P + i) iff j ≤ P + i and mask[j] = 1.
  const squeeze0 = (t: string) => g.op('Squeeze', [t, g.int64([0])]);
  const queryIndex = g.op('Range', [squeeze0(pastLength), squeeze0(totalLength), g.int64([1], [])]);
  const keyIndex = g.op('Range', [g.int64([0], []), squeeze0(totalLength), g.int64([1], [])]);
  const causal = g.op('LessOrEqual', [
    g.op('Unsqueeze', [keyIndex, g.int64([0])]),
    g.op('Unsqueeze', [queryIndex, g.int64([1])]),
  ]);
  const keyOk = g.op('Unsqueeze', [g.op('Cast', [selfMask], { to: { i: ElemType.BOOL } }), g.int64([1, 2])]);
  const selfBias = g.op('Where', [g.op('And', [causal, keyOk]), g.float(0), g.float(MASKED)]);
  const crossBias = L.keyMaskBias(encoderMask);

  // Cross-attention keys/values: computed from the encoder states on the first step, then reused.
  const crossKv = (b: GraphBuilder, i: number) => {
    const name = `model.decoder.layers.${i}.encoder_attn`;
    return {
      key: L.splitHeads(L.linear(encoderStates, `${name}.k_proj`, d, d, b, p.attentionGain), b),
      value: L.splitHeads(L.linear(encoderStates, `${name}.v_proj`, d, d, b), b),
    };
  };
  const cross: { key: string; value: string }[] = [];
  const presentEncoderNames = (i: number) => ({ key: `present.${i}.encoder.key`, value: `present.${i}.encoder.value` });
  if (useCache !== null) {
    const reuse = g.branch();
    const compute = g.branch();
    for (let i = 0; i < p.decoderLayers; i++) {
      for (const part of ['key', 'value'] as const) {
        const reused = reuse.op('Identity', [`past_key_values.${i}.encoder.${part}`], {}, [`reuse_${i}_${part}`]);
        reuse.output(reused, reused, ElemType.FLOAT, encoderKvDims);
      }
      const kv = crossKv(compute, i);
      compute.output(kv.key, `compute_${i}_key`, ElemType.FLOAT, encoderKvDims);
      compute.output(kv.value, `compute_${i}_value`, ElemType.FLOAT, encoderKvDims);
    }
    const outs = Array.from({ length: p.decoderLayers }, (_, i) => presentEncoderNames(i)).flatMap((n) => [
      n.key,
      n.value,
    ]);
    g.opN(
      'If',
      [useCache],
      { then_branch: { g: reuse.graph('reuse_encoder_kv') }, else_branch: { g: compute.graph('compute_encoder_kv') } },
      outs,
    );
    for (let i = 0; i < p.decoderLayers; i++) cross.push(presentEncoderNames(i));
  } else {
    for (let i = 0; i < p.decoderLayers; i++) {
      const kv = crossKv(g, i);
      const names = presentEncoderNames(i);
      g.op('Identity', [kv.key], {}, [names.key]);
      g.op('Identity', [kv.value], {}, [names.value]);
      cross.push(names);
    }
  }

  const presentDims: Dim[] = ['batch_size', H, 'present_decoder_sequence_length', dh];
  for (let i = 0; i < p.decoderLayers; i++) {
    const name = `model.decoder.layers.${i}`;
    x = L.block(x, `${name}.self_attn_layer_norm`, (h) => {
      let k = L.splitHeads(L.linear(h, `${name}.self_attn.k_proj`, d, d, g, p.attentionGain));
      let v = L.splitHeads(L.linear(h, `${name}.self_attn.v_proj`, d, d));
      // The cache is the graph output itself (no Identity copy of the whole cache per step).
      if (variant === 'merged') {
        k = g.op('Concat', [past[i]!.key, k], { axis: { i: 2 } }, [`present.${i}.decoder.key`]);
        v = g.op('Concat', [past[i]!.value, v], { axis: { i: 2 } }, [`present.${i}.decoder.value`]);
      }
      g.output(k, `present.${i}.decoder.key`, ElemType.FLOAT, presentDims);
      g.output(v, `present.${i}.decoder.value`, ElemType.FLOAT, presentDims);
      return L.attend(
        L.queries(h, `${name}.self_attn`),
        `present.${i}.decoder.key`,
        `present.${i}.decoder.value`,
        selfBias,
        `${name}.self_attn`,
      );
    });
    x = L.block(x, `${name}.encoder_attn_layer_norm`, (h) =>
      L.attend(L.queries(h, `${name}.encoder_attn`), cross[i]!.key, cross[i]!.value, crossBias, `${name}.encoder_attn`),
    );
    x = L.block(x, `${name}.final_layer_norm`, (h) => L.feedForward(h, name));
  }
  x = L.finalNorm(x, 'model.decoder.layer_norm');

  // LM head as one GEMM over [B·T, d] with the [V, d] matrix transposed in place (no transposed copy).
  const V = decoderVocabSize(p);
  const head = p.tieEmbeddings
    ? embeddingTable(p, 'decoder')[0]
    : g.weight('lm_head.weight', [V, d], { kind: 'uniform', std: 1 / Math.sqrt(d) });
  const flat = g.op('Reshape', [x, g.int64([-1, d])]);
  const logitsFlat = g.op('Gemm', [flat, head], { transB: { i: 1 } });
  const logitsShape = g.op('Concat', [g.op('Shape', [inputIds]), g.int64([V])], { axis: { i: 0 } });
  let logits = g.op('Reshape', [logitsFlat, logitsShape]);
  if (L.traits.finalLogitsBias) {
    // Random, and high at `<pad>`: the token decoding starts from is the one a random model repeats, so the stand-in
    // needs generation_config's bad_words_ids (as the real one has) to write anything else.
    const data = new Float32Array(V);
    const rng = new Mulberry32(p.seed + 1);
    for (let v = 0; v < V; v++) data[v] = rng.next() - 0.5;
    data[specialIds(p.family, V).pad] = 4;
    logits = g.op('Add', [logits, g.weight('final_logits_bias', [1, V], { kind: 'data', data })]);
  }
  if (p.eosBiasPerPosition !== 0) {
    const eosBias = new Float32Array(V);
    eosBias[specialIds(p.family, V).eos] = p.eosBiasPerPosition;
    const perPosition = g.weight('eos_position_bias', [V], { kind: 'data', data: eosBias });
    const position = g.op('Cast', [g.op('Unsqueeze', [positionIds, g.int64([2])])], { to: { i: ElemType.FLOAT } });
    logits = g.op('Add', [logits, g.op('Mul', [position, perPosition])]);
  }
  g.output(logits, 'logits', ElemType.FLOAT, ['batch_size', 'decoder_sequence_length', V]);
  for (let i = 0; i < p.decoderLayers; i++) {
    const names = presentEncoderNames(i);
    g.outputs.push(
      valueInfo(names.key, ElemType.FLOAT, encoderKvDims),
      valueInfo(names.value, ElemType.FLOAT, encoderKvDims),
    );
  }
}
