/**
 * @module engine/decoder-fuse — fuses the decoder step graph's attention blocks and residual layer norms into the
 * `com.microsoft` operators onnxruntime's GPU providers implement, for the device-state path (WebGPU):
 * - each `softmax(q kᵀ·s + bias) v` block with its head split/merge reshapes and transposes, and for self-attention
 *   the `Concat(past, new)` of the cache, becomes one `MultiHeadAttention` (past/present in, present out);
 * - each `LayerNormalization(Add(x, Add(MatMul(…), b)))` becomes one `SkipLayerNormalization` with the bias `b`,
 *   whose fourth output is the residual sum the next block reads.
 *
 * Why: the WebGPU provider runs every node as its own GPU program and records each from the host. A decoder step of
 * the 418M shapes is ~700 of them, at a few hundredths of a millisecond each whatever their size; the fused graph
 * runs a third as many, with the same arithmetic. onnxruntime's own graph optimiser makes none of these fusions for
 * the WebGPU provider (it makes them for CPU and CUDA).
 *
 * Recognised (decoder-match.ts): the attention as the project's generated models write it (the query scaled after the
 * head split, the bias added to the scores), and with the query scaled before the split as transformers' BART code
 * does; the second is written from that code, not checked against a published export (none can be fetched here). A
 * block that does not match is left as it is, and the result counts what was fused (describe's decoder notes).
 */
import onnxProto from 'onnx-proto';
import { Index, intAttr, matchAttention, projectionBiases } from './decoder-match.js';
import { ATTR } from './onnx-wire.js';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;

const MS_DOMAIN = 'com.microsoft';

export interface FuseOptions {
  /** Fuse attention blocks (default true); false: layer norms only. */
  attention?: boolean;
  /**
   * Every run feeds one new position per row (the step loop's device path): a cross-attention bias is used as it is
   * (no expansion over the query length), and without a `decoder_attention_mask` input the self-attention bias (all
   * zeros for one query that sees every cached key) is dropped with its arithmetic.
   */
  singleQuery?: boolean;
  /**
   * The weights' dims by name (onnx-wire.ts `weightDims`): given, each self-attention block's query, key and value
   * projections of one input become one MatMul over the three weights side by side and a Split (`packProjections`).
   */
  weightDims?: ReadonlyMap<string, readonly number[]>;
}

export interface FuseResult {
  /** Attention blocks made one `MultiHeadAttention` (self and cross). */
  attention: number;
  /** Residual + layer norm pairs made one `SkipLayerNormalization`. */
  skipLayerNorm: number;
  /** Self-attention blocks whose three projections are one MatMul. */
  packedProjections: number;
  /** Nodes before and after (dead nodes removed). */
  nodesBefore: number;
  nodesAfter: number;
}

/**
 * Fuse `graph` in place (see module doc) for a model with `heads` attention heads. The graph must be a decoder step
 * graph whose values are all made before they are read (onnx's node order); new nodes take the replaced ones' place.
 */
