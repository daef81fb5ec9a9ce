/**
 * @module engine/beam-head — a small graph run after the decoder on beam-search steps: for each row, the
 * log-softmax normaliser of its last position's logits and its top K logits (values and ids), so the host's
 * beam search reads (K + 1) numbers per row instead of scanning the vocabulary in JavaScript.
 *
 * Why it is exact: a sequence's next beams are the 2·numBeams best of beamLogprob + logprob(token) over all its
 * beams and tokens; within one beam that order is the order of the logits (one shift per beam), so the best
 * 2·numBeams overall are among each beam's 2·numBeams best, and one more (K = 2·numBeams + 1) covers a `</s>`
 * suppressed by minNewTokens. It is its own session, run only on steps with beam rows, so greedy steps pay
 * nothing; it takes the decoder's logits as they are (on the CPU provider, the decoder's output memory itself).
 * With the state on a GPU every step reads the logits through a head, greedy ones through `greedyHeadModel`.
 */
import type * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { ATTR, FLOAT, INT32, INT64 } from './graphs/onnx-wire.js';

const { onnx } = onnxProto;

export const BEAM_HEAD_OUTPUTS = { values: 'top_values', ids: 'top_ids', logSumExp: 'log_sum_exp' } as const;

const int64 = (name: string, values: bigint[]) => ({
  name,
  dims: [values.length],
  dataType: INT64,
  rawData: new Uint8Array(BigInt64Array.from(values).buffer),
});

const io = (name: string, elemType: number, dims: (number | string)[]) => ({
  name,
  type: {
    tensorType: {
      elemType,
      shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
    },
  },
});

const KEEP_DIMS = { name: 'keepdims', type: ATTR.INT, i: 1 };

const reduce = (opType: string, input: string, output: string): onnxProto.onnx.INodeProto => ({
  opType,
  input: [input],
  output: [output],
  name: output,
  attribute: [{ name: 'axes', type: ATTR.INTS, ints: [-1] }, KEEP_DIMS],
});

