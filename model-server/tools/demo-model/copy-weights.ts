/**
 * @module tools/demo-model/copy-weights — the weights of the `tiny-copy` preset, built by construction: on M2M100's
 * unchanged graph (graphs.ts), greedy decoding writes the source's tokens back (`</s>` included, so it stops there),
 * and every head of every decoder layer's cross-attention peaks on the source position it copies. Tests of word
 * alignment and tag placement can then say exactly where each word of the "translation" came from.
 *
 * The construction (dModel 256, 4 heads of 64; every weight not named below is 0, layer norms' scales 1):
 * - Each token v has a code c(v) = (onehot₁₆(v >> 5) + onehot₃₂(v & 31)) / √2: unit length, and two codes share
 *   at most one half (c·c' ≤ ½). Each block of dimensions is written with its mirror (−x) beside it, so every hidden
 *   vector has mean 0 and, with the lengths fixed below, the same norm: a layer norm only divides by one constant σ.
 * - dims [0, 96): the token's code ±A (the token embedding); [96, 128): the position, [sin(pωⱼ) | cos(pωⱼ)] for 8
 *   frequencies, ± (the position table, encoder and decoder alike); [128, 224): the copied code, ± (written by the
 *   first decoder layer's cross-attention); [224, 256): unused.
 * - Every self-attention and feed-forward block adds 0 (out_proj and fc2 are 0), so the encoder's output is its
 *   embedding / σ and the decoder's query side its embedding / σ.
 * - Cross-attention: every head's query and key read the position's [sin | cos] with gain β, so the score of decoder
 *   position p on source position s is β²/(σ²√64) · Σⱼ cos((p − s)ωⱼ), highest at s = p (the margin to any other
 *   s within 160 positions is ≥ 3.5 of 8 for the periods below). Decoder position p reads token p − 1 (position 0
 *   `</s>`, position 1 the target language), so it attends source token p: the one it should write next.
 * - Head 0's values are the source token's code; the first layer's out_proj writes them into [128, 224) with gain
 *   γ; the LM head reads only that block, so token v's logit is γ·c(v)·c(copied)/σ': the copied token wins by half
 *   of γ/σ'.
 *
 * On Marian's graph (`tiny-copy-separate`) the same weights copy too: its layer norms after each residual add divide
 * by the same σ, its sinusoids start at 0 on both sides (decoder position p, reading `<pad>` at 0, attends source
 * token p and writes it), and `final_logits_bias` is 0. With a separate target vocabulary, target token t carries the
 * code of the source token that is the same piece (vocab.ts `targetSourceIds`), in the decoder's embedding and in the
 * LM head: the copy is written in target ids.
 */
import type { DemoPreset } from './presets.js';
import { targetSourceIds } from './vocab.js';

const TOKEN = 0;
const POSITION = 96;
const COPIED = 128;
const CODE = 48;
/** Periods (in positions) of the 8 position frequencies: no shift of 1..160 positions comes near a full match. */
const PERIODS = [2.5, 3.7, 5.3, 7.9, 11.3, 17.9, 31, 97];
const FREQUENCIES = PERIODS.length;
/** Token amplitude: with the positions' fixed length, every embedding has the same norm. */
const A = 2;
/** Query/key gain: scores ≥ ~25 apart between the copied position and any other (softmax ≈ one-hot). */
const BETA = 4;
/** Copied-code gain: the copied token's logit is ahead of every other by several units. */
const GAMMA = 8;

/** The preset's shape the construction needs (a preset of another shape cannot be built this way). */
export function checkCopyShape(p: DemoPreset): void {
  const family = p.family === 'm2m100' || (p.family === 'marian' && p.marianTargets === undefined);
  if (!family || p.dModel !== 256 || p.heads !== 4 || p.vocabSize > 16 * 32 || p.tieEmbeddings) {
    throw new Error(
      `preset ${p.name}: the copy construction needs M2M100 or a one-pair Marian, dModel 256, 4 heads, ≤ 512 tokens, untied`,
    );
  }
}

const code = (v: number): [number, number] => [v >> 5, 16 + (v & 31)];

/** Per row of the token table `name`, the source id of its token: a decoder-side table's rows are target ids. */
function sourceIds(p: DemoPreset, name: string, rows: number): readonly number[] {
  const decoderSide = name.includes('decoder') || name === 'lm_head.weight';
  if (!decoderSide || p.targetVocabSize === undefined) return Array.from({ length: rows }, (_, v) => v);
  return targetSourceIds(p.vocabSize, p.targetVocabSize, p.seed);
}

/** Write `value` at `dim` and its mirror `−value` at `dim + CODE` (or `+ width` for other blocks). */
function mirrored(out: Float32Array, base: number, dim: number, value: number, width: number): void {
  out[base + dim] = value;
  out[base + dim + width] = -value;
}

/**
 * The constructed value of weight `name` with shape `dims` (graphs.ts' names: `x W` weights are `[in, out]`), or
 * zeros for every weight the construction leaves out.
 */
export function copyWeight(p: DemoPreset, name: string, dims: readonly number[]): Float32Array {
  const d = p.dModel;
  const out = new Float32Array(dims.reduce((a, b) => a * b, 1));
  const dh = d / p.heads;
  if (name.endsWith('norm.weight')) return out.fill(1);
  if (/^model\.(shared|encoder\.embed_tokens|decoder\.embed_tokens)\.weight$/.test(name)) {
    // The graph multiplies embeddings by √d.
    const scale = A / Math.SQRT2 / Math.sqrt(d);
    const source = sourceIds(p, name, dims[0]!);
    for (let v = 0; v < dims[0]!; v++)
      for (const dim of code(source[v]!)) mirrored(out, v * d, TOKEN + dim, scale, CODE);
    return out;
  }
  if (name.endsWith('embed_positions.weights')) {
    // Rows are positions + 2 (fairseq's offset); the content is a function of the row alone, so the shift cancels.
    for (let row = 0; row < dims[0]!; row++) {
      PERIODS.forEach((period, j) => {
        const angle = (2 * Math.PI * row) / period;
        mirrored(out, row * d, POSITION + j, Math.sin(angle), 2 * FREQUENCIES);
        mirrored(out, row * d, POSITION + FREQUENCIES + j, Math.cos(angle), 2 * FREQUENCIES);
      });
    }
    return out;
  }
  const cross = /^model\.decoder\.layers\.(\d+)\.encoder_attn\.(q|k|v|out)_proj\.weight$/.exec(name);
  if (cross === null) {
    if (name === 'lm_head.weight') {
      const source = sourceIds(p, name, dims[0]!);
      for (let v = 0; v < dims[0]!; v++) for (const dim of code(source[v]!)) out[v * d + COPIED + dim] = 1;
    }
    return out;
  }
  const [, layer, part] = cross;
  if (part === 'q' || part === 'k') {
    for (let h = 0; h < p.heads; h++) {
      for (let j = 0; j < 2 * FREQUENCIES; j++) out[(POSITION + j) * d + h * dh + j] = BETA;
    }
  } else if (part === 'v') {
    for (let j = 0; j < CODE; j++) out[(TOKEN + j) * d + j] = 1;
  } else if (layer === '0') {
    for (let j = 0; j < CODE; j++) mirrored(out, j * d, COPIED + j, GAMMA, CODE);
  }
  return out;
}
