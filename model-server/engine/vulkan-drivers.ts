/**
 * @module engine/vulkan-drivers — which Vulkan drivers onnxruntime's WebGPU execution provider (Dawn on Vulkan)
 * may see, decided before the first WebGPU session is created.
 *
 * The Vulkan loader reads its driver list (ICD manifests) from `VK_DRIVER_FILES` / `VK_ICD_FILENAMES` when set,
 * else from the standard `icd.d` folders. Mesa installs a software driver there (lavapipe, `libvulkan_lvp.so`);
 * SwiftShader is another. A software adapter runs every kernel on the CPU, far slower than the CPU provider, so
 * the loader is given the GPUs' drivers only, and a CPU-only host with Mesa installed finds no adapter and stays on
 * the CPU provider. Software drivers are used only when asked for: the frontend when `WEBGPU_ALLOW_SOFTWARE=1`
 * and no GPU adapter was found (devices.ts), an engine whose device request says `software` (tests).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The environment variable that allows software Vulkan adapters (`1`). */
export const ALLOW_SOFTWARE_ENV = 'WEBGPU_ALLOW_SOFTWARE';

/** Folders the Vulkan loader searches on Linux when no driver list is given (in its order). */
export const ICD_FOLDERS: readonly string[] = [
  '/etc/vulkan/icd.d',
  '/usr/local/etc/vulkan/icd.d',
  '/usr/local/share/vulkan/icd.d',
  '/usr/share/vulkan/icd.d',
];

/** Library names of CPU-only (software) Vulkan drivers: Mesa lavapipe, SwiftShader. */
const SOFTWARE_LIBRARY = /(^|\/)lib(vulkan_lvp|vk_swiftshader)\.so/;

export interface VulkanDriver {
  /** The ICD manifest (json). */
  manifest: string;
  /** Its `ICD.library_path` (empty when unreadable). */
  library: string;
  software: boolean;
}

export interface DriverEnv {
  [name: string]: string | undefined;
}

/** The driver manifests the loader would read under `env`, each classified. */
export function listVulkanDrivers(
  env: DriverEnv = process.env,
  folders: readonly string[] = ICD_FOLDERS,
): VulkanDriver[] {
  const given = env.VK_DRIVER_FILES || env.VK_ICD_FILENAMES;
  const manifests =
    given !== undefined && given !== ''
      ? given.split(':').filter((file) => file !== '')
      : folders.flatMap((folder) =>
          existsSync(folder)
            ? readdirSync(folder)
                .filter((name) => name.endsWith('.json'))
                .sort()
                .map((name) => path.join(folder, name))
            : [],
        );
  return manifests.map((manifest) => {
    let library = '';
    try {
      const icd = (JSON.parse(readFileSync(manifest, 'utf8')) as { ICD?: { library_path?: unknown } }).ICD;
      if (typeof icd?.library_path === 'string') library = icd.library_path;
    } catch {
      // Unreadable: the loader skips it too; kept so the reason can name it.
    }
    return { manifest, library, software: SOFTWARE_LIBRARY.test(library) };
  });
}

/** The driver list WebGPU may use, or why there is none. */
export type WebGpuDrivers = { ok: true; manifests: string[] } | { ok: false; reason: string };

/**
 * The drivers of one class: the GPUs' (`software` false), or only the software ones (true). Never both: Dawn
 * would pick among them by its own preference and nobody could say which kind of adapter ran the model.
 */
export function webgpuDrivers(
  software: boolean,
  env: DriverEnv = process.env,
  folders: readonly string[] = ICD_FOLDERS,
): WebGpuDrivers {
  const drivers = listVulkanDrivers(env, folders).filter((d) => d.library !== '');
  const usable = drivers.filter((d) => d.software === software);
  if (usable.length > 0) return { ok: true, manifests: usable.map((d) => d.manifest) };
  if (software) return { ok: false, reason: 'no software Vulkan driver (lavapipe, SwiftShader) is installed' };
  const others = drivers.filter((d) => d.software).map((d) => path.basename(d.library));
  return {
    ok: false,
    reason:
      others.length > 0
        ? `only software Vulkan drivers are installed (${others.join(', ')}); ${ALLOW_SOFTWARE_ENV}=1 allows them`
        : 'no Vulkan driver is installed',
  };
}

/**
 * Give the process's Vulkan loader `manifests` only. It must run before the first WebGPU session: Dawn creates
 * its Vulkan instance once per process.
 */
export function restrictVulkanDrivers(manifests: readonly string[], env: DriverEnv = process.env): void {
  const list = manifests.join(':');
  env.VK_DRIVER_FILES = list;
  // Loaders before 1.3.207 read only the older name.
  env.VK_ICD_FILENAMES = list;
}
