/**
 * @module model-server/frontend/devices — where each model runs: setup_config.json's `cuda_id` mapped onto the
 * devices this host really has, decided once at start.
 *
 * CUDA is usable when onnxruntime-node's CUDA execution provider library is installed (npm ci skips its download
 * unless asked) AND `nvidia-smi --list-gpus` lists the GPU. When it is not, the model is placed on the CPU with
 * a reason that is logged and shown in describe output and the `x-device-fallback` header — never silently.
 * Every CPU-fallback language shares one CPU engine: 14 languages pinned to 3 absent GPUs must not cost 3
 * copies of the weights on a CPU host.
 */
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import type { DeviceRequest } from '../protocol.js';

/** What the host offers, decided once. */
export interface CudaAvailability {
  /** GPU indices `nvidia-smi --list-gpus` reported (empty when CUDA is unusable). */
  gpus: number[];
  /** Why CUDA is unusable; undefined when it is usable. */
  unavailableReason: string | undefined;
}

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

/** Place a model given setup_config.json's device id for it (undefined → CPU, no fallback). */
export function placeModel(cudaId: string | undefined, cuda: CudaAvailability): Placement {
  if (cudaId === undefined) return { device: { kind: 'cpu' }, requestedCudaId: undefined, fallbackReason: undefined };
  const id = Number(cudaId);
  if (cuda.unavailableReason !== undefined) {
    return {
      device: { kind: 'cpu' },
      requestedCudaId: id,
      fallbackReason: `cuda:${id} requested; ${cuda.unavailableReason}`,
    };
  }
  if (!cuda.gpus.includes(id)) {
    return {
      device: { kind: 'cpu' },
      requestedCudaId: id,
      fallbackReason: `cuda:${id} requested; this host has GPU ${cuda.gpus.join(', ')} only`,
    };
  }
  return { device: { kind: 'cuda', id }, requestedCudaId: id, fallbackReason: undefined };
}

function defaultProviderDir(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('onnxruntime-node/package.json');
    return path.join(path.dirname(pkg), 'bin', 'napi-v6', process.platform, process.arch);
  } catch {
    return undefined;
  }
}
