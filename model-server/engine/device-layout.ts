/**
 * @module engine/device-layout — re-laying batched tensors that live on the decoder's device (`gpu-buffer`
 * tensors of the WebGPU provider) without a host round trip: small graphs run on the same provider, their
 * outputs kept on the device.
 *
 * - `rows`: `Pad(Slice(Gather(x, rows, axis 0), start, end, axis 2), pads on axis 2)` of `[n, A, L, B]` float
 *   tensors (a cohort's caches `[n, H, L, dh]`, all in one run): rows leave, beams reorder by parent, padding is
 *   trimmed or added;
 * - `concat`: `Concat(axis 0)` of two such sets of tensors (rows of another cohort join);
 * - `upload`: `Identity` of an int64 `[n, L]` mask, so that a mask changed only when rows change is copied to the
 *   device once, not fed from the host at every step.
 *
 * Only the row indices and the lengths (a few int64s) cross to the device per re-layout; what it returns never
 * crosses back. Every output is a new device tensor: the caller disposes of the inputs it no longer holds.
 */
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { valueInfo as io } from './graphs/onnx-wire.js';
import { ATTR, FLOAT, INT64 } from './graphs/onnx-wire.js';

const { onnx } = onnxProto;

function model(name: string, graph: Omit<onnxProto.onnx.IGraphProto, 'name'>): Uint8Array {
  const proto = onnx.ModelProto.create({
    irVersion: 8,
    producerName: `mt-serve ${name}`,
    opsetImport: [{ domain: '', version: 17 }],
    graph: { name, ...graph },
  });
  return onnx.ModelProto.encode(proto).finish();
}

/**
 * `x0 … x{count-1}` [n, A, L, B] (each its own A, L, B), `rows` int64 [m], `starts`/`ends` int64 [1] on L, `pads`
 * int64 [8] → `y0 …` [m, A, L', B]: one run, one feed of indices, for every cache tensor of a cohort. Without `cut`
 * (a beam reorder: the length stays) only the Gather, and no `starts`/`ends`/`pads`: one copy per tensor, not three.
 */
export function rowsModel(count: number, cut = true): Uint8Array {
  const each = Array.from({ length: count }, (_, t) => t);
  const gathered = (t: number) => (cut ? `gathered${t}` : `y${t}`);
  return model(cut ? 'device_rows' : 'device_gather', {
    initializer: cut
      ? [{ name: 'axis2', dims: [1], dataType: INT64, rawData: new Uint8Array(BigInt64Array.of(2n).buffer) }]
      : [],
    node: each.flatMap((t) => [
      {
        opType: 'Gather',
        input: [`x${t}`, 'rows'],
        output: [gathered(t)],
        name: `gather${t}`,
        attribute: [{ name: 'axis', type: ATTR.INT, i: 0 }],
      },
      ...(cut
        ? [
            {
              opType: 'Slice',
              input: [gathered(t), 'starts', 'ends', 'axis2'],
              output: [`sliced${t}`],
              name: `slice${t}`,
            },
            { opType: 'Pad', input: [`sliced${t}`, 'pads'], output: [`y${t}`], name: `pad${t}` },
          ]
        : []),
    ]),
    input: [
      ...each.map((t) => io(`x${t}`, FLOAT, ['n', `A${t}`, `L${t}`, `B${t}`])),
      io('rows', INT64, ['m']),
      ...(cut ? [io('starts', INT64, [1]), io('ends', INT64, [1]), io('pads', INT64, [8])] : []),
    ],
    output: each.map((t) => io(`y${t}`, FLOAT, ['m', `A${t}`, cut ? `L2_${t}` : `L${t}`, `B${t}`])),
  });
}

/** `a0 …`, `b0 …` → `y{t}` = `a{t}` and `b{t}` stacked on axis 0. */
export function concatModel(count: number): Uint8Array {
  const each = Array.from({ length: count }, (_, t) => t);
  return model('device_concat', {
    node: each.map((t) => ({
      opType: 'Concat',
      input: [`a${t}`, `b${t}`],
      output: [`y${t}`],
      name: `concat${t}`,
      attribute: [{ name: 'axis', type: ATTR.INT, i: 0 }],
    })),
    input: each.flatMap((t) => [
      io(`a${t}`, FLOAT, ['n', `A${t}`, `L${t}`, `B${t}`]),
      io(`b${t}`, FLOAT, ['m', `A${t}`, `L${t}`, `B${t}`]),
    ]),
    output: each.map((t) => io(`y${t}`, FLOAT, ['nm', `A${t}`, `L${t}`, `B${t}`])),
  });
}

