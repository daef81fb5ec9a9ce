/**
 * @module engine/search/subgraph — one subgraph of the search graph (graph.ts) assembled from parts of the export's
 * graphs, each part's internal names under its own prefix, with the few nodes the operator's contract adds (casts, an
 * empty first past, the first step's forced scores); and the ONNX constants that building needs.
 */
import onnxProto from 'onnx-proto';
import { float16Bits, toFloat16 } from '../float16.js';
import { ATTR, type Dim, FLOAT, FLOAT16, INT32, INT64, valueInfo } from '../graphs/onnx-wire.js';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;
type ITensorProto = onnxProto.onnx.ITensorProto;

const HALF_MAX = 65504;

export function intAttr(name: string, value: number): onnxProto.onnx.IAttributeProto {
  return { name, type: ATTR.INT, i: value };
}

/** One subgraph assembled from parts of exported graphs, each part's internal names under its own prefix. */
export class SubgraphBuilder {
  readonly #nodes: INodeProto[] = [];
  readonly #initializers: ITensorProto[] = [];
  readonly #inputs: onnxProto.onnx.IValueInfoProto[] = [];
  readonly #outputs: onnxProto.onnx.IValueInfoProto[] = [];

  input(name: string, type: number, dims: Dim[]): void {
    this.#inputs.push(valueInfo(name, type, dims));
  }

  output(name: string, from: string, type: number, dims: Dim[]): void {
    this.#nodes.push({ name: `out/${name}`, opType: 'Identity', input: [from], output: [name] });
    this.#outputs.push(valueInfo(name, type, dims));
  }

  cast(from: string, to: number): string {
    const name = `cast/${from}`;
    this.#nodes.push({ name, opType: 'Cast', input: [from], output: [name], attribute: [intAttr('to', to)] });
    return name;
  }