export function fuseDecoderGraph(
  graph: IGraphProto,
  heads: number,
  weights: ReadonlyMap<string, Float32Array> = new Map(),
  options: FuseOptions = {},
): FuseResult {
  const fuseAttention = options.attention ?? true;
  const single = options.singleQuery === true;
  // One query per row and no self-attention mask: every cached key is visible, the bias is all zeros.
  const selfUnmasked = single && !(graph.input ?? []).some((i) => i.name === 'decoder_attention_mask');
  const nodesBefore = graph.node?.length ?? 0;
  let attention = 0;
  let skipLayerNorm = 0;
  // Each pass re-indexes: a fusion changes who reads what.
  let ix = new Index(graph, weights);
  const replace = (old: INodeProto[], made: INodeProto[], at: INodeProto) => {
    const drop = new Set(old);
    const nodes: INodeProto[] = [];
    for (const node of graph.node ?? []) {
      if (node === at) nodes.push(...made);
      if (!drop.has(node)) nodes.push(node);
    }
    graph.node = nodes;
  };

  // The cross-attention bias is [B, 1, 1, T] for every query; MultiHeadAttention wants it [B, 1, S, T].
  const queryLength = new Map<string, string>();
  for (const softmax of fuseAttention ? (graph.node ?? []).filter((n) => n.opType === 'Softmax') : []) {
    const m = matchAttention(ix, softmax);
    if (!m) continue;
    const name = `mt_serve.fused.attention.${attention}`;
    let bias = m.past !== null && selfUnmasked ? '' : m.bias;
    if (m.past === null && !single) {
      // Expand the bias over the query length (a no-op copy when S = 1, the usual step).
      let expanded = queryLength.get(bias);
      if (expanded === undefined) {
        expanded = `${name}.bias`;
        const shape = `${name}.bias_shape`;
        const made: INodeProto[] = [
          { opType: 'Shape', input: [m.query], output: [`${shape}.q`], name: `${shape}/shape` },
          {
            opType: 'Gather',
            input: [`${shape}.q`, `${shape}.one`],
            output: [`${shape}.s`],
            name: `${shape}/gather`,
            attribute: [{ name: 'axis', type: ATTR.INT, i: 0 }],
          },
          {
            opType: 'Concat',
            input: [`${shape}.ones`, `${shape}.s`, `${shape}.one_tail`],
            output: [shape],
            name: `${shape}/concat`,
            attribute: [{ name: 'axis', type: ATTR.INT, i: 0 }],
          },
          { opType: 'Expand', input: [bias, shape], output: [expanded], name: `${expanded}/expand` },
        ];
        const int64 = (n: string, values: bigint[]) => ({
          name: n,
          dims: [values.length],
          dataType: 7,
          rawData: new Uint8Array(BigInt64Array.from(values).buffer),
        });
        graph.initializer ??= [];
        graph.initializer.push(
          int64(`${shape}.one`, [1n]),
          int64(`${shape}.ones`, [1n, 1n]),
          int64(`${shape}.one_tail`, [1n]),
        );
        replace([], made, m.replaced[0]!);
        queryLength.set(bias, expanded);
      }
      bias = expanded;
    }
    // Self-attention's query/key/value biases go into the operator's packed bias (three Adds fewer).
    const biases = m.past === null ? null : projectionBiases(ix, [m.query, m.key, m.value], m.replaced);
    let [query, key, value] = [m.query, m.key, m.value];
    let packed = '';
    if (biases !== null) {
      [query, key, value] = biases.inputs;
      packed = `${name}.qkv_bias`;
      const all = new Float32Array(biases.values.reduce((sum, v) => sum + v.length, 0));
      let at = 0;
      for (const v of biases.values) {
        all.set(v, at);
        at += v.length;
      }
      graph.initializer ??= [];
      graph.initializer.push({ name: packed, dims: [all.length], dataType: 1, rawData: new Uint8Array(all.buffer) });
      m.replaced.push(...biases.adds);
    }
    const mha: INodeProto = {
      opType: 'MultiHeadAttention',
      domain: MS_DOMAIN,
      name,
      input: [query, key, value, packed, '', bias, ...(m.past ? [m.past.key, m.past.value] : [])],
      output: [m.output, ...(m.past ? [m.past.presentKey, m.past.presentValue] : [])],
      attribute: [
        { name: 'num_heads', type: ATTR.INT, i: heads },
        { name: 'scale', type: ATTR.FLOAT, f: m.scale },
      ],
    };
    replace(m.replaced, [mha], m.replaced[0]!);
    attention += 1;
    ix = new Index(graph, weights);
  }

  let packedProjections = 0;
  const dims = options.weightDims;
  if (dims !== undefined) {
    for (const mha of (graph.node ?? []).filter(isSelfAttention)) {
      const packed = packProjections(ix, mha, dims);
      if (packed === null) continue;
      replace(packed.replaced, packed.nodes, packed.replaced[0]!);
      graph.initializer ??= [];
      graph.initializer.push(packed.sizes);
      packedProjections += 1;
      ix = new Index(graph, weights);
    }
  }

  // LayerNormalization(x1) with x1 = Add(x0, Add(MatMul(…), b)), b a constant vector.
  for (const ln of (graph.node ?? []).filter((n) => n.opType === 'LayerNormalization')) {
    const axis = intAttr(ln, 'axis') ?? -1;
    if (axis !== -1 || (ln.output?.length ?? 0) > 1 || (ln.input?.length ?? 0) < 3) continue;
    const residual = ix.made(ln.input![0], 'Add');
    if (!residual) continue;
    const [r0, r1] = residual.input as string[];
    const branch = (name: string) => {
      const add = ix.made(name, 'Add');
      if (!add || !ix.private(name, residual)) return undefined;
      const [p0, p1] = add.input as string[];
      const mm = ix.made(p0, 'MatMul') ? p0 : ix.made(p1, 'MatMul') ? p1 : undefined;
      const b = mm === p0 ? p1 : p0;
      if (mm === undefined || !ix.private(mm, add) || ix.producer.has(b!)) return undefined;
      return { add, matmulOut: mm, bias: b! };
    };
    const found = branch(r1!)
      ? { y: branch(r1!)!, skip: r0! }
      : branch(r0!)
        ? { y: branch(r0!)!, skip: r1! }
        : undefined;
    if (!found) continue;
    const sum = residual.output![0]!;
    const sumRead = (ix.consumers.get(sum) ?? []).some((n) => n !== ln) || ix.outputs.has(sum);
    const epsilon = ln.attribute?.find((a) => a.name === 'epsilon')?.f ?? 1e-5;
    const sln: INodeProto = {
      opType: 'SkipLayerNormalization',
      domain: MS_DOMAIN,
      name: `mt_serve.fused.skip_layer_norm.${skipLayerNorm}`,
      input: [found.y.matmulOut, found.skip, ln.input![1]!, ln.input![2]!, found.y.bias],
      output: [ln.output![0]!, '', '', ...(sumRead ? [sum] : [])],
      attribute: [{ name: 'epsilon', type: ATTR.FLOAT, f: epsilon }],
    };
    replace([ln, residual, found.y.add], [sln], residual);
    skipLayerNorm += 1;
    ix = new Index(graph, weights);
  }

  removeDeadNodes(graph);
  return { attention, skipLayerNorm, packedProjections, nodesBefore, nodesAfter: graph.node?.length ?? 0 };
}

