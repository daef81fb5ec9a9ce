/**
 * device-layout.ts on the WebGPU provider through lavapipe: its row gathers, cuts, pads and concatenations equal
 * row-layout.ts' on the host. Skipped, saying why, where no software adapter is found (CI installs one).
 */
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import onnxProto from 'onnx-proto';
import { afterAll, describe, expect, it } from 'vitest';
import { DeviceLayout } from './device-layout.js';
import { relayoutRows } from './loop/row-layout.js';
import { restrictVulkanDrivers, webgpuDrivers } from './vulkan-drivers.js';

const provider = { name: 'webgpu' } as ort.InferenceSession.ExecutionProviderConfig;
const drivers = webgpuDrivers(true);
let layout: DeviceLayout | null = null;
let download: ort.InferenceSession | null = null;
let unavailable: string | undefined;
if (!drivers.ok) unavailable = drivers.reason;
else {
  try {
    restrictVulkanDrivers(drivers.manifests);
    layout = await DeviceLayout.create(provider);
    // Identity with its output on the CPU: how a test reads a device tensor (getData() would abort the process).
    const { onnx } = onnxProto;
    const value = (name: string) => ({ name, type: { tensorType: { elemType: 1 } } });
    const bytes = onnx.ModelProto.encode(
      onnx.ModelProto.create({
        irVersion: 8,
        opsetImport: [{ domain: '', version: 17 }],
        graph: {
          name: 'download',
          node: [{ opType: 'Identity', input: ['x'], output: ['y'] }],
          input: [value('x')],
          output: [value('y')],
        },
      }),
    ).finish();
    download = await ort.InferenceSession.create(bytes, { executionProviders: [provider] });
  } catch (err) {
    unavailable = (err as Error).message.split('\n')[0];
  }
}
if (unavailable !== undefined && process.env.CI !== 'true') {
  console.warn(`device-layout.test.ts skipped: no WebGPU adapter through lavapipe here (${unavailable})`);
}

afterAll(async () => {
  await layout?.release();
  await download?.release();
});

const read = async (tensor: ort.Tensor) => {
  const out = (await download!.run({ x: tensor })).y!;
  tensor.dispose();
  return { dims: out.dims, data: Array.from(out.data as Float32Array) };
};

it.runIf(unavailable !== undefined && process.env.CI === 'true')('WebGPU through lavapipe is available on CI', () => {
  expect.fail(`CI must run the device layout tests: ${unavailable}`);
});

describe.skipIf(unavailable !== undefined)('device layout on WebGPU', () => {
  // [n 3, A 2, L 4, B 3] with distinct values.
  const x = new ort.Tensor(
    'float32',
    Float32Array.from({ length: 3 * 2 * 4 * 3 }, (_, i) => i + 1),
    [3, 2, 4, 3],
  );
  const host = (rows: number[], to: number, align: 'start' | 'end') =>
    Array.from(
      relayoutRows(
        rows.map((row) => ({ data: x.data as Float32Array, row, length: 4 })),
        2,
        3,
        to,
        align,
      ),
    );

  it.each([
    { rows: [2, 0, 2], to: 4, align: 'end' as const },
    { rows: [1], to: 2, align: 'end' as const },
    { rows: [0, 2], to: 6, align: 'end' as const },
    { rows: [2, 1], to: 3, align: 'start' as const },
    { rows: [1, 0, 2], to: 5, align: 'start' as const },
  ])('rows $rows to length $to aligned at the $align equal the host re-layout', async ({ rows, to, align }) => {
    const [y] = await layout!.rows([x], { rows, length: 4, to, align });
    expect(y!.location).toBe('gpu-buffer');
    expect(await read(y!)).toEqual({ dims: [rows.length, 2, to, 3], data: host(rows, to, align) });
  });

  it('concatenates on the row axis, device tensors in, a device tensor out', async () => {
    const a = await layout!.rows([x, x], { rows: [1], length: 4, to: 5, align: 'end' });
    const b = await layout!.rows([x, x], { rows: [2, 0], length: 4, to: 5, align: 'end' });
    const ys = await layout!.concat(a, b);
    for (const t of [...a, ...b]) t.dispose();
    expect(ys).toHaveLength(2);
    for (const y of ys) expect(await read(y)).toEqual({ dims: [3, 2, 5, 3], data: host([1, 2, 0], 5, 'end') });
  });

  it('counts the bytes its feeds take from the host: indices and lengths, and uploaded masks', async () => {
    const before = layout!.hostBytes;
    for (const y of await layout!.rows([x, x], { rows: [0, 1], length: 4, to: 5, align: 'end' })) y.dispose();
    const mask = await layout!.upload(BigInt64Array.of(1n, 1n, 0n, 1n, 1n, 1n), [2, 3]);
    expect(mask.location).toBe('gpu-buffer');
    expect(mask.dims).toEqual([2, 3]);
    mask.dispose();
    expect(layout!.hostBytes - before).toBe(8 * (2 + 2 + 8) + 6 * 8);
    // A reorder that keeps the length (beams following their parents) sends the row indices only.
    const reorder = layout!.hostBytes;
    for (const y of await layout!.rows([x, x], { rows: [1, 0, 1], length: 4, to: 4, align: 'end' })) y.dispose();
    expect(layout!.hostBytes - reorder).toBe(8 * 3);
  });
});
