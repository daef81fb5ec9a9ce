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
 * Recognised: the attention as Hugging Face's BART/M2M100 export and the project's generated models write it (the
 * query scaled after the head split, the bias added to the scores). A block that does not match is left as it is;
 * the result counts what was fused, so a graph nothing matched says so.
 */
import onnxProto from 'onnx-proto';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;

const ATTRIBUTE = onnxProto.onnx.AttributeProto.AttributeType;
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
}

export interface FuseResult {
  /** Attention blocks made one `MultiHeadAttention` (self and cross). */
  attention: number;
  /** Residual + layer norm pairs made one `SkipLayerNormalization`. */
  skipLayerNorm: number;
  /** Nodes before and after (dead nodes removed). */
  nodesBefore: number;
  nodesAfter: number;
}

/** The graph's nodes indexed by what they make and what reads each value. */
class Index {
  readonly producer = new Map<string, INodeProto>();
  readonly consumers = new Map<string, INodeProto[]>();
  readonly outputs: ReadonlySet<string>;
  readonly constants = new Map<string, Float32Array>();

  constructor(
    readonly graph: IGraphProto,
    weights: ReadonlyMap<string, Float32Array>,
  ) {
    for (const [name, values] of weights) this.constants.set(name, values);
    for (const node of graph.node ?? []) {
      for (const out of node.output ?? []) this.producer.set(out, node);
      for (const input of node.input ?? []) {
        if (!input) continue;
        const list = this.consumers.get(input) ?? [];
        list.push(node);
        this.consumers.set(input, list);
      }
      if (node.opType === 'Constant') {
        const value = node.attribute?.find((a) => a.name === 'value')?.t;
        const scalar = value ? floatsOf(value) : null;
        if (scalar) this.constants.set(node.output![0]!, scalar);
      }
    }
    for (const init of graph.initializer ?? []) {
      const floats = floatsOf(init);
      if (floats && init.name) this.constants.set(init.name, floats);
    }
    this.outputs = new Set((graph.output ?? []).map((o) => o.name ?? ''));
  }

  /** The node making `name` if it is `op`. */
  made(name: string | undefined | null, op: string): INodeProto | undefined {
    const node = name ? this.producer.get(name) : undefined;
    return node?.opType === op ? node : undefined;
  }

  /** Read only by `node` and not a graph output: safe to fold into it. */
  private(name: string, node: INodeProto): boolean {
    const readers = this.consumers.get(name) ?? [];
    return !this.outputs.has(name) && readers.length === 1 && readers[0] === node;
  }
}

/** A small float tensor's values (scalars and scale constants), or null. */
export function floatsOf(t: onnxProto.onnx.ITensorProto): Float32Array | null {
  if (t.dataType !== 1) return null;
  const count = (t.dims ?? []).reduce((a: number, b) => a * Number(b), 1);
  if (count > 16) return null;
  if (t.floatData && t.floatData.length > 0) return Float32Array.from(t.floatData);
  if (t.rawData && t.rawData.length === 4 * count) {
    const copy = new Uint8Array(t.rawData);
    return new Float32Array(copy.buffer, 0, count);
  }
  return null;
}

function intsAttr(node: INodeProto, name: string): number[] | undefined {
  return node.attribute?.find((a) => a.name === name)?.ints?.map(Number);
}

function intAttr(node: INodeProto, name: string): number | undefined {
  const a = node.attribute?.find((x) => x.name === name);
  return a?.i === undefined || a.i === null ? undefined : Number(a.i);
}

const same = (a: number[] | undefined, b: number[]) =>
  a !== undefined && a.length === b.length && a.every((v, i) => v === b[i]);

/** `Transpose(Reshape(x, [0, 0, H, dh]), [0, 2, 1, 3])`: x [B, T, D] split into heads; returns x and H. */
function headSplit(ix: Index, name: string): { input: string; nodes: INodeProto[] } | undefined {
  const transpose = ix.made(name, 'Transpose');
  if (!transpose || !same(intsAttr(transpose, 'perm'), [0, 2, 1, 3])) return undefined;
  const reshape = ix.made(transpose.input?.[0], 'Reshape');
  if (!reshape || !ix.private(reshape.output![0]!, transpose)) return undefined;
  return { input: reshape.input![0]!, nodes: [reshape, transpose] };
}

