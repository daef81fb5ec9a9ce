import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { listVulkanDrivers, webgpuDrivers } from '../engine/vulkan-drivers.js';
import { detectCuda, detectWebGpu, gpuWorkers, placeModel, type WebGpuAvailability } from './devices.js';
import { GpuMonitor, parseGpuCsv } from './gpu-monitor.js';

const dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-devices-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** An executable standing in for nvidia-smi (a real process with the real tool's output format). */
function fakeNvidiaSmi(name: string, script: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, `#!/bin/sh\n${script}\n`);
  chmodSync(file, 0o755);
  return file;
}

describe('device placement', () => {
  it('no CUDA provider library → unavailable, with the reason', () => {
    const cuda = detectCuda({ providerDir: dir });
    expect(cuda.gpus).toEqual([]);
    expect(cuda.unavailableReason).toMatch(/CUDA provider .* is not installed/);
  });

  it('provider present: GPUs come from nvidia-smi --list-gpus; a failing nvidia-smi says so', () => {
    writeFileSync(path.join(dir, 'libonnxruntime_providers_cuda.so'), '');
    const smi = fakeNvidiaSmi(
      'smi-ok',
      'echo "GPU 0: NVIDIA H100 (UUID: GPU-1)"; echo "GPU 1: NVIDIA H100 (UUID: GPU-2)"',
    );
    expect(detectCuda({ providerDir: dir, nvidiaSmi: smi })).toEqual({ gpus: [0, 1], unavailableReason: undefined });
    const broken = fakeNvidiaSmi('smi-broken', 'echo "NVIDIA-SMI has failed" >&2; exit 9');
    expect(detectCuda({ providerDir: dir, nvidiaSmi: broken }).unavailableReason).toMatch(/^nvidia-smi failed/);
    const none = fakeNvidiaSmi('smi-none', 'exit 0');
    expect(detectCuda({ providerDir: dir, nvidiaSmi: none }).unavailableReason).toBe('nvidia-smi lists no GPU');
  });

  it('maps setup_config ids onto the host, never silently', () => {
    const host = { gpus: [0, 1], unavailableReason: undefined };
    expect(placeModel('1', host)).toEqual({
      device: { kind: 'cuda', id: 1 },
      requestedCudaId: 1,
      fallbackReason: undefined,
    });
    expect(placeModel('2', host)).toEqual({
      device: { kind: 'cpu' },
      requestedCudaId: 2,
      fallbackReason: 'cuda:2 requested; this host has GPU 0, 1 only',
    });
    expect(placeModel(undefined, host)).toEqual({
      device: { kind: 'cpu' },
      requestedCudaId: undefined,
      fallbackReason: undefined,
    });
    expect(placeModel('0', { gpus: [], unavailableReason: 'no driver' }).fallbackReason).toBe(
      'cuda:0 requested; no driver',
    );
  });

  it('CUDA unusable: WebGPU when an adapter was found, else the CPU with both reasons', () => {
    const noCuda = { gpus: [], unavailableReason: 'no CUDA provider' };
    const found: WebGpuAvailability = { available: true, software: false, unavailableReason: undefined };
    expect(placeModel('1', noCuda, found)).toEqual({
      device: { kind: 'webgpu', id: 1 },
      requestedCudaId: 1,
      fallbackReason: 'cuda:1 requested; no CUDA provider: running on WebGPU',
    });
    expect(placeModel('0', noCuda, { ...found, software: true }).device).toEqual({
      kind: 'webgpu',
      id: 0,
      software: true,
    });
    const none: WebGpuAvailability = { available: false, software: false, unavailableReason: 'WebGPU: no adapter' };
    expect(placeModel('0', noCuda, none)).toEqual({
      device: { kind: 'cpu' },
      requestedCudaId: 0,
      fallbackReason: 'cuda:0 requested; no CUDA provider; WebGPU: no adapter',
    });
    // CUDA wins whatever WebGPU offers.
    expect(placeModel('0', { gpus: [0], unavailableReason: undefined }, found).device).toEqual({ kind: 'cuda', id: 0 });
  });
});

