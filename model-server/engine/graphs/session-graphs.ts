/**
 * @module engine/session-graphs — the graphs the sessions load, prepared in memory from the model folder's files: for
 * the host path the merged decoder split and given extra outputs (`rewriteDecoder`), for the device-state path
 * (WebGPU) split, fused and given a float encoder mask (`deviceGraphs`).
 */
import { readFileSync } from 'node:fs';
import type onnxProto from 'onnx-proto';
import { addCrossAttention, exposeCrossAttention, joinCrossGraph, pruneTo } from './cross-attention.js';
import { floatMaskInput, fuseDecoderGraph } from './decoder-fuse.js';
import { exposeBeamTopK, exposeCacheAppends, exposeGreedyTop2, logitsUnfit } from './decoder-graph.js';
import { splitCrossAttention } from './decoder-split.js';
import type { ModelConfig } from '../model-config.js';
import { joinModel, smallFloatWeights, splitModel, weightDims, weightName } from './onnx-wire.js';

/** What the step loop fetches from the decoder, beyond `present.*.encoder` on the first step. */
export interface DecoderOutputs {
  /** Outputs of the appended self-attention entries in cache order (layer i key, value, …); null: `present.*.decoder`. */
  appendedCache: string[] | null;
  /** Top-2 outputs for all-greedy steps; null: `logits`. */
  greedyTop2: { values: string; ids: string } | null;
  /**
   * The beam head is in the decoder graph (decoder-graph.ts `BEAM_TOPK`: every run feeds its switch and k; beam steps
   * fetch its outputs instead of the logits); false: beam steps read the logits.
   */
  beamTopK: boolean;
  /**
   * The step graph's output of a layer's cross-attention (cross-attention.ts `addCrossAttention`, `[n, 1, S]`): a
   * step fetches it for the rows that keep it for their word alignment; null: those rows take a pass after generation.
   */
  crossAttention: string | null;
  /** Why a rewrite was not made (empty when all were). */
  notes: string[];
}

/** A step graph with none of the rewrites' outputs, and why (`notes`). */
const noOutputs = (notes: string[]): DecoderOutputs => ({
  appendedCache: null,
  greedyTop2: null,
  beamTopK: false,
  crossAttention: null,
  notes,
});

export function asExported(reason: string): DecoderOutputs {
  return noOutputs([`decoder graph not rewritten: ${reason}`]);
}

const ENCODER_MASK = 'encoder_attention_mask';

/**
 * The merged decoder prepared for the step loop, as bytes (null: load the file as is), and what it offers: split
 * into a step graph and a cross-attention graph where decoder-split.ts recognises it, then the extra outputs of
 * decoder-graph.ts. Only the graph's nodes and outputs are decoded and re-encoded (onnx-wire.ts): inline weights
 * are copied through as bytes, each graph taking only those it reads, and external ones stay in their data file,
 * so a published export with 1.3 GB of inline weights takes the fast path like any other. Editing in memory at
 * each load, rather than preparing an edited copy once, needs no write access to the model folder and no copy
 * that could go stale beside it; it costs one transient copy of the file while the sessions are created.
 */
export function rewriteDecoder(
  file: string,
  config: ModelConfig,
): { bytes: Uint8Array | null; cross: Uint8Array | null; outputs: DecoderOutputs } {
  const { model, weights } = splitModel(readFileSync(file));
  const outputs = noOutputs([]);
  const split = splitCrossAttention(model, config.decoderLayers);
  if (!split.ok) outputs.notes.push(`cross-attention cache copied by every step: ${split.reason}`);
  const step = split.ok ? split.step.model : model;
  const appended = exposeCacheAppends(step, config.decoderLayers);
  if (appended.ok) outputs.appendedCache = appended.outputs;
  else outputs.notes.push(`whole present cache fetched: ${appended.reason}`);
  const top2 = exposeGreedyTop2(step, config.vocabSize);
  if (top2.ok) outputs.greedyTop2 = { values: top2.values, ids: top2.ids };
  else outputs.notes.push(`greedy steps fetch logits: ${top2.reason}`);
  const beam = exposeBeamTopK(step, config.vocabSize);
  if (beam.ok) outputs.beamTopK = true;
  else outputs.notes.push(`beam steps fetch logits: ${beam.reason}`);
  if (!split.ok) {
    const changed = outputs.appendedCache !== null || outputs.greedyTop2 !== null || outputs.beamTopK;
    return { bytes: changed ? joinModel(model, weights) : null, cross: null, outputs };
  }
  // Only a split step graph reads the cross cache as fed, which is how the layer's Softmax is found in any export.
  const attention = addCrossAttention(step, config.decoderLayers);
  if (attention.ok) outputs.crossAttention = attention.output.name!;
  else outputs.notes.push(`aligned rows take a pass after generation: ${attention.reason}`);
  const read = weightsReader(weights);
  return {
    bytes: joinModel(step, read(split.step.uses)),
    cross: joinModel(split.cross.model, read(split.cross.uses)),
    outputs,
  };
}

/**
 * The graph of the alignment pass (engine/alignment.ts), or why there is none: the decoder as the step loop's host
 * path would split it (a merged one: the step graph, its cross-attention graph joined in front, so that a pass is one
 * run from the encoder states; a no-cache one: itself), with only one output, a layer's cross-attention
 * (cross-attention.ts). Made when the first row asks for an alignment, so an engine that never aligns never reads the
 * file again.
 */
