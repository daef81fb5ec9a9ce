/**
 * @module model-server/wlm/devices — where each model runs: setup_config.json's `cuda_id` mapped onto the
 * devices this host really has, decided once at start.
 *
 * A model pinned to GPU N runs on CUDA when onnxruntime-node's CUDA execution provider library is installed (npm
 * ci skips its download unless asked) AND `nvidia-smi --list-gpus` lists the GPU; else on onnxruntime's WebGPU
 * provider (Dawn on Vulkan, in the npm package as installed) when a child process finds a WebGPU adapter
 * (worker/webgpu-probe.ts) — never a software one (lavapipe, SwiftShader) unless `WEBGPU_ALLOW_SOFTWARE=1`;
 * else on the CPU. Whatever is not CUDA says why, in the log, describe output, `/status` and the
 * `x-device-fallback` header — never silently. Every CPU-fallback language shares one CPU engine: 14 languages
 * pinned to 3 absent GPUs must not cost 3 copies of the weights on a CPU host.
 *
 * onnxruntime-node 1.30's WebGPU provider takes no adapter choice (Dawn's first high-performance adapter), so on a
 * host with several GPUs and no CUDA provider every WebGPU worker uses that one adapter whatever its GPU id.
 */
import { execFileSync } from 'node:child_process';
import { resolveEntry } from '../../common/entry.js';
import { ALLOW_SOFTWARE_ENV } from '../engine/vulkan-drivers.js';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { DeviceInfo, DeviceRequest } from '../protocol.js';

/** What the host offers, decided once. */
export interface CudaAvailability {
  /** GPU indices `nvidia-smi --list-gpus` reported (empty when CUDA is unusable). */
  gpus: number[];
  /** Why CUDA is unusable; undefined when it is usable. */
  unavailableReason: string | undefined;
}

/** Whether onnxruntime's WebGPU provider found an adapter, decided once (only when CUDA is unusable). */
export interface WebGpuAvailability {
  available: boolean;
  /** The adapter found is a software one (allowed by WEBGPU_ALLOW_SOFTWARE=1 or the option). */
  software: boolean;
  /** Why WebGPU is unusable; undefined when it is usable. */
  unavailableReason: string | undefined;
}

/** WebGPU not probed (CUDA usable, or nothing is pinned to a GPU). */
export const WEBGPU_NOT_PROBED: WebGpuAvailability = {
  available: false,
  software: false,
  unavailableReason: 'WebGPU not probed',
};

/** Where a model is placed, and why it is not where setup_config.json asked, if it is not. */
export interface Placement {
  device: DeviceRequest;
  /** setup_config.json's GPU id for the model, if it names one. */
  requestedCudaId: number | undefined;
  fallbackReason: string | undefined;
}

export interface DetectOptions {
  /** Folder of onnxruntime-node's native binaries; default: the installed package's linux/x64 napi-v6 folder. */
  providerDir?: string;
  /** Command that lists GPUs; default `nvidia-smi`. */
  nvidiaSmi?: string;
}

const CUDA_PROVIDER_LIB = 'libonnxruntime_providers_cuda.so';

