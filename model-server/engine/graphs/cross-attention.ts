/**
 * @module engine/cross-attention — one decoder layer's cross-attention probabilities, averaged over heads, as an output
 * (`[batch, T, S]`, float32) of the decoder's step graph: one more output of the graph the step loop runs
 * (`addCrossAttention`: two small nodes, fetched only for the rows that keep it), and the one output of a copy cut
 * down to what computes it, the graph of the alignment pass (`exposeCrossAttention`, alignment.ts).
 *
 * The layer is the middle one (`⌊(layers − 1) / 2⌋`): in trained translation models a middle layer's cross-attention
 * follows the words best (the last ones attend to what comes next), which is also what Marian and Bergamot take for
 * their tag placement. Its Softmax is found by the export's node name (optimum / transformers.js:
 * `/model/decoder/layers.N/encoder_attn/Softmax`), else by what it reads: the Softmax whose scores are computed from
 * `past_key_values.N.encoder.key` (the step graph decoder-split.ts cuts out reads the cross cache as fed), which is how
 * the project's generated models are found. A fused attention (one `MultiHeadAttention` operator) hides its
 * probabilities, so this runs on the unfused split graph, never on decoder-fuse.ts' output. The split's
 * cross-attention graph is then joined in front (`joinCrossGraph`), so that the pass reads the encoder states.
 */
import type onnxProto from 'onnx-proto';
import { ATTR, FLOAT, valueInfo } from './onnx-wire.js';

type IModelProto = onnxProto.onnx.IModelProto;
type INodeProto = onnxProto.onnx.INodeProto;

/** The output the alignment session fetches. */
export const CROSS_ATTENTION_OUTPUT = 'mt_serve.cross_attention';

export type CrossAttentionResult =
  | {
      ok: true;
      layer: number;
      /** Every value the pruned graph's nodes read: the weights to keep. */
      uses: ReadonlySet<string>;
    }
  | { ok: false; reason: string };

/** How far back from a Softmax its scores are traced to the cache they read (MatMul, Transpose, Add, Reshape…). */
const TRACE_DEPTH = 6;

/** The layer whose cross-attention aligns. */
export const alignmentLayer = (layers: number) => Math.max(0, Math.floor((layers - 1) / 2));

/**
 * Make `CROSS_ATTENTION_OUTPUT` the one output of the top-level graph of `model` (changed in place): the mean over
 * heads of layer `alignmentLayer(layers)`'s cross-attention Softmax, cast to float32; nodes, inputs and inline
 * initializers nothing of it reads are dropped.
 */
export function exposeCrossAttention(model: IModelProto, layers: number): CrossAttentionResult {
  const added = addCrossAttention(model, layers);
  if (!added.ok) return added;
  // Only what the attention needs is kept: the layers above it and the LM head (logits for every position, a
  // vocabulary's worth of floats each) would cost more than the pass itself, since onnxruntime runs every node.
  const uses = pruneTo(model.graph!, [added.output]);
  return { ok: true, layer: added.layer, uses };
}

/**
 * `CROSS_ATTENTION_OUTPUT` added to the outputs of the top-level graph of `model` (changed in place), every other
 * output kept: the mean over heads of layer `alignmentLayer(layers)`'s cross-attention Softmax, cast to float32,
 * `[batch, T, S]`. Two small nodes over what the layer computes anyway: the step loop's graph carries it, so that a
 * row asking for its alignment reads it from its own steps (loop/step.ts) instead of a pass after them.
 */
export function addCrossAttention(
  model: IModelProto,
  layers: number,
): { ok: true; layer: number; output: onnxProto.onnx.IValueInfoProto } | { ok: false; reason: string } {
  const graph = model.graph;
  if (!graph?.node) return { ok: false, reason: 'no graph' };
  const layer = alignmentLayer(layers);
  const softmax = findCrossSoftmax(graph.node, layer);
  if (softmax === undefined)
    return { ok: false, reason: `no cross-attention Softmax found for decoder layer ${layer}` };
  const opset = model.opsetImport?.find((o) => !o.domain || o.domain === 'ai.onnx')?.version;
  const version = Number(opset ?? 17);
  const mean = `${CROSS_ATTENTION_OUTPUT}/mean`;
  const reduce: INodeProto = {
    opType: 'ReduceMean',
    name: `${CROSS_ATTENTION_OUTPUT}/reduce`,
    input: [softmax.output![0]!],
    output: [mean],
    attribute: [{ name: 'keepdims', type: ATTR.INT, i: 0 }],
  };
  // Opset 18 moved ReduceMean's axes from an attribute to an input.
  if (version >= 18) {
    const axes = `${CROSS_ATTENTION_OUTPUT}/axes`;
    graph.initializer ??= [];
    graph.initializer.push({
      name: axes,
      dims: [1],
      dataType: 7,
      rawData: new Uint8Array(BigInt64Array.of(1n).buffer),
    });
    reduce.input!.push(axes);
  } else {
    reduce.attribute!.push({ name: 'axes', type: ATTR.INTS, ints: [1] });
  }
  graph.node.push(reduce, {
    opType: 'Cast',
    name: `${CROSS_ATTENTION_OUTPUT}/cast`,
    input: [mean],
    output: [CROSS_ATTENTION_OUTPUT],
    attribute: [{ name: 'to', type: ATTR.INT, i: FLOAT }],
  });
  const output = valueInfo(CROSS_ATTENTION_OUTPUT, FLOAT, ['batch_size', 'decoder_sequence_length', 'encoder_length']);
  graph.output = [...(graph.output ?? []), output];
  return { ok: true, layer, output };
}

