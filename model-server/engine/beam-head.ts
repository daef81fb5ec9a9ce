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
 */
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;

export const BEAM_HEAD_OUTPUTS = { values: 'top_values', ids: 'top_ids', logSumExp: 'log_sum_exp' } as const;

const FLOAT = 1;
const INT32 = 6;
const INT64 = 7;
const ATTRIBUTE_INT = 2;
const ATTRIBUTE_INTS = 7;

/**
 * `logits` float32 [n, T, V], `k` int64 [1] → `log_sum_exp` [n, 1, 1], `top_values` / `top_ids` (int32) [n, 1, k]:
 * of the last position, the top k sorted best first.
 */
export function beamHeadModel(): Uint8Array {
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
  const model = onnx.ModelProto.create({
    irVersion: 8,
    producerName: 'mt-serve beam-head',
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name: 'beam_head',
      initializer: [
        int64('last.starts', [-1n]),
        int64('last.ends', [BigInt(Number.MAX_SAFE_INTEGER)]),
        int64('last.axes', [1n]),
      ],
      node: [
        { opType: 'Slice', input: ['logits', 'last.starts', 'last.ends', 'last.axes'], output: ['last'], name: 'last' },
        {
          opType: 'ReduceLogSumExp',
          input: ['last'],
          output: [BEAM_HEAD_OUTPUTS.logSumExp],
          name: 'lse',
          attribute: [
            { name: 'axes', type: ATTRIBUTE_INTS, ints: [-1] },
            { name: 'keepdims', type: ATTRIBUTE_INT, i: 1 },
          ],
        },
        {
          opType: 'TopK',
          input: ['last', 'k'],
          output: [BEAM_HEAD_OUTPUTS.values, 'top_ids64'],
          name: 'topk',
          attribute: [
            { name: 'axis', type: ATTRIBUTE_INT, i: -1 },
            { name: 'largest', type: ATTRIBUTE_INT, i: 1 },
            { name: 'sorted', type: ATTRIBUTE_INT, i: 1 },
          ],
        },
        // Token ids fit int32: half the bytes that cross to the host per candidate.
        {
          opType: 'Cast',
          input: ['top_ids64'],
          output: [BEAM_HEAD_OUTPUTS.ids],
          name: 'ids32',
          attribute: [{ name: 'to', type: ATTRIBUTE_INT, i: INT32 }],
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