/** `logits` [n, T, V] → `last` [n, 1, V], then `nodes`; the three outputs of `beamHeadModel`. */
function headModel(
  name: string,
  nodes: onnxProto.onnx.INodeProto[],
  extra: onnxProto.onnx.ITensorProto[] = [],
  ids = 'top_ids64',
) {
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: `mt-serve ${name}`,
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name,
      initializer: [
        int64('last.starts', [-1n]),
        int64('last.ends', [BigInt(Number.MAX_SAFE_INTEGER)]),
        int64('last.axes', [1n]),
        int64('sum.axes', [-1n]),
        ...extra,
      ],
      node: [
        { opType: 'Slice', input: ['logits', 'last.starts', 'last.ends', 'last.axes'], output: ['last'], name: 'last' },
        // max + log Σ exp(x − max): the WebGPU provider's ReduceLogSumExp overflows from logits of about 89 on.
        reduce('ReduceMax', 'last', 'last.value'),
        { opType: 'Sub', input: ['last', 'last.value'], output: ['shifted'], name: 'shifted' },
        { opType: 'Exp', input: ['shifted'], output: ['exp'], name: 'exp' },
        { opType: 'ReduceSum', input: ['exp', 'sum.axes'], output: ['sum'], name: 'sum', attribute: [KEEP_DIMS] },
        { opType: 'Log', input: ['sum'], output: ['log_sum'], name: 'log_sum' },
        { opType: 'Add', input: ['last.value', 'log_sum'], output: [BEAM_HEAD_OUTPUTS.logSumExp], name: 'lse' },
        ...nodes,
        // Token ids fit int32: half the bytes that cross to the host per candidate.
        {
          opType: 'Cast',
          input: [ids],
          output: [BEAM_HEAD_OUTPUTS.ids],
          name: 'ids32',
          attribute: [{ name: 'to', type: ATTR.INT, i: INT32 }],
        },
      ],
      input: [io('logits', FLOAT, ['n', 'T', 'V']), io('k', INT64, [1])],
      output: [
        io(BEAM_HEAD_OUTPUTS.logSumExp, FLOAT, ['n', 1, 1]),
        io(BEAM_HEAD_OUTPUTS.values, FLOAT, ['n', 1, 'K']),
        io(BEAM_HEAD_OUTPUTS.ids, INT32, ['n', 1, 'K']),
      ],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

/**
 * `logits` float32 [n, T, V], `k` int64 [1] → `log_sum_exp` [n, 1, 1], `top_values` / `top_ids` (int32) [n, 1, k]:
 * of the last position, the top k sorted best first.
 */
/**
 * `logits` float32 [n, T, V], `k` int64 [1] → `log_sum_exp` [n, 1, 1], `top_values` / `top_ids` (int32) [n, 1, k]:
 * of the last position, the top k sorted best first.
 */
export function beamHeadModel(): Uint8Array {
  return headModel('beam_head', [
    {
      opType: 'TopK',
      input: ['last', 'k'],
      output: [BEAM_HEAD_OUTPUTS.values, 'top_ids64'],
      name: 'topk',
      attribute: [
        { name: 'axis', type: ATTR.INT, i: -1 },
        { name: 'largest', type: ATTR.INT, i: 1 },
        { name: 'sorted', type: ATTR.INT, i: 1 },
      ],
    },
  ]);
}

/** Ids as floats (exact below 2^24: the provider reduces floats, not int64), and `beyond` = vocab for "none". */
function idTables(vocab: number): onnxProto.onnx.ITensorProto[] {
  const ids = Float32Array.from({ length: vocab }, (_, i) => i);
  return [
    { name: 'ids', dims: [vocab], dataType: FLOAT, rawData: new Uint8Array(ids.buffer) },
    { name: 'beyond', dims: [], dataType: FLOAT, rawData: new Uint8Array(Float32Array.of(vocab).buffer) },
  ];
}

/** The max of `x` (`x.value`; made by headModel for `last`) and the lowest id holding it (`x.id`). */
function best(x: string): onnxProto.onnx.INodeProto[] {
  return [
    ...(x === 'last' ? [] : [reduce('ReduceMax', x, `${x}.value`)]),
    { opType: 'Equal', input: [x, `${x}.value`], output: [`${x}.is_max`], name: `${x}.is_max` },
    { opType: 'Where', input: [`${x}.is_max`, 'ids', 'beyond'], output: [`${x}.ids`], name: `${x}.ids` },
    reduce('ReduceMin', `${x}.ids`, `${x}.id`),
  ];
}

function concat(input: string[], output: string): onnxProto.onnx.INodeProto {
  return {
    opType: 'Concat',
    input,
    output: [output],
    name: output,
    attribute: [{ name: 'axis', type: ATTR.INT, i: -1 }],
  };
}

/**
 * The greedy steps' head on a GPU: the outputs of `beamHeadModel` at k = 2 as greedy reads them (decoding.ts: the
 * second candidate is read only when a suppressed `</s>` came first): the best logit, and the best with `</s>`
 * (`eosId`) pushed to the bottom, which is TopK's runner-up wherever `</s>` is best. Each is a max, then the lowest id
 * holding it (ties go to the lower id, as in TopK), all reductions: the WebGPU provider's TopK sorts the whole
 * vocabulary (about 150 GPU programs a run at M2M100's 128k tokens, 6 ms a step at batch 64 on an H200) and its ArgMax
 * scans each row in one thread (20 ms), where a reduction takes a fraction of a millisecond.
 * `k` is read for the same feeds as `beamHeadModel` and must be 2.
 */
export function greedyHeadModel(vocab: number, eosId: number): Uint8Array {
  const penalty = new Float32Array(vocab);
  penalty[eosId] = -Infinity;
  return headModel(
    'greedy_head',
    [
      ...best('last'),
      { opType: 'Add', input: ['last', 'no_eos.penalty'], output: ['no_eos'], name: 'no_eos' },
      ...best('no_eos'),
      concat(['last.value', 'no_eos.value'], BEAM_HEAD_OUTPUTS.values),
      concat(['last.id', 'no_eos.id'], 'top_ids_float'),
    ],
    [
      { name: 'no_eos.penalty', dims: [vocab], dataType: FLOAT, rawData: new Uint8Array(penalty.buffer) },
      ...idTables(vocab),
    ],
    'top_ids_float',
  );
}

/**
 * `beamHeadModel` at a fixed `k` for a GPU: the top k by k rounds of "the max, the lowest id holding it, that id
 * pushed to the bottom" (TopK's order: best first, ties to the lower id), about 6 reductions and element-wise
 * programs a round where the WebGPU provider's TopK sorts the whole vocabulary (150 programs). Exact while a row has at
 * least k logits above -Infinity. `k` is fed as in `beamHeadModel` and must be this k.
 */
export function roundsHeadModel(vocab: number, k: number): Uint8Array {
  const nodes: onnxProto.onnx.INodeProto[] = [];
  let x = 'last';
  for (let round = 0; round < k; round++) {
    nodes.push(...best(x));
    if (round === k - 1) break;
    const next = `round${round + 1}`;
    nodes.push(
      { opType: 'Equal', input: ['ids', `${x}.id`], output: [`${next}.taken`], name: `${next}.taken` },
      { opType: 'Where', input: [`${next}.taken`, 'bottom', x], output: [next], name: next },
    );
    x = next;
  }
  const names = ['last', ...Array.from({ length: k - 1 }, (_, r) => `round${r + 1}`)];
  nodes.push(
    concat(
      names.map((n) => `${n}.value`),
      BEAM_HEAD_OUTPUTS.values,
    ),
    concat(
      names.map((n) => `${n}.id`),
      'top_ids_float',
    ),
  );
  return headModel(
    `rounds_head_${k}`,
    nodes,
    [
      { name: 'bottom', dims: [], dataType: FLOAT, rawData: new Uint8Array(Float32Array.of(-Infinity).buffer) },
      ...idTables(vocab),
    ],
    'top_ids_float',
  );
}

/** Widest k the rounds head takes; beyond it a TopK head (its cost does not grow with k). */
const MAX_ROUNDS = 16;

/**
 * The heads a device-state engine reads its logits through (every step: the logits never leave the device), one
 * session per k, made when a step first needs it: k = 2 (greedy steps) `greedyHeadModel`, up to MAX_ROUNDS
 * `roundsHeadModel`, beyond `beamHeadModel`.
 */
export class DeviceHeads {
  readonly #made = new Map<number, Promise<ort.InferenceSession>>();
  readonly #open: (model: Uint8Array) => Promise<ort.InferenceSession>;
  readonly #vocab: number;
  readonly #eosId: number;

  constructor(open: (model: Uint8Array) => Promise<ort.InferenceSession>, vocab: number, eosId: number) {
    this.#open = open;
    this.#vocab = vocab;
    this.#eosId = eosId;
  }

  for(k: number): Promise<ort.InferenceSession> {
    const key = k > MAX_ROUNDS ? 0 : k;
    let head = this.#made.get(key);
    if (head === undefined) {
      const model =
        key === 2
          ? greedyHeadModel(this.#vocab, this.#eosId)
          : key === 0
            ? beamHeadModel()
            : roundsHeadModel(this.#vocab, k);
      head = this.#open(model);
      // A failed creation is not kept: the next step tries again.
      head.catch(() => this.#made.delete(key));
      this.#made.set(key, head);
    }
    return head;
  }

  async release(): Promise<void> {
    const made = await Promise.allSettled(this.#made.values());
    this.#made.clear();
    for (const m of made) if (m.status === 'fulfilled') await m.value.release();
  }
}
