/**
 * @module engine/search-graph — the whole generation of a batch in one onnxruntime run: the export's encoder and its
 * merged decoder (split by decoder-split.ts) wrapped as the subgraphs of onnxruntime's `com.microsoft.BeamSearch`
 * operator in its encoder-decoder form (`model_type` 1, the layout onnxruntime's own T5 and BART exports use).
 *
 * Why: on CUDA, onnxruntime-node hands every run's outputs to the host. The step loop (generate.ts) then moves each
 * step's self-attention cache and the cross-attention cache over PCIe and back, which costs more than the step's
 * arithmetic at batch 64 on the 418M shapes. Inside BeamSearch the caches, the log-softmax, the top-k and the beam
 * reordering stay on the device; one run returns the token ids.
 *
 * The operator's contract (onnxruntime `contrib_ops/cpu/transformers/subgraph_t5_{encoder,decoder}.cc`):
 * - encoder subgraph: `encoder_input_ids`, `encoder_attention_mask`, `decoder_input_ids` (int32) → `logits` of the
 *   first step, `encoder_hidden_states`, `present_key_self_i`/`present_value_self_i` for every layer, then
 *   `present_key_cross_i`/`present_value_cross_i`. Here: the encoder, the cross-attention graph, and the step graph
 *   over an empty self-attention past (what the step loop's first step computes).
 * - decoder subgraph: `input_ids` [B, 1], `encoder_attention_mask`, the self then cross past (int32 ids) → `logits`,
 *   the self present. Here: the step graph.
 * The export's ids are int64: each subgraph casts its int32 inputs. Weights are initializers of the outer graph, which
 * both subgraphs read, so the decoder's weights are loaded once; an encoder weight whose name a decoder weight also
 * has is renamed (two exports name their anonymous weights independently).
 *
 * M2M100's forced target-language token is the operator's `prefix_vocab_mask` (applied to the first generated token
 * only): one row per sequence with a 1 at its language token, so one batch holds several target languages.
 */
import { closeSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { splitCrossAttention } from './decoder-split.js';
import { float16Bits, toFloat16 } from './float16.js';
import type { ModelConfig } from './model-config.js';
import {
  type Dim,
  externalizedWeight,
  joinModel,
  renamedWeight,
  splitModel,
  valueInfo,
  weightName,
  wireFields,
} from './onnx-wire.js';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;
type ITensorProto = onnxProto.onnx.ITensorProto;

const ATTR = onnxProto.onnx.AttributeProto.AttributeType;
const FLOAT = 1;
const FLOAT16 = 10;
const INT32 = 6;
const INT64 = 7;
const BOOL = 9;
const HALF_MAX = 65504;
const MS_DOMAIN = 'com.microsoft';

/** The outer graph's inputs, in the operator's order ('' where the optional input is not fed). */
export const SEARCH_INPUTS = {
  inputIds: 'input_ids',
  maxLength: 'max_length',
  minLength: 'min_length',
  numBeams: 'num_beams',
  numReturnSequences: 'num_return_sequences',
  lengthPenalty: 'length_penalty',
  repetitionPenalty: 'repetition_penalty',
  prefixVocabMask: 'prefix_vocab_mask',
  attentionMask: 'attention_mask',
} as const;
export const SEARCH_OUTPUTS = { sequences: 'sequences', scores: 'sequences_scores' } as const;

/** What one search graph decides for every row it runs (rows asking otherwise take the step loop). */
export interface SearchGraphSettings {
  /** The operator's `early_stopping` (beam search stops once numBeams hypotheses finished). */
  earlyStopping: boolean;
}

export interface SearchGraphOptions {
  /**
   * Where the weights go when the graph with them inline would pass `inlineLimit` (protobuf's 2 GB cap: the fp32
   * 418M export's two files together are 2.4 GB): one data file the graph names, in this folder.
   */
  scratchDir?: string;
  /** Inline weight bytes above which they are written to `scratchDir`; default 1.8 GB. */
  inlineLimit?: number;
}

export type SearchGraphResult =
  | {
      ok: true;
      bytes: Uint8Array;
      /** The folder onnxruntime reads external weights from (`model_external_initializers_file_folder_path`). */
      weightsDir: string;
    }
  | { ok: false; reason: string };

const INLINE_LIMIT = 1.8e9;
const SCRATCH_WEIGHTS = 'search_weights.bin';
const EXTERNAL_ABOVE = 1024;

/**
 * The BeamSearch model of the export whose encoder is `encoderFile` and merged decoder `decoderFile` (external weights
 * stay where they are: load the bytes with the model folder's onnx/ as the external-data folder), or why not.
 */
export function searchGraph(
  encoderFile: string,
  decoderFile: string,
  config: ModelConfig,
  settings: SearchGraphSettings,
  options: SearchGraphOptions = {},
): SearchGraphResult {
  const fail = (reason: string): SearchGraphResult => ({ ok: false, reason });
  const encoder = splitModel(readFileSync(encoderFile));
  const decoder = splitModel(readFileSync(decoderFile));
  const split = splitCrossAttention(decoder.model, config.decoderLayers);
  if (!split.ok) return fail(`decoder not split: ${split.reason}`);

  const decoderWeights = decoder.weights.filter((w) => {
    const name = weightName(w);
    return split.step.uses.has(name) || split.cross.uses.has(name);
  });
  const byName = new Map(decoderWeights.map((w) => [weightName(w), w]));
  const taken = new Set(byName.keys());
  const encoderNames = new Map<string, string>();
  const encoderWeights: Uint8Array[] = [];
  for (const w of encoder.weights) {
    const name = weightName(w);
    const twin = byName.get(name);
    // The shared embedding is in both files under one name: loaded once.
    if (twin !== undefined && Buffer.from(twin.buffer, twin.byteOffset, twin.length).equals(w)) continue;
    if (!taken.has(name)) {
      taken.add(name);
      encoderWeights.push(w);
      continue;
    }
    let fresh = `encoder/${name}`;
    for (let i = 1; taken.has(fresh); i++) fresh = `encoder${i}/${name}`;
    taken.add(fresh);
    encoderNames.set(name, fresh);
    encoderWeights.push(renamedWeight(w, fresh));
  }
  const outer = Object.values(SEARCH_INPUTS).find((name) => taken.has(name));
  if (outer !== undefined) return fail(`a weight is named ${outer}, an input of the search graph`);

  // float32, or float16 for an `_fp16` export: the operator wants every float of the subgraphs in the model's type.
  const real = Number(
    split.step.model.graph?.output?.find((o) => o.name === 'logits')?.type?.tensorType?.elemType ?? FLOAT,
  );
  if (real !== FLOAT && real !== FLOAT16) return fail(`logits of element type ${real}`);
  const layers = config.decoderLayers;
  const heads = config.decoderHeads;
  const headSize = config.dModel / heads;
  const vocab = config.vocabSize;
  const self = (i: number, part: 'key' | 'value') => `past_key_values.${i}.decoder.${part}`;
  const cross = (i: number, part: 'key' | 'value') => `past_key_values.${i}.encoder.${part}`;
  const cache = (kind: 'self' | 'cross', io: 'past' | 'present') =>
    Array.from({ length: layers }, (_, i) => [`${io}_key_${kind}_${i}`, `${io}_value_${kind}_${i}`]).flat();

  try {
    // Encoder subgraph: encoder, cross-attention cache, first decoder step.
    const e = new SubgraphBuilder();
    const ids = e.cast('encoder_input_ids', INT64);
    const mask = e.cast('encoder_attention_mask', INT64);
    const start = e.cast('decoder_input_ids', INT64);
    const enc = e.inline(
      encoder.model.graph!,
      'e/',
      new Map([
        ['input_ids', ids],
        ['attention_mask', mask],
      ]),
      encoderNames,
    );
    const hidden = enc.get('last_hidden_state');
    if (hidden === undefined) return fail('the encoder has no last_hidden_state output');
    const crossOut = e.inline(
      split.cross.model.graph!,
      'c/',
      new Map([
        ['encoder_hidden_states', hidden],
        ['encoder_attention_mask', mask],
      ]),
    );
    const empty = e.emptyPast(start, heads, headSize, real);
    const firstWiring = new Map<string, string>([
      ['input_ids', start],
      ['encoder_attention_mask', mask],
    ]);
    for (let i = 0; i < layers; i++)
      for (const part of ['key', 'value'] as const) {
        firstWiring.set(self(i, part), empty);
        const made = crossOut.get(`present.${i}.encoder.${part}`);
        if (made === undefined) return fail(`the cross graph has no present.${i}.encoder.${part}`);
        firstWiring.set(cross(i, part), made);
      }
    const first = e.inline(split.step.model.graph!, 's/', firstWiring);
    const presentOf = (made: Map<string, string>, i: number, part: 'key' | 'value', kind: 'decoder' | 'encoder') => {
      const name = made.get(`present.${i}.${kind}.${part}`);
      if (name === undefined) throw new Error(`no present.${i}.${kind}.${part}`);
      return name;
    };
    need(first, 'logits');
    e.output('logits', e.forcedLogits(SEARCH_INPUTS.prefixVocabMask, start, vocab, config.eosTokenId, real), real, [
      'batch',
      1,
      vocab,
    ]);
    e.output('encoder_hidden_states', hidden, real, ['batch', 'source', config.dModel]);
    const selfPresent = cache('self', 'present');
    const crossPresent = cache('cross', 'present');
    for (let i = 0; i < layers; i++) {
      e.output(selfPresent[2 * i]!, presentOf(first, i, 'key', 'decoder'), real, ['batch', heads, 1, headSize]);
      e.output(selfPresent[2 * i + 1]!, presentOf(first, i, 'value', 'decoder'), real, ['batch', heads, 1, headSize]);
    }
    for (let i = 0; i < layers; i++) {
      e.output(crossPresent[2 * i]!, presentOf(crossOut, i, 'key', 'encoder'), real, [
        'batch',
        heads,
        'source',
        headSize,
      ]);
      e.output(crossPresent[2 * i + 1]!, presentOf(crossOut, i, 'value', 'encoder'), real, [
        'batch',
        heads,
        'source',
        headSize,
      ]);
    }
    e.input('encoder_input_ids', INT32, ['batch', 'source']);
    e.input('encoder_attention_mask', INT32, ['batch', 'source']);
    e.input('decoder_input_ids', INT32, ['batch', 1]);

    // Decoder subgraph: one step over the past.
    const d = new SubgraphBuilder();
    d.input('input_ids', INT32, ['batch', 1]);
    d.input('encoder_attention_mask', INT32, ['batch', 'source']);
    const stepWiring = new Map<string, string>([
      ['input_ids', d.cast('input_ids', INT64)],
      ['encoder_attention_mask', d.cast('encoder_attention_mask', INT64)],
    ]);
    const selfPast = cache('self', 'past');
    const crossPast = cache('cross', 'past');
    for (let i = 0; i < layers; i++)
      (['key', 'value'] as const).forEach((part, k) => {
        stepWiring.set(self(i, part), selfPast[2 * i + k]!);
        stepWiring.set(cross(i, part), crossPast[2 * i + k]!);
      });
    for (const name of selfPast) d.input(name, real, ['batch', heads, 'past', headSize]);
    for (const name of crossPast) d.input(name, real, ['batch', heads, 'source', headSize]);
    const step = d.inline(split.step.model.graph!, 'd/', stepWiring);
    d.output('logits', need(step, 'logits'), real, ['batch', 1, vocab]);
    for (let i = 0; i < layers; i++) {
      d.output(selfPresent[2 * i]!, presentOf(step, i, 'key', 'decoder'), real, ['batch', heads, 'total', headSize]);
      d.output(selfPresent[2 * i + 1]!, presentOf(step, i, 'value', 'decoder'), real, [
        'batch',
        heads,
        'total',
        headSize,
      ]);
    }

    const I = SEARCH_INPUTS;
    const search: INodeProto = {
      name: 'search',
      opType: 'BeamSearch',
      domain: MS_DOMAIN,
      input: [
        I.inputIds,
        I.maxLength,
        I.minLength,
        I.numBeams,
        I.numReturnSequences,
        I.lengthPenalty,
        I.repetitionPenalty,
        '',
        // The encoder subgraph reads the mask itself (`forcedLogits`).
        '',
        I.attentionMask,
      ],
      output: [SEARCH_OUTPUTS.sequences, SEARCH_OUTPUTS.scores],
      attribute: [
        intAttr('model_type', 1),
        intAttr('eos_token_id', config.eosTokenId),
        // Finished sequences are filled with this id: `</s>` marks where a row ended, and a generated pad token cannot be
        // mistaken for the end (the encoder mask is fed, so the operator never reads pad ids from the input).
        intAttr('pad_token_id', config.eosTokenId),
        intAttr('decoder_start_token_id', config.decoderStartTokenId),
        intAttr('no_repeat_ngram_size', 0),
        intAttr('early_stopping', settings.earlyStopping ? 1 : 0),
        intAttr('vocab_size', vocab),
        { name: 'encoder', type: ATTR.GRAPH, g: e.graph('encoder') },
        { name: 'decoder', type: ATTR.GRAPH, g: d.graph('decoder') },
      ],
    };
    const scalar = (name: string, type: number) => valueInfo(name, type, [1]);
    const graph: IGraphProto = {
      name: 'search',
      node: [search],
      input: [
        valueInfo(I.inputIds, INT32, ['batch', 'source']),
        scalar(I.maxLength, INT32),
        scalar(I.minLength, INT32),
        scalar(I.numBeams, INT32),
        scalar(I.numReturnSequences, INT32),
        scalar(I.lengthPenalty, FLOAT),
        scalar(I.repetitionPenalty, FLOAT),
        valueInfo(I.prefixVocabMask, INT32, ['batch', vocab]),
        valueInfo(I.attentionMask, INT32, ['batch', 'source']),
      ],
      output: [
        valueInfo(SEARCH_OUTPUTS.sequences, INT32, ['batch', 'returned', 'length']),
        valueInfo(SEARCH_OUTPUTS.scores, FLOAT, ['batch', 'returned']),
      ],
    };
    const defaultOpset = decoder.model.opsetImport?.find((o) => (o.domain ?? '') === '')?.version ?? 17;
    const model: onnxProto.onnx.IModelProto = {
      irVersion: decoder.model.irVersion ?? 8,
      producerName: 'mt-serve search-graph',
      opsetImport: [
        { domain: '', version: defaultOpset },
        { domain: MS_DOMAIN, version: 1 },
      ],
      graph,
    };
    const weights = [...encoderWeights, ...decoderWeights];
    const inline = weights.reduce((sum, w) => sum + w.length, 0);
    if (inline <= (options.inlineLimit ?? INLINE_LIMIT))
      return { ok: true, bytes: joinModel(model, weights), weightsDir: path.dirname(decoderFile) };
    if (options.scratchDir === undefined)
      return fail(`${inline} bytes of weights inline, and no folder to move them to`);
    return {
      ok: true,
      bytes: joinModel(model, externalize(weights, options.scratchDir)),
      weightsDir: options.scratchDir,
    };
  } catch (err) {
    return fail((err as Error).message);
  }
}

/** Every raw weight moved into one file of `dir`; fails where a weight already lives in the export's own data file. */
function externalize(weights: readonly Uint8Array[], dir: string): Uint8Array[] {
  mkdirSync(dir, { recursive: true });
  const fd = openSync(path.join(dir, SCRATCH_WEIGHTS), 'w');
  let offset = 0;
  try {
    return weights.map((w) => {
      // Small constants (axes, shapes) stay inline: shape inference reads them at load, and cannot from a data file.
      if (w.length < EXTERNAL_ABOVE) return w;
      const moved = externalizedWeight(w, SCRATCH_WEIGHTS, offset);
      if (moved === null) {
        if (isExternal(w)) throw new Error(`weight ${weightName(w)} is in the export's data file and others inline`);
        return w;
      }
      writeSync(fd, moved.data);
      offset += moved.data.length;
      return moved.entry;
    });
  } finally {
    closeSync(fd);
  }
}

function isExternal(entry: Uint8Array): boolean {
  const tensor = onnxProto.onnx.TensorProto.decode(entry.subarray(wireFields(entry)[0]!.value));
  return tensor.dataLocation === onnxProto.onnx.TensorProto.DataLocation.EXTERNAL;
}

function need(made: Map<string, string>, name: string): string {
  const value = made.get(name);
  if (value === undefined) throw new Error(`the step graph has no ${name} output`);
  return value;
}

function intAttr(name: string, value: number): onnxProto.onnx.IAttributeProto {
  return { name, type: ATTR.INT, i: value };
}

/** One subgraph assembled from parts of exported graphs, each part's internal names under its own prefix. */
class SubgraphBuilder {
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
   * The first step's scores: 0 at each row's language token, -1e9 elsewhere, from the outer graph's `mask` [batch, V],
   * each row repeated for its beams when the subgraph's rows (those of `like`) are the beams of each row. As in transformers'
   * forced-BOS processor the language token then costs nothing: the operator's own `prefix_vocab_mask` would keep the
   * token's model log-probability, which shifts every hypothesis of the row by one constant and so, through the length
   * normalisation, changes which beam wins. `</s>` scores lowest of all: the operator takes the first step's top
   * 2·numBeams candidates, and a `</s>` among the runners-up would be kept as a finished hypothesis, filling a slot
   * that early stopping counts.
   */
  forcedLogits(mask: string, like: string, vocab: number, eos: number, real: number): string {
    const n = (name: string) => `forced/${name}`;
    this.#nodes.push(
      { name: n('axis1'), opType: 'Constant', output: [n('axis1')], attribute: [longs('value', [1])] },
      { name: n('row'), opType: 'Unsqueeze', input: [mask, n('axis1')], output: [n('row')] },
      { name: n('batch'), opType: 'Shape', input: [mask], output: [n('batch')], attribute: [intAttr('end', 1)] },
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
      { name: n('bool'), opType: 'Cast', input: [n('each')], output: [n('bool')], attribute: [intAttr('to', BOOL)] },
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
      { name: n('logits'), opType: 'Where', input: [n('bool'), n('zero'), n('never')], output: [n('logits')] },
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