/** `x` [n, L] (int64, or float32 with `float`) → `y`, the same values on the device. */
export function uploadModel(float = false): Uint8Array {
  const type = float ? FLOAT : INT64;
  return model('device_upload', {
    node: [{ opType: 'Identity', input: ['x'], output: ['y'], name: 'identity' }],
    input: [io('x', type, ['n', 'L'])],
    output: [io('y', type, ['n', 'L'])],
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

/** The layout sessions of one device (per tensor count, made when first needed), and the bytes fed from the host. */
export class DeviceLayout {
  readonly #options: ort.InferenceSession.SessionOptions;
  readonly #rows = new Map<number, Promise<ort.InferenceSession>>();
  readonly #gather = new Map<number, Promise<ort.InferenceSession>>();
  readonly #concat = new Map<number, Promise<ort.InferenceSession>>();
  readonly #upload: ort.InferenceSession;
  readonly #floatMask: boolean;
  /** Bytes fed from the host (row indices, lengths, uploaded masks) since load. */
  hostBytes = 0;

  private constructor(options: ort.InferenceSession.SessionOptions, upload: ort.InferenceSession, floatMask: boolean) {
    this.#options = options;
    this.#upload = upload;
    this.#floatMask = floatMask;
  }

  /**
   * The layout sessions on `provider`, every output kept on the device. `floatMask`: the decoder reads its encoder mask
   * as float (decoder-fuse.ts `floatMaskInput`), so `upload` sends float32.
   */
  static async create(
    provider: ort.InferenceSession.ExecutionProviderConfig,
    { floatMask = false }: { floatMask?: boolean } = {},
  ): Promise<DeviceLayout> {
    const options: ort.InferenceSession.SessionOptions = {
      executionProviders: [provider],
      graphOptimizationLevel: 'all',
      preferredOutputLocation: 'gpu-buffer',
      logSeverityLevel: 3,
    };
    return new DeviceLayout(options, await ort.InferenceSession.create(uploadModel(floatMask), options), floatMask);
  }

  #session(
    cache: Map<number, Promise<ort.InferenceSession>>,
    count: number,
    make: (count: number) => Uint8Array,
  ): Promise<ort.InferenceSession> {
    let session = cache.get(count);
    if (session === undefined) cache.set(count, (session = ort.InferenceSession.create(make(count), this.#options)));
    return session;
  }

  /** Rows `pick.rows` of each of `xs` ([n, A, L, B] on the device, one length L), cut or padded to `pick.to`. */
  async rows(xs: readonly ort.Tensor[], pick: RowPick): Promise<ort.Tensor[]> {
    const { length, to, align } = pick;
    const keep = Math.min(length, to);
    const start = align === 'start' ? 0 : length - keep;
    const pad = to - keep;
    const int64 = (values: number[]) =>
      new ort.Tensor('int64', BigInt64Array.from(values.map(BigInt)), [values.length]);
    const cut = keep !== length || pad !== 0;
    const feeds: Record<string, ort.Tensor> = { rows: int64([...pick.rows]) };
    if (cut) {
      feeds.starts = int64([start]);
      feeds.ends = int64([start + keep]);
      // [begin of n, A, L, B, end of n, A, L, B]: padding goes before a right-aligned row, after a left-aligned one.
      feeds.pads = int64([0, 0, align === 'end' ? pad : 0, 0, 0, 0, align === 'start' ? pad : 0, 0]);
    }
    xs.forEach((x, t) => (feeds[`x${t}`] = x));
    this.hostBytes += 8 * (pick.rows.length + (cut ? 2 + 8 : 0));
    const session = cut
      ? this.#session(this.#rows, xs.length, rowsModel)
      : this.#session(this.#gather, xs.length, (count) => rowsModel(count, false));
    const out = await (await session).run(feeds);
    return xs.map((_, t) => out[`y${t}`]!);
  }

  /** `as[t]` and `bs[t]` stacked on the row axis (equal other dimensions), for each t. */
  async concat(as: readonly ort.Tensor[], bs: readonly ort.Tensor[]): Promise<ort.Tensor[]> {
    const feeds: Record<string, ort.Tensor> = {};
    as.forEach((a, t) => {
      feeds[`a${t}`] = a;
      feeds[`b${t}`] = bs[t]!;
    });
    const out = await (await this.#session(this.#concat, as.length, concatModel)).run(feeds);
    return as.map((_, t) => out[`y${t}`]!);
  }

  /** An int64 `[n, L]` host mask as a device tensor, of the type the decoder reads (`create`'s `floatMask`). */
  async upload(data: BigInt64Array, dims: readonly number[]): Promise<ort.Tensor> {
    const x = this.#floatMask
      ? new ort.Tensor('float32', Float32Array.from(data, Number), dims)
      : new ort.Tensor('int64', data, dims);
    this.hostBytes += (x.data as ArrayBufferView).byteLength;
    return (await this.#upload.run({ x })).y!;
  }

  async release(): Promise<void> {
    const made = await Promise.all([...this.#rows.values(), ...this.#gather.values(), ...this.#concat.values()]);
    await Promise.all([...made.map((s) => s.release()), this.#upload.release()]);
  }
}