/** A fused self-attention block: a `MultiHeadAttention` with a past. */
const isSelfAttention = (n: INodeProto) =>
  n.domain === MS_DOMAIN && n.opType === 'MultiHeadAttention' && (n.input?.length ?? 0) > 6 && n.input![6] !== '';

/**
 * `MatMul(x, Wq)`, `MatMul(x, Wk)`, `MatMul(x, Wv)` read only by `mha` → `Split(MatMul(x, Concat(Wq, Wk, Wv)))`. Why:
 * at a step's batch (M = 64 rows) one projection is a GEMM too narrow to fill a GPU (the WebGPU provider's tiled
 * MatMul runs 64 workgroups for N = 1024); the three side by side run as one dispatch three times as wide, and a node
 * fewer. The Concat reads only weights: onnxruntime folds it into one weight when it loads the graph. Null when the
 * projections are not three MatMuls of one input by `[K, N]` weights of one K.
 */
function packProjections(
  ix: Index,
  mha: INodeProto,
  dims: ReadonlyMap<string, readonly number[]>,
): { replaced: INodeProto[]; nodes: INodeProto[]; sizes: onnxProto.onnx.ITensorProto } | null {
  const outputs = mha.input!.slice(0, 3);
  const matmuls = outputs.map((name) => ix.made(name, 'MatMul'));
  if (matmuls.some((m, i) => m === undefined || !ix.private(outputs[i]!, mha))) return null;
  const [x, ...others] = matmuls.map((m) => m!.input![0]!);
  const w = matmuls.map((m) => m!.input![1]!);
  const shapes = w.map((name) => (ix.producer.has(name) ? undefined : dims.get(name)));
  if (others.some((o) => o !== x) || shapes.some((d) => d?.length !== 2 || d[0] !== shapes[0]![0])) return null;
  const name = `mt_serve.fused.qkv.${mha.name ?? outputs[0]}`;
  const sizes = {
    name: `${name}.sizes`,
    dims: [3],
    dataType: 7,
    rawData: new Uint8Array(BigInt64Array.from(shapes.map((d) => BigInt(d![1]!))).buffer),
  };
  const nodes: INodeProto[] = [
    {
      opType: 'Concat',
      input: w,
      output: [`${name}.weight`],
      name: `${name}/weight`,
      attribute: [{ name: 'axis', type: ATTR.INT, i: 1 }],
    },
    { opType: 'MatMul', input: [x!, `${name}.weight`], output: [`${name}.out`], name: `${name}/matmul` },
    {
      opType: 'Split',
      input: [`${name}.out`, sizes.name],
      output: outputs,
      name: `${name}/split`,
      attribute: [{ name: 'axis', type: ATTR.INT, i: -1 }],
    },
  ];
  return { replaced: matmuls.map((m) => m!), nodes, sizes };
}

