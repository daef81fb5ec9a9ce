/**
 * @module engine/decoder-graph — prepares the merged decoder graph for the step loop with extra outputs: per
 * self-attention cache tensor, only the keys/values the step appends (`[n, H, T, dh]`), so a step fetches
 * those instead of the whole `present.*.decoder` cache; and the top-2 of the logits for greedy steps.
 *
 * Why: onnxruntime-node 1.30 copies every fetched output into a fresh ArrayBuffer (even one passed as a
 * pre-allocated output: onnxruntime writes into it, then the binding copies it out again). At batch 64 the
 * present cache is ~100 MB per step, so fetching it cost an allocation, page faults and a copy per step on
 * top of the Concat that onnxruntime does anyway. With the appended entries as outputs the step loop keeps
 * the cache in reusable buffers of its own (kv-cache.ts) and fetches ~0.3 MB per layer.
 *
 * Recognised layouts (anything else leaves the graph as it is and says why):
 * - `present.{i}.decoder.{key,value}` made by a top-level `Concat(past_key_values.{i}.decoder.{…}, X)` on
 *   the length axis (the project's generated models, and a merged export's step graph once
 *   decoder-split.ts has cut it out of its `If`): X is exposed under its own name;
 * - made by an `If` (Hugging Face / optimum merged export): in the branch where it is
 *   `Concat(past…, X)`, X is exposed; in the other branch (no past) the branch's present is itself the
 *   appended part.
 */
import onnxProto from 'onnx-proto';
import { ATTR, FLOAT, INT32, INT64 } from './onnx-wire.js';

type IModelProto = onnxProto.onnx.IModelProto;
type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;
type IValueInfoProto = onnxProto.onnx.IValueInfoProto;

/** The element type the graph declares for output `name` (float32 unless it says otherwise: fp16 exports). */
function outputElemType(graph: IGraphProto, name: string): number {
  return graph.output?.find((o) => o.name === name)?.type?.tensorType?.elemType ?? FLOAT;
}

/** Output name of the appended keys/values of cache tensor `present.{layer}.decoder.{part}`. */
export function appendedOutputName(layer: number, part: 'key' | 'value'): string {
  return `mt_serve.appended.${layer}.decoder.${part}`;
}

export type ExposeResult =
  /**
   * The graph was changed; `outputs[2·i + j]` names layer i's key (j = 0) or value (j = 1) appended part (the
   * value's own name, or `appendedOutputName` where an Identity or an If output had to make one).
   */
  { ok: true; outputs: string[] } | { ok: false; reason: string };

/**
 * Add the appended-entries outputs to `model` in place (see module doc). Returns the output names in the
 * step loop's cache order, or why the graph was left unchanged (the caller then fetches `present.*`).
 */
export function exposeCacheAppends(model: IModelProto, layers: number): ExposeResult {
  const graph = model.graph;
  if (!graph) return { ok: false, reason: 'model has no graph' };
  // Plan every change first, so an unrecognised layer leaves the graph untouched.
  const edits: (() => void)[] = [];
  const outputs: string[] = [];
  for (let i = 0; i < layers; i++) {
    for (const part of ['key', 'value'] as const) {
      const present = `present.${i}.decoder.${part}`;
      const past = `past_key_values.${i}.decoder.${part}`;
      const out = appendedOutputName(i, part);
      const elemType = outputElemType(graph, present);
      const producer = producerOf(graph, present);
      if (producer === undefined) return { ok: false, reason: `no node makes ${present}` };
      const appended = concatTail(producer, past);
      if (appended !== null && isIntermediate(graph, appended)) {
        // The value itself becomes an output: an Identity in front of it would copy it again every step.
        edits.push(() => graph.output!.push(tensorOutput(appended, elemType)));
        outputs.push(appended);
        continue;
      }
      if (appended !== null) {
        edits.push(() => graph.node!.push(identity(appended, out)));
      } else if (producer.opType === 'If') {
        const planned = planIf(producer, present, past, out, elemType);
        if (typeof planned === 'string') return { ok: false, reason: planned };
        edits.push(planned);
      } else {
        return { ok: false, reason: `${present} comes from ${producer.opType}, not Concat(${past}, …) or If` };
      }
      edits.push(() => graph.output!.push(tensorOutput(out, elemType)));
      outputs.push(out);
    }
  }
  for (const edit of edits) edit();
  return { ok: true, outputs };
}