/**
 * Cut `graph` (in place) down to what computes `outputs`, which become its outputs: nodes, inputs and inline
 * initializers nothing of them reads are dropped. Returns every value the kept nodes read (the weights to keep).
 */
export function pruneTo(graph: onnxProto.onnx.IGraphProto, outputs: onnxProto.onnx.IValueInfoProto[]): Set<string> {
  const needed = new Set(outputs.map((output) => output.name ?? ''));
  const kept: INodeProto[] = [];
  const nodes = graph.node ?? [];
  for (let i = nodes.length - 1; i >= 0; i--) {
    const node = nodes[i]!;
    if (!(node.output ?? []).some((out) => needed.has(out))) continue;
    kept.push(node);
    for (const input of node.input ?? []) if (input) needed.add(input);
    // A node with subgraphs reads outer values by name from inside them.
    for (const attribute of node.attribute ?? []) {
      for (const sub of [attribute.g, ...(attribute.graphs ?? [])]) {
        for (const inner of sub?.node ?? []) for (const input of inner.input ?? []) if (input) needed.add(input);
      }
    }
  }
  graph.node = kept.reverse();
  graph.input = (graph.input ?? []).filter((input) => needed.has(input.name ?? ''));
  graph.initializer = (graph.initializer ?? []).filter((init) => needed.has(init.name ?? ''));
  graph.output = outputs;
  return needed;
}

function findCrossSoftmax(nodes: readonly INodeProto[], layer: number): INodeProto | undefined {
  const softmaxes = nodes.filter((node) => node.opType === 'Softmax');
  const named = softmaxes.find((node) => node.name === `/model/decoder/layers.${layer}/encoder_attn/Softmax`);
  if (named !== undefined) return named;
  const producer = new Map<string, INodeProto>();
  for (const node of nodes) for (const out of node.output ?? []) producer.set(out, node);
  const key = `past_key_values.${layer}.encoder.key`;
  return softmaxes.find((softmax) => {
    // Breadth-first over what the scores are computed from, a few nodes deep: the keys are a Transpose or two away.
    let frontier = [...(softmax.input ?? [])];
    for (let depth = 0; depth < TRACE_DEPTH && frontier.length > 0; depth++) {
      if (frontier.includes(key)) return true;
      frontier = frontier.flatMap((value) => producer.get(value)?.input ?? []).filter((value) => value !== '');
    }
    return frontier.includes(key);
  });
}

/**
 * `cross` (decoder-split.ts' cross-attention graph, pruned to what `step` reads) put in front of `step`, changed in
 * place, so that one run computes both: each `past_key_values.N.encoder.*` input of `step` becomes the
 * `present.N.encoder.*` value `cross` makes, and `cross`'s inputs join `step`'s. A node of `step` making a value that
 * `cross` makes is dropped: both come from one graph, so the value is the same (the split's step graph passes its fed
 * cache on under the `present` name through such an Identity). Why: a pass is one run instead of two, and the
 * keys/values never cross to the host and back.
 */
export function joinCrossGraph(step: IModelProto, cross: IModelProto): void {
  const graph = step.graph!;
  const front = cross.graph!;
  const made = new Map(
    (front.output ?? []).map((o) => [(o.name ?? '').replace(/^present\./, 'past_key_values.'), o.name ?? '']),
  );
  const defined = new Set((front.node ?? []).flatMap((node) => node.output ?? []));
  // The split shares node objects between its two graphs: a node that reads a cache input is copied, not edited.
  const rest = (graph.node ?? [])
    .filter((node) => !(node.output ?? []).some((out) => defined.has(out)))
    .map((node) =>
      (node.input ?? []).some((name) => made.has(name))
        ? { ...node, input: node.input!.map((name) => made.get(name) ?? name) }
        : node,
    );
  graph.node = [...(front.node ?? []), ...rest];
  const inputs = (graph.input ?? []).filter((input) => !made.has(input.name ?? ''));
  const named = new Set(inputs.map((input) => input.name ?? ''));
  graph.input = [...inputs, ...(front.input ?? []).filter((input) => !named.has(input.name ?? ''))];
  const initializers = new Set((graph.initializer ?? []).map((init) => init.name ?? ''));
  graph.initializer = [
    ...(graph.initializer ?? []),
    ...(front.initializer ?? []).filter((init) => !initializers.has(init.name ?? '')),
  ];
  const infos = new Set((graph.valueInfo ?? []).map((info) => info.name ?? ''));
  graph.valueInfo = [...(graph.valueInfo ?? []), ...(front.valueInfo ?? []).filter((i) => !infos.has(i.name ?? ''))];
}