/** Drop nodes none of whose outputs is read or a graph output (the shape arithmetic of the replaced blocks). */
function removeDeadNodes(graph: IGraphProto): void {
  const outputs = new Set((graph.output ?? []).map((o) => o.name));
  for (;;) {
    const read = new Set<string>();
    for (const node of graph.node ?? []) {
      for (const input of node.input ?? []) read.add(input);
      for (const attr of node.attribute ?? [])
        for (const sub of [attr.g, ...(attr.graphs ?? [])]) subgraphReads(sub, read);
    }
    const live = (graph.node ?? []).filter((n) =>
      (n.output ?? []).some((o) => o !== '' && (read.has(o) || outputs.has(o))),
    );
    if (live.length === graph.node?.length) return;
    graph.node = live;
  }
}

/** Every name a subgraph reads, its own and its nested subgraphs' (they may read the outer graph's values). */
function subgraphReads(graph: IGraphProto | null | undefined, into: Set<string>): void {
  for (const node of graph?.node ?? []) {
    for (const input of node.input ?? []) into.add(input);
    for (const attr of node.attribute ?? [])
      for (const sub of [attr.g, ...(attr.graphs ?? [])]) subgraphReads(sub, into);
  }
  for (const out of graph?.output ?? []) if (out.name) into.add(out.name);
}

/**
 * Make graph input `name` (int64 `[n, S]` mask) a float input where every node reading it is `Cast(to float)`: the
 * Casts go and their readers read the input. Why: the WebGPU provider has no int64 Cast, so onnxruntime ran it on the
 * CPU, copying the device-held mask to the host and the result back at every step; a float mask uploaded once per
 * cohort layout stays on the device. Returns whether the graph now takes a float `name` (false: unchanged, or absent);
 * `check`: only whether it would, the graph unchanged.
 */
export function floatMaskInput(graph: IGraphProto, name: string, check = false): boolean {
  const input = (graph.input ?? []).find((i) => i.name === name);
  if (!input?.type?.tensorType) return false;
  const readers = (graph.node ?? []).filter((n) => n.input?.includes(name));
  const isFloatCast = (n: INodeProto) => n.opType === 'Cast' && intAttr(n, 'to') === 1 && n.input?.length === 1;
  if (readers.length === 0 || !readers.every(isFloatCast)) return false;
  if ((graph.node ?? []).some((n) => (n.attribute ?? []).some((a) => a.g || (a.graphs?.length ?? 0) > 0))) return false;
  const renamed = new Map(readers.map((n) => [n.output![0]!, name]));
  if ((graph.output ?? []).some((o) => renamed.has(o.name ?? ''))) return false;
  if (check) return true;
  graph.node = (graph.node ?? [])
    .filter((n) => !readers.includes(n))
    .map((n) => ({ ...n, input: (n.input ?? []).map((i) => renamed.get(i) ?? i) }));
  input.type = { tensorType: { ...input.type.tensorType, elemType: 1 } };
  return true;
}