/** Whether a node of `graph` makes `name` and it is neither an input, an initializer nor already an output. */
function isIntermediate(graph: IGraphProto, name: string): boolean {
  const listed = (values: { name?: string | null }[] | null | undefined) => (values ?? []).some((v) => v.name === name);
  return (
    (graph.node ?? []).some((n) => n.output?.includes(name)) &&
    !listed(graph.input) &&
    !listed(graph.initializer) &&
    !listed(graph.output)
  );
}

/** The node of `graph` (not its subgraphs) that makes `name`, looking through Identity nodes. */
function producerOf(graph: IGraphProto, name: string): INodeProto | undefined {
  let node = graph.node?.find((n) => n.output?.includes(name));
  for (let hops = 0; node?.opType === 'Identity' && hops < 8; hops++) {
    const input = node.input?.[0];
    node = graph.node?.find((n) => n.output?.includes(input ?? ''));
  }
  return node;
}

/** X when `node` is `Concat(past, X)` along the cache length axis (2 or -2 of a rank-4 tensor), else null. */
function concatTail(node: INodeProto, past: string): string | null {
  if (node.opType !== 'Concat' || node.input?.length !== 2 || node.input[0] !== past) return null;
  const axis = Number(node.attribute?.find((a) => a.name === 'axis')?.i ?? Number.NaN);
  return axis === 2 || axis === -2 ? node.input[1]! : null;
}

/** The edit exposing the appended part of an `If` output, or why it cannot be done. */
function planIf(node: INodeProto, present: string, past: string, out: string, elemType: number): (() => void) | string {
  const index = node.output!.indexOf(present);
  const branches = ['then_branch', 'else_branch'].map((name) => node.attribute?.find((a) => a.name === name)?.g);
  if (branches.some((g) => !g || !g.output || g.output.length <= index)) return `If making ${present} lacks a branch`;
  const [thenGraph, elseGraph] = branches as IGraphProto[];
  const tails = [thenGraph, elseGraph].map((g) => {
    const inner = producerOf(g, g.output![index]!.name!);
    return inner ? concatTail(inner, past) : null;
  });
  // Exactly one branch appends to the past; in the other the branch's present is all new.
  if ((tails[0] === null) === (tails[1] === null)) return `If making ${present}: no single branch appends to ${past}`;
  return () => {
    [thenGraph, elseGraph].forEach((g, b) => {
      const value = tails[b] ?? g.output![index]!.name!;
      const branchOut = `${out}.${b === 0 ? 'then' : 'else'}`;
      g.node!.push(identity(value, branchOut));
      g.output!.push(tensorOutput(branchOut, elemType));
    });
    node.output!.push(out);
  };
}

function identity(input: string, output: string): INodeProto {
  return { opType: 'Identity', input: [input], output: [output], name: `${output}/identity` };
}

/** An output of unstated shape (`[n, H, T, dh]`; onnxruntime infers it, the step loop checks it). */
function tensorOutput(name: string, elemType: number): IValueInfoProto {
  return { name, type: { tensorType: { elemType } } };
}

/** Output names of the greedy top-2 (values, then ids) of the logits' last axis. */
export const TOP2_OUTPUTS = { values: 'mt_serve.top2.values', ids: 'mt_serve.top2.ids' } as const;

export type Top2Result = { ok: true; values: string; ids: string } | { ok: false; reason: string };