interface AttentionMatch {
  /** [B, S, D] queries before the head split (unscaled). */
  query: string;
  scale: number;
  /** Self-attention: the new keys/values [B, S, D] and the cache; cross: the cached [B, H, T, dh] keys/values. */
  key: string;
  value: string;
  past: { key: string; value: string; presentKey: string; presentValue: string } | null;
  bias: string;
  /** [B, S, D] output, and the nodes it replaces. */
  output: string;
  replaced: INodeProto[];
}

/** The attention block around `softmax`, or undefined when it is not the recognised shape. */
function matchAttention(ix: Index, softmax: INodeProto): AttentionMatch | undefined {
  if (intAttr(softmax, 'axis') !== -1 && intAttr(softmax, 'axis') !== 3) return undefined;
  const scoresAdd = ix.made(softmax.input?.[0], 'Add');
  if (!scoresAdd || !ix.private(scoresAdd.output![0]!, softmax)) return undefined;
  const [a, b] = scoresAdd.input as string[];
  const qk = ix.made(a, 'MatMul') ?? ix.made(b, 'MatMul');
  if (!qk || !ix.private(qk.output![0]!, scoresAdd)) return undefined;
  const bias = qk.output![0] === a ? b! : a!;
  // Queries: Mul(split(q), s) (the generated models) or split(Mul(q, s)) (Hugging Face's export), s a scalar.
  const scaled = (name: string | undefined | null) => {
    const mul = ix.made(name, 'Mul');
    if (!mul) return undefined;
    const [m0, m1] = mul.input as string[];
    const s = ix.constants.has(m1!) ? m1! : ix.constants.has(m0!) ? m0! : undefined;
    if (s === undefined || ix.constants.get(s)!.length !== 1) return undefined;
    return { mul, input: s === m1 ? m0! : m1!, scale: ix.constants.get(s)![0]! };
  };
  let q: { input: string; nodes: INodeProto[] } | undefined;
  let scale: number;
  const after = scaled(qk.input?.[0]);
  if (after && ix.private(after.mul.output![0]!, qk)) {
    const split = headSplit(ix, after.input);
    if (!split || !ix.private(split.nodes[1]!.output![0]!, after.mul)) return undefined;
    q = { input: split.input, nodes: [after.mul, ...split.nodes] };
    scale = after.scale;
  } else {
    const split = headSplit(ix, qk.input![0]!);
    const before = split ? scaled(split.input) : undefined;
    if (!split || !before || !ix.private(split.nodes[1]!.output![0]!, qk)) return undefined;
    if (!ix.private(before.mul.output![0]!, split.nodes[0]!)) return undefined;
    q = { input: before.input, nodes: [before.mul, ...split.nodes] };
    scale = before.scale;
  }
  // Keys: Transpose(K, [0, 1, 3, 2]).
  const kT = ix.made(qk.input?.[1], 'Transpose');
  if (!kT || !same(intsAttr(kT, 'perm'), [0, 1, 3, 2]) || !ix.private(kT.output![0]!, qk)) return undefined;
  const keys = kT.input![0]!;
  // Output: Reshape(Transpose(MatMul(probs, V), [0, 2, 1, 3]), [0, 0, D]).
  const readers = ix.consumers.get(softmax.output![0]!) ?? [];
  const pv = readers.length === 1 && readers[0]!.opType === 'MatMul' ? readers[0]! : undefined;
  if (!pv || pv.input![0] !== softmax.output![0] || ix.outputs.has(softmax.output![0]!)) return undefined;
  const values = pv.input![1]!;
  const merge = ix.consumers.get(pv.output![0]!) ?? [];
  const back = merge.length === 1 && merge[0]!.opType === 'Transpose' ? merge[0]! : undefined;
  if (!back || !same(intsAttr(back, 'perm'), [0, 2, 1, 3]) || ix.outputs.has(pv.output![0]!)) return undefined;
  const flat = ix.consumers.get(back.output![0]!) ?? [];
  const reshape = flat.length === 1 && flat[0]!.opType === 'Reshape' ? flat[0]! : undefined;
  if (!reshape || ix.outputs.has(back.output![0]!)) return undefined;
  const replaced = [softmax, scoresAdd, qk, ...q.nodes, kT, pv, back, reshape];
  const base = {
    query: q.input,
    scale,
    bias,
    output: reshape.output![0]!,
  };
  // Self-attention: K and V are Concat(past, split(new)) on the length axis, their outputs the present cache.
  const kCat = ix.made(keys, 'Concat');
  const vCat = ix.made(values, 'Concat');
  if (kCat && vCat) {
    const axisOk = (n: INodeProto) => intAttr(n, 'axis') === 2 || intAttr(n, 'axis') === -2;
    if (!axisOk(kCat) || !axisOk(vCat) || kCat.input?.length !== 2 || vCat.input?.length !== 2) return undefined;
    const kNew = headSplit(ix, kCat.input[1]!);
    const vNew = headSplit(ix, vCat.input[1]!);
    if (!kNew || !vNew) return undefined;
    if (!ix.private(kNew.nodes[1]!.output![0]!, kCat) || !ix.private(vNew.nodes[1]!.output![0]!, vCat))
      return undefined;
    // The present cache may be read by this block and as a graph output only.
    const onlyHere = (name: string, reader: INodeProto) => (ix.consumers.get(name) ?? []).every((n) => n === reader);
    if (!onlyHere(keys, kT) || !onlyHere(values, pv)) return undefined;
    return {
      ...base,
      key: kNew.input,
      value: vNew.input,
      past: { key: kCat.input[0]!, value: vCat.input[0]!, presentKey: keys, presentValue: values },
      replaced: [...replaced, kCat, vCat, ...kNew.nodes, ...vNew.nodes],
    };
  }
  if (kCat || vCat) return undefined;
  // Keys/values split into heads here (an encoder's self-attention) are fed unsplit; cached ones as they are.
  const kSplit = headSplit(ix, keys);
  const vSplit = headSplit(ix, values);
  if (kSplit && vSplit && ix.private(keys, kT) && ix.private(values, pv)) {
    return {
      ...base,
      key: kSplit.input,
      value: vSplit.input,
      past: null,
      replaced: [...replaced, ...kSplit.nodes, ...vSplit.nodes],
    };
  }
  return { ...base, key: keys, value: values, past: null, replaced };
}

