/**
 * @module engine/decoder-match — finds the blocks decoder-fuse.ts fuses: an index of a graph's values (who makes and
 * who reads each, the small float constants), and the attention block around a Softmax as Hugging Face's BART/M2M100
 * export and the project's generated models write it.
 */
import onnxProto from 'onnx-proto';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;

/** The graph's nodes indexed by what they make and what reads each value. */
export class Index {
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
function floatsOf(t: onnxProto.onnx.ITensorProto): Float32Array | null {
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

export function intAttr(node: INodeProto, name: string): number | undefined {
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

export interface AttentionMatch {
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
export function matchAttention(ix: Index, softmax: INodeProto): AttentionMatch | undefined {
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
export function projectionBiases(
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
