/**
 * @module engine/device-layout — re-laying batched tensors that live on the decoder's device (`gpu-buffer`
 * tensors of the WebGPU provider) without a host round trip: small graphs run on the same provider, their
 * outputs kept on the device.
 *
 * - `rows`: `Pad(Slice(Gather(x, rows, axis 0), start, end, axis 2), pads on axis 2)` of a `[n, A, L, B]` float
 *   tensor (a cache `[n, H, L, dh]`): rows leave, beams reorder by parent, padding is trimmed or added;
 * - `concat`: `Concat(axis 0)` of two such tensors (rows of another cohort join);
 * - `upload`: `Identity` of an int64 `[n, L]` mask, so that a mask changed only when rows change is copied to the
 *   device once, not fed from the host at every step.
 *
 * Only the row indices and the lengths (a few int64s) cross to the device per re-layout; what it returns never
 * crosses back. Every output is a new device tensor: the caller disposes of the inputs it no longer holds.
 */
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';

const { onnx } = onnxProto;
const FLOAT = 1;
const INT64 = 7;
const ATTRIBUTE_INT = 2;

type Dim = number | string;

function io(name: string, elemType: number, dims: Dim[]) {
  return {
    name,
    type: {
      tensorType: {
        elemType,
        shape: { dim: dims.map((d) => (typeof d === 'number' ? { dimValue: d } : { dimParam: d })) },
      },
    },
  };
}

function model(name: string, graph: Omit<onnxProto.onnx.IGraphProto, 'name'>): Uint8Array {
  const proto = onnx.ModelProto.create({
    irVersion: 8,
    producerName: `mt-serve ${name}`,
    opsetImport: [{ domain: '', version: 17 }],
    graph: { name, ...graph },
  });
  return onnx.ModelProto.encode(proto).finish();
}

/** `x` [n, A, L, B], `rows` int64 [m], `starts`/`ends` int64 [1] on L, `pads` int64 [8] → `y` [m, A, L', B]. */
export function rowsModel(): Uint8Array {
  return model('device_rows', {
    initializer: [{ name: 'axis2', dims: [1], dataType: INT64, rawData: new Uint8Array(BigInt64Array.of(2n).buffer) }],
    node: [
      {
        opType: 'Gather',
        input: ['x', 'rows'],
        output: ['gathered'],
        name: 'gather',
        attribute: [{ name: 'axis', type: ATTRIBUTE_INT, i: 0 }],
      },
      { opType: 'Slice', input: ['gathered', 'starts', 'ends', 'axis2'], output: ['sliced'], name: 'slice' },
      { opType: 'Pad', input: ['sliced', 'pads'], output: ['y'], name: 'pad' },
    ],
    input: [
      io('x', FLOAT, ['n', 'A', 'L', 'B']),
      io('rows', INT64, ['m']),
      io('starts', INT64, [1]),
      io('ends', INT64, [1]),
      io('pads', INT64, [8]),
    ],
    output: [io('y', FLOAT, ['m', 'A', 'L2', 'B'])],
  });
}

/** `a` [n, A, L, B], `b` [m, A, L, B] → `y` [n + m, A, L, B]. */
export function concatModel(): Uint8Array {
  return model('device_concat', {
    node: [
      {
        opType: 'Concat',
        input: ['a', 'b'],
        output: ['y'],
        name: 'concat',
        attribute: [{ name: 'axis', type: ATTRIBUTE_INT, i: 0 }],
      },
    ],
    input: [io('a', FLOAT, ['n', 'A', 'L', 'B']), io('b', FLOAT, ['m', 'A', 'L', 'B'])],
    output: [io('y', FLOAT, ['nm', 'A', 'L', 'B'])],
  });
}

/** `x` int64 [n, L] → `y`, the same values on the device. */
export function uploadModel(): Uint8Array {
  return model('device_upload', {
    node: [{ opType: 'Identity', input: ['x'], output: ['y'], name: 'identity' }],
    input: [io('x', INT64, ['n', 'L'])],
    output: [io('y', INT64, ['n', 'L'])],
  });
}

/** Rows of a device tensor to keep, and how its length axis (2) is cut and padded. */
export interface RowPick {
  /** Source row of each output row. */
  rows: readonly number[];
  /** The source's length (axis 2). */
  length: number;
  /** The output's length: `min(length, to)` positions kept at the `align` end, zeros on the other side. */
  to: number;
  align: 'start' | 'end';
}

/** The layout sessions of one device, and the bytes their small feeds took from the host. */
export class DeviceLayout {
  readonly #rows: ort.InferenceSession;
  readonly #concat: ort.InferenceSession;
  readonly #upload: ort.InferenceSession;
  /** Bytes fed from the host (row indices, lengths, uploaded masks) since load. */
  hostBytes = 0;

  private constructor(rows: ort.InferenceSession, concat: ort.InferenceSession, upload: ort.InferenceSession) {
    this.#rows = rows;
    this.#concat = concat;
    this.#upload = upload;
  }

  /** The layout sessions on `provider`, every output kept on the device. */
  static async create(provider: ort.InferenceSession.ExecutionProviderConfig): Promise<DeviceLayout> {
    const options: ort.InferenceSession.SessionOptions = {
      executionProviders: [provider],
      graphOptimizationLevel: 'all',
      preferredOutputLocation: 'gpu-buffer',
      logSeverityLevel: 3,
    };
    const sessions = await Promise.all(
      [rowsModel(), concatModel(), uploadModel()].map((bytes) => ort.InferenceSession.create(bytes, options)),
    );
    return new DeviceLayout(sessions[0]!, sessions[1]!, sessions[2]!);
  }

  /** Rows `pick.rows` of `x` ([n, A, L, B] on the device), cut or padded to `pick.to` positions. */
  async rows(x: ort.Tensor, pick: RowPick): Promise<ort.Tensor> {
    const { length, to, align } = pick;
    const keep = Math.min(length, to);
    const start = align === 'start' ? 0 : length - keep;
    const pad = to - keep;
    const int64 = (values: number[]) =>
      new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), [values.length]);
    const feeds = {
      x,
      rows: int64([...pick.rows]),
      starts: int64([start]),
      ends: int64([start + keep]),
      // [begin of n, A, L, B, end of n, A, L, B]: padding goes before a right-aligned row, after a left-aligned one.
      pads: int64([0, 0, align === 'end' ? pad : 0, 0, 0, 0, align === 'start' ? pad : 0, 0]),
    };
    this.hostBytes += 8 * (pick.rows.length + 2 + 8);
    return (await this.#rows.run(feeds)).y!;
  }

  /** `a` and `b` stacked on the row axis (equal other dimensions). */
  async concat(a: ort.Tensor, b: ort.Tensor): Promise<ort.Tensor> {
    return (await this.#concat.run({ a, b })).y!;
  }

  /** An int64 `[n, L]` host array as a device tensor. */
  async upload(data: BigInt64Array, dims: readonly number[]): Promise<ort.Tensor> {
    this.hostBytes += data.byteLength;
    return (await this.#upload.run({ x: new ort.Tensor('int64', data, dims) })).y!;
  }

  async release(): Promise<void> {
    await Promise.all([this.#rows.release(), this.#concat.release(), this.#upload.release()]);
  }
}