/**
 * `Add(MatMul(x, W), b)` for each of `values` (b a constant vector), each read only by nodes in `replaced`: the
 * MatMul outputs, the Adds and the bias values; null unless all three are so.
 */
function projectionBiases(
  ix: Index,
  values: string[],
  replaced: readonly INodeProto[],
): { inputs: [string, string, string]; values: Float32Array[]; adds: INodeProto[] } | null {
  const inputs: string[] = [];
  const found: Float32Array[] = [];
  const adds: INodeProto[] = [];
  for (const value of values) {
    const add = ix.made(value, 'Add');
    if (!add || ix.outputs.has(value) || !(ix.consumers.get(value) ?? []).every((n) => replaced.includes(n)))
      return null;
    const [a, b] = add.input as string[];
    const matmul = ix.made(a, 'MatMul') ? a! : ix.made(b, 'MatMul') ? b! : undefined;
    const bias = matmul === a ? b! : a!;
    const vector = ix.constants.get(bias);
    if (matmul === undefined || vector === undefined || !ix.private(matmul, add)) return null;
    inputs.push(matmul);
    found.push(vector);
    adds.push(add);
  }
  return { inputs: inputs as [string, string, string], values: found, adds };
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
            attribute: [{ name: 'axis', type: ATTRIBUTE.INT, i: 0 }],
          },
          {
            opType: 'Concat',
            input: [`${shape}.ones`, `${shape}.s`, `${shape}.one_tail`],
            output: [shape],
            name: `${shape}/concat`,
            attribute: [{ name: 'axis', type: ATTRIBUTE.INT, i: 0 }],
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
        { name: 'num_heads', type: ATTRIBUTE.INT, i: heads },
        { name: 'scale', type: ATTRIBUTE.FLOAT, f: m.scale },
      ],
    };
    replace(m.replaced, [mha], m.replaced[0]!);
    attention += 1;
    ix = new Index(graph, weights);
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
      attribute: [{ name: 'epsilon', type: ATTRIBUTE.FLOAT, f: epsilon }],
    };
    replace([ln, residual, found.y.add], [sln], residual);
    skipLayerNorm += 1;
    ix = new Index(graph, weights);
  }

  removeDeadNodes(graph);
  return { attention, skipLayerNorm, nodesBefore, nodesAfter: graph.node?.length ?? 0 };
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