/** Why the graph's `logits` output cannot take a top-k over the vocabulary, or undefined when it can. */
export function logitsUnfit(model: IModelProto, vocab: number): string | undefined {
  const logits = model.graph?.output?.find((o) => o.name === 'logits');
  if (!logits) return 'no logits output';
  const dims = logits.type?.tensorType?.shape?.dim ?? [];
  const width = dims.length > 0 ? Number(dims[dims.length - 1]!.dimValue ?? Number.NaN) : Number.NaN;
  return width === vocab
    ? undefined
    : `logits' last axis is ${dims.length ? width : 'unknown'}, not vocab_size ${vocab}`;
}

/**
 * Add `TopK(logits, 2)` over the vocabulary as two outputs (`[n, T, 2]` float values and int64 ids, best
 * first; ONNX orders equal values by lower index, as an argmax scan does). A greedy step then fetches 4
 * values per row instead of `vocab` logits (32 MB per step at batch 64 for M2M100) and skips the argmax
 * pass in JS; the second id stands in when `</s>` wins while it is suppressed (minNewTokens).
 * Done only when the logits' last axis is exactly `vocab` wide, so every id is a real token.
 */
export function exposeGreedyTop2(model: IModelProto, vocab: number): Top2Result {
  const graph = model.graph;
  const unfit = logitsUnfit(model, vocab);
  if (!graph || unfit) return { ok: false, reason: unfit ?? 'no graph' };
  const k = 'mt_serve.top2.k';
  graph.initializer!.push({
    name: k,
    dims: [1],
    dataType: INT64,
    rawData: new Uint8Array(BigInt64Array.of(2n).buffer),
  });
  graph.node!.push(topK('mt_serve.top2/topk', k, [TOP2_OUTPUTS.values, TOP2_OUTPUTS.ids]));
  graph.output!.push(
    tensorOutput(TOP2_OUTPUTS.values, outputElemType(graph, 'logits')),
    tensorOutput(TOP2_OUTPUTS.ids, INT64),
  );
  return { ok: true, ...TOP2_OUTPUTS };
}

/** `TopK(logits, k)` over the last axis, best first (ties: lower index first). */
function topK(name: string, k: string, output: string[]): INodeProto {
  return {
    opType: 'TopK',
    input: ['logits', k],
    output,
    name,
    attribute: [
      { name: 'axis', type: ATTR.INT, i: -1 },
      { name: 'largest', type: ATTR.INT, i: 1 },
      { name: 'sorted', type: ATTR.INT, i: 1 },
    ],
  };
}

/** Inputs and outputs of the in-graph beam head (`exposeBeamTopK`). */
export const BEAM_TOPK = {
  /** bool [1]: compute the beam outputs this run (false: they are empty). */
  on: 'mt_serve.beam.on',
  /** int64 [1]: candidates per row. */
  k: 'mt_serve.beam.k',
  values: 'mt_serve.beam.values',
  ids: 'mt_serve.beam.ids',
  logSumExp: 'mt_serve.beam.log_sum_exp',
} as const;

export type BeamTopKResult = { ok: true } | { ok: false; reason: string };

/**
 * Add beam-head.ts' computation to the decoder graph itself, behind an `If` on input `BEAM_TOPK.on`: when true, per
 * row the log-softmax normaliser of the logits (`[n, T, 1]`) and their top `BEAM_TOPK.k` values (`[n, T, k]`) and
 * ids (int32); when false, empty outputs, so a greedy step pays nothing for them (onnxruntime runs every node of a
 * graph whatever a run fetches). A beam step then fetches `(2k + 1)` numbers per row instead of the logits, which
 * onnxruntime-node would copy out whole (vocab floats per row: 512 KB at M2M100's vocabulary). Done only when the
 * logits' last axis is exactly `vocab` wide (as `exposeGreedyTop2`). Steps feed one position (T = 1).
 */
