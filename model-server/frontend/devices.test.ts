import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { detectCuda, placeModel } from './devices.js';
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