  /**
   * The first step's scores: 0 at each row's language token, -1e9 elsewhere, from the outer graph's `ids` [batch],
   * each row repeated for its beams when the subgraph's rows (those of `like`) are the beams of each row. As in transformers'
   * forced-BOS processor the language token then costs nothing: the operator's own `prefix_vocab_mask` would keep the
   * token's model log-probability, which shifts every hypothesis of the row by one constant and so, through the length
   * normalisation, changes which beam wins. `</s>` scores lowest of all: the operator takes the first step's top
   * 2·numBeams candidates, and a `</s>` among the runners-up would be kept as a finished hypothesis, filling a slot
   * that early stopping counts.
   */
  forcedLogits(ids: string, like: string, vocab: number, eos: number, real: number): string {
    const n = (name: string) => `forced/${name}`;
    const scalar = (name: string, value: number) => ({
      name: n(name),
      opType: 'Constant',
      output: [n(name)],
      attribute: [{ name: 'value', type: ATTR.TENSOR, t: { dims: [], dataType: INT64, int64Data: [value] } }],
    });
    this.#nodes.push(
      // One row per sequence, true at its language token: [batch, V] from the ids, not sent as a mask (256 rows of
      // 418M's vocabulary would be 131 MB a run).
      { name: n('ids'), opType: 'Cast', input: [ids], output: [n('ids')], attribute: [intAttr('to', INT64)] },
      { name: n('axis1'), opType: 'Constant', output: [n('axis1')], attribute: [longs('value', [1])] },
      { name: n('column'), opType: 'Unsqueeze', input: [n('ids'), n('axis1')], output: [n('column')] },
      scalar('first', 0),
      scalar('limit', vocab),
      scalar('step', 1),
      { name: n('tokens'), opType: 'Range', input: [n('first'), n('limit'), n('step')], output: [n('tokens')] },
      { name: n('hit'), opType: 'Equal', input: [n('column'), n('tokens')], output: [n('hit')] },
      { name: n('row'), opType: 'Unsqueeze', input: [n('hit'), n('axis1')], output: [n('row')] },
      { name: n('batch'), opType: 'Shape', input: [ids], output: [n('batch')], attribute: [intAttr('end', 1)] },
      { name: n('rowsB'), opType: 'Shape', input: [like], output: [n('rowsB')], attribute: [intAttr('end', 1)] },
      { name: n('beams'), opType: 'Div', input: [n('rowsB'), n('batch')], output: [n('beams')] },
      { name: n('vocab'), opType: 'Constant', output: [n('vocab')], attribute: [longs('value', [vocab])] },
      {
        name: n('shape'),
        opType: 'Concat',
        input: [n('batch'), n('beams'), n('vocab')],
        output: [n('shape')],
        attribute: [intAttr('axis', 0)],
      },
      { name: n('rows'), opType: 'Expand', input: [n('row'), n('shape')], output: [n('rows')] },
      { name: n('flat'), opType: 'Constant', output: [n('flat')], attribute: [longs('value', [-1, 1, vocab])] },
      { name: n('each'), opType: 'Reshape', input: [n('rows'), n('flat')], output: [n('each')] },
      { name: n('zero'), opType: 'Constant', output: [n('zero')], attribute: [realConstant('value', 0, real)] },
      {
        name: n('never'),
        opType: 'Constant',
        output: [n('never')],
        attribute: [
          realVector(
            'value',
            vocab,
            real === FLOAT16 ? -HALF_MAX / 2 : -1e9,
            eos,
            real === FLOAT16 ? -HALF_MAX : -3e9,
            real,
          ),
        ],
      },
      { name: n('logits'), opType: 'Where', input: [n('each'), n('zero'), n('never')], output: [n('logits')] },
    );
    return n('logits');
  }

  /** A float tensor [batch of `like`, heads, 0, headSize]: the self-attention past of a first step. */
  emptyPast(like: string, heads: number, headSize: number, real: number): string {
    const batch = 'empty/batch';
    const dims = 'empty/dims';
    this.#nodes.push(
      { name: 'empty/shape', opType: 'Shape', input: [like], output: [batch], attribute: [intAttr('end', 1)] },
      {
        name: 'empty/rest',
        opType: 'Constant',
        output: ['empty/rest'],
        attribute: [longs('value', [heads, 0, headSize])],
      },
      {
        name: 'empty/concat',
        opType: 'Concat',
        input: [batch, 'empty/rest'],
        output: [dims],
        attribute: [intAttr('axis', 0)],
      },
      {
        name: 'empty/past',
        opType: 'ConstantOfShape',
        input: [dims],
        output: ['empty/past'],
        attribute: [realConstant('value', 0, real, [1])],
      },
    );
    return 'empty/past';
  }

  /**
   * Copy `graph`'s nodes in: its inputs read what `wiring` gives, outer weights keep their names (or `renamed`'s),
   * every other value is put under `prefix`. Returns each of its outputs' new names.
   */
  inline(
    graph: IGraphProto,
    prefix: string,
    wiring: ReadonlyMap<string, string>,
    renamed: ReadonlyMap<string, string> = new Map(),
  ): Map<string, string> {
    const declared = new Set((graph.input ?? []).map((i) => i.name ?? ''));
    const local = new Set<string>();
    for (const node of graph.node ?? []) for (const out of node.output ?? []) local.add(out);
    for (const init of graph.initializer ?? []) local.add(init.name ?? '');
    const map = (name: string): string => {
      if (name === '') return name;
      if (declared.has(name)) {
        const wired = wiring.get(name);
        if (wired === undefined) throw new Error(`input ${name} of ${graph.name ?? 'a graph'} is not wired`);
        return wired;
      }
      if (local.has(name)) return prefix + name;
      return renamed.get(name) ?? name;
    };
    for (const init of graph.initializer ?? []) this.#initializers.push({ ...init, name: map(init.name ?? '') });
    for (const node of graph.node ?? []) {
      if ((node.attribute ?? []).some((a) => a.type === ATTR.GRAPH || a.type === ATTR.GRAPHS))
        throw new Error(`${node.opType} ${node.name ?? ''} holds a subgraph`);
      this.#nodes.push({
        ...node,
        name: prefix + (node.name ?? ''),
        input: (node.input ?? []).map(map),
        output: (node.output ?? []).map(map),
      });
    }
    return new Map((graph.output ?? []).map((o) => [o.name ?? '', map(o.name ?? '')]));
  }

  graph(name: string): IGraphProto {
    return { name, node: this.#nodes, initializer: this.#initializers, input: this.#inputs, output: this.#outputs };
  }
}

/** A float32 or float16 vector of `length` values `value`, but `special` at `at`. */
function realVector(
  name: string,
  length: number,
  value: number,
  at: number,
  special: number,
  real: number,
): onnxProto.onnx.IAttributeProto {
  const values = new Float32Array(length).fill(value);
  values[at] = special;
  const rawData = real === FLOAT16 ? new Uint8Array(toFloat16(values).buffer) : new Uint8Array(values.buffer);
  return { name, type: ATTR.TENSOR, t: { dims: [length], dataType: real, rawData } };
}

/** A float32 or float16 constant (float16 as its bits, in `int32_data` as ONNX keeps them). */
function realConstant(name: string, value: number, real: number, dims: number[] = []): onnxProto.onnx.IAttributeProto {
  const t =
    real === FLOAT16
      ? { dims, dataType: FLOAT16, int32Data: [float16Bits(value)] }
      : { dims, dataType: FLOAT, floatData: [value] };
  return { name, type: ATTR.TENSOR, t };
}

function longs(name: string, values: number[]): onnxProto.onnx.IAttributeProto {
  return { name, type: ATTR.TENSOR, t: { dims: [values.length], dataType: INT64, int64Data: values } };
}