export function exposeBeamTopK(model: IModelProto, vocab: number): BeamTopKResult {
  const graph = model.graph;
  const unfit = logitsUnfit(model, vocab);
  if (!graph || unfit) return { ok: false, reason: unfit ?? 'no graph' };
  const elemType = outputElemType(graph, 'logits');
  if (elemType !== FLOAT) return { ok: false, reason: 'logits are not float32' };
  const opset = Number(model.opsetImport?.find((o) => (o.domain ?? '') === '')?.version ?? 0);
  const BOOL = 9;
  const lseOut = `${BEAM_TOPK.logSumExp}.then`;
  // From opset 18 ReduceLogSumExp takes its axes as an input.
  const axes = 'mt_serve.beam.axes';
  const reduce: INodeProto =
    opset >= 18
      ? { opType: 'ReduceLogSumExp', input: ['logits', axes], output: [lseOut], name: 'mt_serve.beam/lse' }
      : {
          opType: 'ReduceLogSumExp',
          input: ['logits'],
          output: [lseOut],
          name: 'mt_serve.beam/lse',
          attribute: [
            { name: 'axes', type: ATTR.INTS, ints: [-1] },
            { name: 'keepdims', type: ATTR.INT, i: 1 },
          ],
        };
  const thenBranch: IGraphProto = {
    name: 'mt_serve.beam.then',
    initializer:
      opset >= 18
        ? [{ name: axes, dims: [1], dataType: INT64, rawData: new Uint8Array(BigInt64Array.of(-1n).buffer) }]
        : [],
    node: [
      reduce,
      topK('mt_serve.beam/topk', BEAM_TOPK.k, [`${BEAM_TOPK.values}.then`, 'mt_serve.beam.ids64']),
      {
        opType: 'Cast',
        input: ['mt_serve.beam.ids64'],
        output: [`${BEAM_TOPK.ids}.then`],
        name: 'mt_serve.beam/ids32',
        attribute: [{ name: 'to', type: ATTR.INT, i: INT32 }],
      },
    ],
    output: [
      tensorOutput(`${BEAM_TOPK.values}.then`, FLOAT),
      tensorOutput(`${BEAM_TOPK.ids}.then`, INT32),
      tensorOutput(lseOut, FLOAT),
    ],
  };
  const empty = (name: string, dataType: number) => ({
    opType: 'Constant',
    output: [name],
    name: `${name}/constant`,
    attribute: [{ name: 'value', type: ATTR.TENSOR, t: { dims: [0], dataType, name } }],
  });
  const elseBranch: IGraphProto = {
    name: 'mt_serve.beam.else',
    node: [
      empty(`${BEAM_TOPK.values}.else`, FLOAT),
      empty(`${BEAM_TOPK.ids}.else`, INT32),
      empty(`${BEAM_TOPK.logSumExp}.else`, FLOAT),
    ],
    output: [
      tensorOutput(`${BEAM_TOPK.values}.else`, FLOAT),
      tensorOutput(`${BEAM_TOPK.ids}.else`, INT32),
      tensorOutput(`${BEAM_TOPK.logSumExp}.else`, FLOAT),
    ],
  };
  graph.input!.push(
    { name: BEAM_TOPK.on, type: { tensorType: { elemType: BOOL, shape: { dim: [{ dimValue: 1 }] } } } },
    { name: BEAM_TOPK.k, type: { tensorType: { elemType: INT64, shape: { dim: [{ dimValue: 1 }] } } } },
  );
  graph.node!.push({
    opType: 'If',
    input: [BEAM_TOPK.on],
    output: [BEAM_TOPK.values, BEAM_TOPK.ids, BEAM_TOPK.logSumExp],
    name: 'mt_serve.beam/if',
    attribute: [
      { name: 'then_branch', type: ATTR.GRAPH, g: thenBranch },
      { name: 'else_branch', type: ATTR.GRAPH, g: elseBranch },
    ],
  });
  graph.output!.push(
    tensorOutput(BEAM_TOPK.values, FLOAT),
    tensorOutput(BEAM_TOPK.ids, INT32),
    tensorOutput(BEAM_TOPK.logSumExp, FLOAT),
  );
  return { ok: true };
}
