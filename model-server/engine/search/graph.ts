/**
 * @module engine/search/graph — the whole generation of a batch in one onnxruntime run: the export's encoder and its
 * merged decoder (split by ../decoder-split.ts) wrapped as the subgraphs of onnxruntime's `com.microsoft.BeamSearch`
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
 * M2M100's forced target-language token comes in as `forced_token_ids`, one per sequence (so one batch holds several
 * target languages); the encoder subgraph turns them into the first step's scores (subgraph.ts `forcedLogits`).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import onnxProto from 'onnx-proto';
import { splitCrossAttention } from '../graphs/decoder-split.js';
import type { ModelConfig } from '../model-config.js';
import { ATTR, FLOAT, FLOAT16, INT32, INT64, splitModel, valueInfo, weightName } from '../graphs/onnx-wire.js';
import { intAttr, SubgraphBuilder } from './subgraph.js';
import { mergeWeights, packWeights, type PackOptions } from './weights.js';

type IGraphProto = onnxProto.onnx.IGraphProto;
type INodeProto = onnxProto.onnx.INodeProto;

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
  forcedTokenIds: 'forced_token_ids',
  attentionMask: 'attention_mask',
} as const;
export const SEARCH_OUTPUTS = { sequences: 'sequences', scores: 'sequences_scores' } as const;

/** What one search graph decides for every row it runs (rows asking otherwise take the step loop). */
export interface SearchGraphSettings {
  /** The operator's `early_stopping` (beam search stops once numBeams hypotheses finished). */
  earlyStopping: boolean;
}

/** Where the weights go past protobuf's 2 GB cap (the fp32 418M export's two files together are 2.4 GB). */
export type SearchGraphOptions = PackOptions;

export type SearchGraphResult =
  | {
      ok: true;
      bytes: Uint8Array;
      /** The folder onnxruntime reads external weights from (`model_external_initializers_file_folder_path`). */
      weightsDir: string;
    }
  | { ok: false; reason: string };

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
  const { weights, encoderNames, names } = mergeWeights(encoder.weights, decoderWeights);
  const outer = Object.values(SEARCH_INPUTS).find((name) => names.has(name));
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
    e.output('logits', e.forcedLogits(SEARCH_INPUTS.forcedTokenIds, start, vocab, config.eosTokenId, real), real, [
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
        // The encoder subgraph forces the first token itself, from the outer `forced_token_ids` (`forcedLogits`).
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
        valueInfo(I.forcedTokenIds, INT32, ['batch']),
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
    return { ok: true, ...packWeights(model, weights, path.dirname(decoderFile), options) };
  } catch (err) {
    return fail((err as Error).message);
  }
}

function need(made: Map<string, string>, name: string): string {
  const value = made.get(name);
  if (value === undefined) throw new Error(`the step graph has no ${name} output`);
  return value;
}
