/**
 * @module engine/decoder-split — splits a merged decoder (`use_cache_branch`) into the two graphs the step loop
 * runs instead of it:
 * - the **step** graph: the merged graph with each `If(use_cache_branch)` replaced by its then-branch (the
 *   cross-attention keys/values read from `past_key_values.*.encoder.*` as fed) and without the
 *   `present.*.encoder.*` outputs; every step runs it, the first one with an empty self-attention past;
 * - the **cross** graph: only what makes `present.*.encoder.*` from the encoder's states (the else-branch's
 *   key/value projections); run once per cohort, before its first step.
 *
 * Why: onnxruntime's `If` copies every branch output into the If's own output, and a graph output made by an
 * `Identity` is copied again. In the merged layout the cache branch's outputs are the fed cross-attention
 * cache, `[n, H, S, dh]` per layer and part, so every step copied the whole cross-attention cache twice only to
 * hand it back (about a quarter of a q8 step at batch 64 on the 418M shapes). The step graph reads the fed cache
 * where it lies. The first step of the merged graph (no cache) computes the same as the step graph with an empty
 * self-attention past: positions and masks come from the fed lengths in both.
 *
 * Weights: each graph names the initializers its nodes use (`SplitGraph.uses`); the caller keeps only those, so
 * the projections are loaded in the cross graph and the rest in the step graph, nothing twice.
 *
 * Graphs this does not recognise (the condition used elsewhere, branches with nested subgraphs, a cross cache
 * that depends on the self-attention cache) are left to the merged path, with the reason.
 */
import onnxProto from 'onnx-proto';

type IModelProto = onnxProto.onnx.IModelProto;
type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;
type ITensorProto = onnxProto.onnx.ITensorProto;

const CONDITION = 'use_cache_branch';

/** One of the two graphs, and every name its nodes read (for choosing which weights go with it). */
export interface SplitGraph {
  model: IModelProto;
  uses: ReadonlySet<string>;
}

export type SplitResult = { ok: true; step: SplitGraph; cross: SplitGraph } | { ok: false; reason: string };

/** The cross-attention cache outputs of a decoder with `layers` layers, in the step loop's order. */
export function crossCacheOutputs(layers: number): string[] {
  return Array.from({ length: layers }, (_, i) => [`present.${i}.encoder.key`, `present.${i}.encoder.value`]).flat();
}

/**
 * The step and cross graphs of merged decoder `model` (see module doc), sharing its unchanged parts (the caller
 * must not edit one graph's shared objects for the other), or why it cannot be split. `model` is not changed.
 */
export function splitCrossAttention(model: IModelProto, layers: number): SplitResult {
  const fail = (reason: string): SplitResult => ({ ok: false, reason });
  const graph = model.graph;
  if (!graph?.node) return fail('model has no graph');
  if (!graph.input?.some((i) => i.name === CONDITION)) return fail(`no ${CONDITION} input`);
  const crossOutputs = crossCacheOutputs(layers);
  const declared = new Set(graph.output?.map((o) => o.name));
  const absent = crossOutputs.find((name) => !declared.has(name));
  if (absent !== undefined) return fail(`no ${absent} output`);
  for (const node of graph.node) {
    const reads = [...(node.input ?? []), ...nestedReads(node)];
    if (reads.includes(CONDITION) && !isCacheIf(node)) return fail(`${CONDITION} is read by ${describe(node)}`);
  }

  const withCache = inline(graph, 'then_branch');
  if (typeof withCache === 'string') return fail(withCache);
  const withoutCache = inline(graph, 'else_branch');
  if (typeof withoutCache === 'string') return fail(withoutCache);

  const stepOutputs = (graph.output ?? []).map((o) => o.name!).filter((name) => !crossOutputs.includes(name));
  const step = subgraph(model, withCache, stepOutputs);
  const cross = subgraph(model, withoutCache, crossOutputs);
  const crossInputs = cross.model.graph!.input!.map((i) => i.name!);
  const pastInput = crossInputs.find((name) => name.startsWith('past_key_values.') || name === CONDITION);
  if (pastInput !== undefined) return fail(`the cross-attention cache depends on ${pastInput}`);
  if (step.model.graph!.input!.some((i) => i.name === CONDITION))
    return fail(`the step graph still reads ${CONDITION}`);
  return { ok: true, step, cross };
}

function isCacheIf(node: INodeProto): boolean {
  return node.opType === 'If' && node.input?.length === 1 && node.input[0] === CONDITION;
}

function describe(node: INodeProto): string {
  return `${node.opType ?? '?'} ${node.name ?? ''}`.trim();
}