export function alignmentGraphs(
  decoderFile: string,
  merged: boolean,
  config: ModelConfig,
): { step: Uint8Array; layer: number } | { reason: string } {
  const { model, weights } = splitModel(readFileSync(decoderFile));
  const read = weightsReader(weights);
  if (!merged) {
    const exposed = exposeCrossAttention(model, config.decoderLayers);
    return exposed.ok ? { step: joinModel(model, read(exposed.uses)), layer: exposed.layer } : exposed;
  }
  const split = splitCrossAttention(model, config.decoderLayers);
  if (!split.ok) return { reason: `the merged decoder could not be split: ${split.reason}` };
  const exposed = exposeCrossAttention(split.step.model, config.decoderLayers);
  if (!exposed.ok) return exposed;
  // The cross-attention cache only of the layers the cut-down step graph still reads.
  const reads = new Set((split.step.model.graph?.input ?? []).map((input) => input.name ?? ''));
  const crossGraph = split.cross.model.graph!;
  const crossUses = pruneTo(
    crossGraph,
    (crossGraph.output ?? []).filter((o) => reads.has((o.name ?? '').replace(/^present\./, 'past_key_values.'))),
  );
  joinCrossGraph(split.step.model, split.cross.model);
  return { step: joinModel(split.step.model, read(new Set([...exposed.uses, ...crossUses]))), layer: exposed.layer };
}

/** The weights of `weights` a graph reads, by the names it `uses` (decoder-split.ts `SplitGraph.uses`). */
function weightsReader(weights: readonly Uint8Array[]): (uses: ReadonlySet<string>) => Uint8Array[] {
  const named = weights.map((entry) => ({ entry, name: weightName(entry) }));
  return (uses) => named.filter((w) => uses.has(w.name)).map((w) => w.entry);
}

/**
 * The graphs of the device-state path (WebGPU), or null where the decoder cannot take it: the merged decoder split as
 * for `rewriteDecoder` but with no extra outputs (a step reads the logits through the heads and keeps its cache as
 * `present.*`), and the step graph and the encoder fused by decoder-fuse.ts (a third of the GPU programs per run).
 */
export function deviceGraphs(
  encoderFile: string,
  decoderFile: string,
  config: ModelConfig,
): {
  encoder: Uint8Array;
  bytes: Uint8Array;
  cross: Uint8Array;
  /** The graphs read `encoder_attention_mask` as float (decoder-fuse.ts `floatMaskInput`). */
  floatMask: boolean;
  outputs: DecoderOutputs;
} | null {
  const { model, weights } = splitModel(readFileSync(decoderFile));
  const split = splitCrossAttention(model, config.decoderLayers);
  if (!split.ok || logitsUnfit(split.step.model, config.vocabSize) !== undefined) return null;
  const read = weightsReader(weights);
  const stepWeights = read(split.step.uses);
  const step = split.step.model;
  step.graph!.node = [...(step.graph!.node ?? [])];
  // The packed projections' Split takes its sizes as an input from opset 13 on.
  const opset = Number(step.opsetImport?.find((o) => (o.domain ?? '') === '')?.version ?? 0);
  const fused = fuseDecoderGraph(step.graph!, config.decoderHeads, smallFloatWeights(stepWeights, config.dModel), {
    singleQuery: true,
    ...(opset >= 13 ? { weightDims: weightDims(stepWeights) } : {}),
  });
  const cross = split.cross.model;
  cross.graph!.node = [...(cross.graph!.node ?? [])];
  const reads = (g: onnxProto.onnx.IGraphProto) => (g.input ?? []).some((i) => i.name === ENCODER_MASK);
  // Both graphs read the mask as float, or neither changes (the layout uploads one mask for both).
  const floatMask =
    reads(step.graph!) &&
    (!reads(cross.graph!) || floatMaskInput(cross.graph!, ENCODER_MASK, true)) &&
    floatMaskInput(step.graph!, ENCODER_MASK) &&
    (!reads(cross.graph!) || floatMaskInput(cross.graph!, ENCODER_MASK));
  const encoder = splitModel(readFileSync(encoderFile));
  // Layer norms only: onnxruntime 1.30's WebGPU MultiHeadAttention gives wrong results from 32 queries on (checked
  // on lavapipe: 0.5 off at 32 positions, exact at 31), which an encoder reaches; a decoder step has one query.
  const encoderFused = fuseDecoderGraph(encoder.model.graph!, config.encoderHeads, smallFloatWeights(encoder.weights), {
    attention: false,
  });
  const note = (what: string, r: typeof fused) =>
    `${what}: ${r.attention} attention blocks (${r.packedProjections} with one q/k/v projection) and ${r.skipLayerNorm} layer norms fused (${r.nodesBefore} → ${r.nodesAfter} nodes)`;
  return {
    encoder: joinModel(encoder.model, encoder.weights),
    bytes: joinModel(step, stepWeights),
    cross: joinModel(cross, read(split.cross.uses)),
    floatMask,
    outputs: noOutputs([`state on the device; ${note('decoder step', fused)}; ${note('encoder', encoderFused)}`]),
  };
}