/** Probe the host once: the CUDA provider library, then the GPUs. Never throws. */
export function detectCuda(options: DetectOptions = {}): CudaAvailability {
  const providerDir = options.providerDir ?? defaultProviderDir();
  if (providerDir === undefined || !existsSync(path.join(providerDir, CUDA_PROVIDER_LIB))) {
    return {
      gpus: [],
      unavailableReason: `onnxruntime-node's CUDA provider (${CUDA_PROVIDER_LIB}) is not installed`,
    };
  }
  let listing: string;
  try {
    listing = execFileSync(options.nvidiaSmi ?? 'nvidia-smi', ['--list-gpus'], {
      encoding: 'utf8',
      timeout: 5_000,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (err) {
    return { gpus: [], unavailableReason: `nvidia-smi failed (${(err as Error).message.split('\n')[0]})` };
  }
  const gpus = [...listing.matchAll(/^GPU (\d+):/gm)].map((m) => Number(m[1]));
  return gpus.length === 0
    ? { gpus, unavailableReason: 'nvidia-smi lists no GPU' }
    : { gpus, unavailableReason: undefined };
}

export interface WebGpuDetectOptions {
  /** Allow a software adapter (lavapipe, SwiftShader) when no GPU's is found; default `WEBGPU_ALLOW_SOFTWARE=1`. */
  allowSoftware?: boolean;
  /** Most one probe may take (ms); default 60 s (a software adapter compiles its first kernel slowly). */
  timeoutMs?: number;
}

/**
 * Probe WebGPU once, in a child process (worker/webgpu-probe.ts): the GPUs' Vulkan drivers, then, if allowed and
 * none answered, the software ones. Never throws.
 */
export function detectWebGpu(options: WebGpuDetectOptions = {}): WebGpuAvailability {
  const gpu = probeWebGpu(false, options.timeoutMs);
  if (gpu.ok) return { available: true, software: false, unavailableReason: undefined };
  if (!(options.allowSoftware ?? process.env[ALLOW_SOFTWARE_ENV] === '1')) {
    return { available: false, software: false, unavailableReason: `WebGPU: ${gpu.reason}` };
  }
  const software = probeWebGpu(true, options.timeoutMs);
  if (software.ok) return { available: true, software: true, unavailableReason: undefined };
  return {
    available: false,
    software: false,
    unavailableReason: `WebGPU: ${gpu.reason}; software adapter: ${software.reason}`,
  };
}

function probeWebGpu(software: boolean, timeoutMs = 60_000): { ok: true } | { ok: false; reason: string } {
  const entry = resolveEntry(import.meta.url, '../worker/webgpu-probe');
  const args = [...entry.execArgv, entry.file, ...(software ? ['--software'] : [])];
  try {
    const out = execFileSync(process.execPath, args, {
      encoding: 'utf8',
      timeout: timeoutMs,
      stdio: ['ignore', 'pipe', 'ignore'],
    });
    const answer = JSON.parse(out.trim().split('\n').pop() ?? '') as { ok?: unknown; reason?: unknown };
    if (answer.ok === true) return { ok: true };
    return { ok: false, reason: typeof answer.reason === 'string' ? answer.reason : 'no adapter' };
  } catch (err) {
    return { ok: false, reason: `the probe failed (${(err as Error).message.split('\n')[0]})` };
  }
}

/**
 * Place a model given setup_config.json's device id for it (undefined → CPU, no fallback): CUDA, else WebGPU,
 * else the CPU with both reasons.
 */
export function placeModel(
  cudaId: string | undefined,
  cuda: CudaAvailability,
  webgpu: WebGpuAvailability = WEBGPU_NOT_PROBED,
): Placement {
  if (cudaId === undefined) return { device: { kind: 'cpu' }, requestedCudaId: undefined, fallbackReason: undefined };
  const id = Number(cudaId);
  const cudaReason =
    cuda.unavailableReason ?? (cuda.gpus.includes(id) ? undefined : `this host has GPU ${cuda.gpus.join(', ')} only`);
  if (cudaReason === undefined) return { device: { kind: 'cuda', id }, requestedCudaId: id, fallbackReason: undefined };
  if (webgpu.available) {
    const software = webgpu.software ? ' (a software adapter, allowed by WEBGPU_ALLOW_SOFTWARE)' : '';
    return {
      device: { kind: 'webgpu', id, ...(webgpu.software ? { software: true } : {}) },
      requestedCudaId: id,
      fallbackReason: `cuda:${id} requested; ${cudaReason}: running on WebGPU${software}`,
    };
  }
  const webgpuReason = webgpu === WEBGPU_NOT_PROBED ? '' : `; ${webgpu.unavailableReason}`;
  return {
    device: { kind: 'cpu' },
    requestedCudaId: id,
    fallbackReason: `cuda:${id} requested; ${cudaReason}${webgpuReason}`,
  };
}

function defaultProviderDir(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
    return path.join(path.dirname(pkg), 'bin', 'napi-v6', process.platform, process.arch);
  } catch {
    return undefined;
  }
}

/**
 * Worker processes for a model on `device` when its registration does not say (GPU_WORKERS). `auto`: 2 on CUDA, where
 * a worker's runs (the search graph, engine/search/runs.ts) leave the GPU idle while its host gathers and answers a
 * batch, and a second process fills those gaps (H200, 418M, 256 closed-loop clients through the stack: served ÷
 * engine 0.60 with one worker, 0.78 with two, 0.44 with four); 1 on WebGPU, not measured side by side yet.
 */
export function gpuWorkers(setting: 'auto' | number, device: DeviceRequest): number {
  if (setting !== 'auto') return setting;
  return device.kind === 'cuda' ? 2 : 1;
}

/** `cpu`, `cuda:0`, `webgpu:0`, `webgpu:0 (software)` (a software adapter, allowed explicitly), as in `x-device`. */
export function deviceLabel(device: DeviceInfo | DeviceRequest): string {
  if (device.kind === 'cpu') return 'cpu';
  return `${device.kind}:${device.id}${'software' in device && device.software === true ? ' (software)' : ''}`;
}
