/**
 * @module model-server/wlm/gpu-monitor — GPU utilisation and memory from `nvidia-smi`, asked on demand (a
 * metrics scrape, a describe) with a short timeout and cached briefly, so scrapes never pile up processes.
 * On a host without nvidia-smi it answers an empty list, quickly, forever after the first failure; `error` says why
 * the last sample is empty.
 */
import { execFile } from 'node:child_process';

/** One GPU; a figure nvidia-smi reports as `[N/A]` is null. */
export interface GpuStat {
  index: number;
  name: string;
  utilizationPercent: number | null;
  memoryUsedBytes: number | null;
  memoryTotalBytes: number | null;
}

export interface GpuMonitorOptions {
  /** Command to run; default `nvidia-smi`. */
  command?: string;
  /** How long a sample is reused, ms (default 2000). */
  cacheMs?: number;
  /** Longest one nvidia-smi call may take, ms (default 1500). */
  timeoutMs?: number;
}

const MIB = 1024 * 1024;

export class GpuMonitor {
  #command: string;
  #cacheMs: number;
  #timeoutMs: number;
  #last: { at: number; stats: GpuStat[]; error?: string } | undefined;
  #inFlight: Promise<GpuStat[]> | undefined;
  /** Set once nvidia-smi is missing: not worth asking again. */
  #absent = false;

  constructor(options: GpuMonitorOptions = {}) {
    this.#command = options.command ?? 'nvidia-smi';
    this.#cacheMs = options.cacheMs ?? 2000;
    this.#timeoutMs = options.timeoutMs ?? 1500;
  }

  /** The latest sample without asking again (empty before the first). */
  cached(): GpuStat[] {
    return this.#last?.stats ?? [];
  }

  /** A sample at most `cacheMs` old; concurrent callers share one nvidia-smi run. */
  sample(): Promise<GpuStat[]> {
    if (this.#absent) return Promise.resolve([]);
    if (this.#last && Date.now() - this.#last.at < this.#cacheMs) return Promise.resolve(this.#last.stats);
    this.#inFlight ??= this.#query().finally(() => (this.#inFlight = undefined));
    return this.#inFlight;
  }

  /** Why the last sample is empty (nvidia-smi missing or failing); undefined when it answered. */
  get error(): string | undefined {
    return this.#last?.error;
  }

  /** TorchServe's describe `gpuUsage` text for one device, or "N/A". */
  usageText(index: number): string {
    const stat = this.cached().find((s) => s.index === index);
    if (stat === undefined || stat.utilizationPercent === null || stat.memoryUsedBytes === null) return 'N/A';
    return `gpuId::${index} utilization.gpu [%]::${stat.utilizationPercent} % memory.used [MiB]::${Math.round(stat.memoryUsedBytes / MIB)} MiB`;
  }

  #query(): Promise<GpuStat[]> {
    return new Promise((resolve) => {
      execFile(
        this.#command,
        ['--query-gpu=index,name,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'],
        { timeout: this.#timeoutMs, encoding: 'utf8' },
        (err, stdout, stderr) => {
          if (err) {
            const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
            if (missing) this.#absent = true;
            const error = missing
              ? 'nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU'
              : `nvidia-smi failed: ${(stderr || err.message).trim().split('\n')[0]}`;
            this.#last = { at: Date.now(), stats: [], error };
            resolve([]);
            return;
          }
          const stats = parseGpuCsv(stdout);
          this.#last = { at: Date.now(), stats };
          resolve(stats);
        },
      );
    });
  }
}

/**
 * Parse `index, name, utilization.gpu, memory.used, memory.total` lines (MiB, no units). A name may hold commas:
 * the index is first, the three figures last. `[N/A]` figures are null; lines without an index are skipped.
 */
export function parseGpuCsv(text: string): GpuStat[] {
  const figure = (field: string | undefined) => {
    const n = Number(field?.trim());
    return field === undefined || field.trim() === '' || !Number.isFinite(n) ? null : n;
  };
  const stats: GpuStat[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(',').map((f) => f.trim());
    const index = figure(fields[0]);
    if (fields.length < 5 || index === null) continue;
    const [util, used, total] = fields.slice(-3).map(figure) as [number | null, number | null, number | null];
    stats.push({
      index,
      name: fields.slice(1, -3).join(', '),
      utilizationPercent: util,
      memoryUsedBytes: used === null ? null : used * MIB,
      memoryTotalBytes: total === null ? null : total * MIB,
    });
  }
  return stats;
}
