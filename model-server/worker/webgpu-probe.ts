/**
 * @module worker/webgpu-probe — a child process that answers "does onnxruntime's WebGPU provider find an adapter
 * here?" by doing it: it gives the Vulkan loader the drivers vulkan-drivers.ts allows, creates a one-node session
 * (y = x + x) on WebGPU and checks its answer. One JSON line on stdout:
 * `{"ok":true,"software":false}` or `{"ok":false,"reason":"…"}`.
 *
 * A child because Dawn's Vulkan instance lives as long as its process: the frontend must not hold one (nor risk
 * a driver's abort), and every worker makes its own. Argument `--software`: the software drivers instead of the
 * GPUs' (vulkan-drivers.ts).
 */
import onnxProto from 'onnx-proto';
import * as ort from 'onnxruntime-node';
import '../engine/ort-env.js';
import { restrictVulkanDrivers, webgpuDrivers } from '../engine/vulkan-drivers.js';

const { onnx } = onnxProto;

/** y = x + x over float32 [4]: one WebGPU kernel. */
function doublingModel(): Uint8Array {
  const io = (name: string) => ({
    name,
    type: { tensorType: { elemType: 1, shape: { dim: [{ dimValue: 4 }] } } },
  });
  const model = onnx.ModelProto.create({
    irVersion: 8,
    opsetImport: [{ domain: '', version: 17 }],
    graph: {
      name: 'probe',
      node: [{ opType: 'Add', input: ['x', 'x'], output: ['y'] }],
      input: [io('x')],
      output: [io('y')],
    },
  });
  return onnx.ModelProto.encode(model).finish();
}

async function probe(software: boolean): Promise<{ ok: true } | { ok: false; reason: string }> {
  const drivers = webgpuDrivers(software);
  if (!drivers.ok) return drivers;
  restrictVulkanDrivers(drivers.manifests);
  try {
    const session = await ort.InferenceSession.create(doublingModel(), {
      executionProviders: [{ name: 'webgpu' }] as ort.InferenceSession.ExecutionProviderConfig[],
      logSeverityLevel: 3,
    });
    const x = new Float32Array([1, 2, 3, 4]);
    const { y } = await session.run({ x: new ort.Tensor('float32', x, [4]) });
    const got = Array.from(y!.data as Float32Array);
    await session.release();
    if (got.join() !== '2,4,6,8') return { ok: false, reason: `the WebGPU adapter computed ${got.join()} for 2,4,6,8` };
    return { ok: true };
  } catch (err) {
    const message = (err as Error).message.split('\n')[0] ?? '';
    return { ok: false, reason: /Failed to [^\n]*$/.exec(message)?.[0] ?? message };
  }
}

const result = await probe(process.argv.includes('--software'));
process.stdout.write(`${JSON.stringify(result)}\n`);