/** Nodes and small initializers of a graph with its cache Ifs inlined. */
interface Inlined {
  nodes: INodeProto[];
  initializers: ITensorProto[];
}

/**
 * `graph`'s nodes with every cache If replaced by the nodes of its `branch`: names the branch makes get a prefix
 * unique to the If (no clash with the outer graph), except that the value a branch output names takes the If's
 * output name, so the outer nodes read it unchanged; an output the branch does not make itself (an outer value,
 * a repeated one) gets an Identity. Outer values the branch reads are visible at the If, so the order holds.
 */
function inline(graph: IGraphProto, branch: 'then_branch' | 'else_branch'): Inlined | string {
  const nodes: INodeProto[] = [];
  const initializers: ITensorProto[] = [...(graph.initializer ?? [])];
  for (const [index, node] of graph.node!.entries()) {
    if (!isCacheIf(node)) {
      nodes.push(node);
      continue;
    }
    const body = node.attribute?.find((a) => a.name === branch)?.g;
    if (!body) return `${describe(node)} has no ${branch}`;
    if ((body.sparseInitializer?.length ?? 0) > 0) return `${describe(node)}'s ${branch} has sparse initializers`;
    const nested = body.node?.find((n) => n.attribute?.some((a) => a.g || (a.graphs?.length ?? 0) > 0));
    if (nested) return `${describe(node)}'s ${branch} holds a subgraph (${describe(nested)})`;
    const outs = body.output ?? [];
    if (outs.length !== (node.output?.length ?? 0)) return `${describe(node)}'s ${branch} has ${outs.length} outputs`;

    const prefix = `mt_serve.${branch}.${index}/`;
    const rename = new Map<string, string>();
    for (const init of body.initializer ?? []) rename.set(init.name!, prefix + init.name!);
    const made = new Set<string>();
    for (const n of body.node ?? []) for (const o of n.output ?? []) if (o) made.add(o);
    for (const name of made) rename.set(name, prefix + name);
    const bridges: INodeProto[] = [];
    outs.forEach((out, k) => {
      const target = node.output![k]!;
      if (target === '') return;
      const name = out.name!;
      if (made.has(name) && rename.get(name) === prefix + name) rename.set(name, target);
      else
        bridges.push({
          opType: 'Identity',
          input: [rename.get(name) ?? name],
          output: [target],
          name: `${target}/identity`,
        });
    });
    for (const n of body.node ?? []) {
      nodes.push({
        ...n,
        name: prefix + (n.name ?? ''),
        input: (n.input ?? []).map((x) => rename.get(x) ?? x),
        output: (n.output ?? []).map((x) => (x === '' ? x : rename.get(x)!)),
      });
    }
    nodes.push(...bridges);
    for (const init of body.initializer ?? []) initializers.push({ ...init, name: rename.get(init.name!)! });
  }
  return { nodes, initializers };
}

/** The names a node's subgraphs read (an over-approximation of their outer values: every input they name). */
function nestedReads(node: INodeProto): string[] {
  const graphs = (node.attribute ?? []).flatMap((a) => [...(a.g ? [a.g] : []), ...(a.graphs ?? [])]);
  return graphs.flatMap((g) => (g.node ?? []).flatMap((n) => [...(n.input ?? []), ...nestedReads(n)]));
}

/** `model` cut down to the nodes `outputs` need, with the inputs, initializers and value infos those read. */
function subgraph(model: IModelProto, inlined: Inlined, outputs: string[]): SplitGraph {
  const graph = model.graph!;
  const needed = new Set(outputs);
  const kept: INodeProto[] = [];
  for (let i = inlined.nodes.length - 1; i >= 0; i--) {
    const node = inlined.nodes[i]!;
    if (!(node.output ?? []).some((o) => needed.has(o))) continue;
    kept.push(node);
    for (const name of [...(node.input ?? []), ...nestedReads(node)]) if (name) needed.add(name);
  }
  kept.reverse();
  const made = new Set(kept.flatMap((n) => n.output ?? []));
  const outputSet = new Set(outputs);
  return {
    model: {
      ...model,
      graph: {
        ...graph,
        node: kept,
        input: (graph.input ?? []).filter((i) => needed.has(i.name!)),
        output: (graph.output ?? []).filter((o) => outputSet.has(o.name!)),
        initializer: inlined.initializers.filter((t) => needed.has(t.name!)),
        valueInfo: (graph.valueInfo ?? []).filter((v) => made.has(v.name!)),
      },
    },
    uses: needed,
  };
}