describe('WebGPU devices', () => {
  const icd = (name: string, library: string) => {
    const file = path.join(dir, name);
    writeFileSync(file, JSON.stringify({ file_format_version: '1.0.0', ICD: { library_path: library } }));
    return file;
  };

  it('classifies Vulkan drivers: lavapipe and SwiftShader are software; a given list overrides the folders', () => {
    const folder = mkdtempSync(path.join(dir, 'icd.d-'));
    const lvp = icd('icd.d-lvp.json', '/usr/lib/x86_64-linux-gnu/libvulkan_lvp.so');
    const swift = icd('icd.d-swift.json', 'libvk_swiftshader.so');
    const nvidia = icd('icd.d-nvidia.json', 'libEGL_nvidia.so.0');
    writeFileSync(path.join(folder, 'lvp.json'), JSON.stringify({ ICD: { library_path: 'libvulkan_lvp.so' } }));
    expect(listVulkanDrivers({}, [folder])).toEqual([
      { manifest: path.join(folder, 'lvp.json'), library: 'libvulkan_lvp.so', software: true },
    ]);
    const env = { VK_DRIVER_FILES: [lvp, swift, nvidia].join(':') };
    expect(listVulkanDrivers(env, [folder]).map((d) => d.software)).toEqual([true, true, false]);
    expect(webgpuDrivers(false, env)).toEqual({ ok: true, manifests: [nvidia] });
    expect(webgpuDrivers(true, env)).toEqual({ ok: true, manifests: [lvp, swift] });
    expect(webgpuDrivers(false, { VK_ICD_FILENAMES: lvp })).toEqual({
      ok: false,
      reason: 'only software Vulkan drivers are installed (libvulkan_lvp.so); WEBGPU_ALLOW_SOFTWARE=1 allows them',
    });
    expect(webgpuDrivers(true, { VK_DRIVER_FILES: nvidia })).toMatchObject({ ok: false });
  });

  // The real probe (a child process creating a WebGPU session) on this host's drivers: a software adapter is
  // never taken unless allowed, so a CPU-only host with Mesa stays on the CPU.
  const lavapipe = listVulkanDrivers().find((d) => d.software);
  it.runIf(lavapipe !== undefined)('the probe takes lavapipe only when software adapters are allowed', () => {
    const saved = process.env.VK_DRIVER_FILES;
    process.env.VK_DRIVER_FILES = lavapipe!.manifest;
    try {
      expect(detectWebGpu({ allowSoftware: false })).toEqual({
        available: false,
        software: false,
        unavailableReason: expect.stringMatching(/^WebGPU: only software Vulkan drivers are installed/),
      });
      expect(detectWebGpu({ allowSoftware: true })).toEqual({
        available: true,
        software: true,
        unavailableReason: undefined,
      });
    } finally {
      if (saved === undefined) delete process.env.VK_DRIVER_FILES;
      else process.env.VK_DRIVER_FILES = saved;
    }
  });
});

describe('GPU monitor', () => {
  it('parses nvidia-smi CSV and formats TorchServe’s gpuUsage text', async () => {
    expect(parseGpuCsv('0, NVIDIA H100, 37, 1024, 81559\nbad line\n1, Tesla T4, rev A, [N/A], 0, 15360\n')).toEqual([
      {
        index: 0,
        name: 'NVIDIA H100',
        utilizationPercent: 37,
        memoryUsedBytes: 1024 * 2 ** 20,
        memoryTotalBytes: 81559 * 2 ** 20,
      },
      {
        index: 1,
        name: 'Tesla T4, rev A',
        utilizationPercent: null,
        memoryUsedBytes: 0,
        memoryTotalBytes: 15360 * 2 ** 20,
      },
    ]);
    const monitor = new GpuMonitor({
      command: fakeNvidiaSmi('smi-query', 'echo "0, NVIDIA H100, 37, 1024, 81559"'),
      cacheMs: 60_000,
    });
    expect(monitor.usageText(0)).toBe('N/A');
    await monitor.sample();
    expect(monitor.usageText(0)).toBe('gpuId::0 utilization.gpu [%]::37 % memory.used [MiB]::1024 MiB');
  });

  it('answers nothing, quickly, on a host without nvidia-smi', async () => {
    const monitor = new GpuMonitor({ command: path.join(dir, 'does-not-exist') });
    expect(await monitor.sample()).toEqual([]);
    expect(await monitor.sample()).toEqual([]);
    expect(monitor.error).toBe('nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU');
  });
});

describe('gpuWorkers (GPU_WORKERS)', () => {
  it('auto: two on CUDA, one on WebGPU; a number as set', () => {
    expect(gpuWorkers('auto', { kind: 'cuda', id: 0 })).toBe(2);
    expect(gpuWorkers('auto', { kind: 'webgpu', id: 0 })).toBe(1);
    expect(gpuWorkers(3, { kind: 'cuda', id: 1 })).toBe(3);
  });
});
