/**
 * @module model-server/frontend/gpu-monitor — GPU utilisation and memory from `nvidia-smi`, asked on demand (a
 * metrics scrape, a describe) with a short timeout and cached briefly, so scrapes never pile up processes.
 * On a host without nvidia-smi it answers an empty list, quickly, forever after the first failure.
 */
import { execFile } from 'node:child_process';

export interface GpuStat {
  index: number;
  utilizationPercent: number;
  memoryUsedBytes: number;
  memoryTotalBytes: number;
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
  #last: { at: number; stats: GpuStat[] } | undefined;
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

  /** TorchServe's describe `gpuUsage` text for one device, or "N/A". */
  usageText(index: number): string {
    const stat = this.cached().find((s) => s.index === index);
    if (stat === undefined) return 'N/A';
    return `gpuId::${index} utilization.gpu [%]::${stat.utilizationPercent} % memory.used [MiB]::${Math.round(stat.memoryUsedBytes / MIB)} MiB`;
  }

  #query(): Promise<GpuStat[]> {
    return new Promise((resolve) => {
      execFile(
        this.#command,
        ['--query-gpu=index,utilization.gpu,memory.used,memory.total', '--format=csv,noheader,nounits'],
        { timeout: this.#timeoutMs, encoding: 'utf8' },
        (err, stdout) => {
          if (err) {
            if ((err as NodeJS.ErrnoException).code === 'ENOENT') this.#absent = true;
            this.#last = { at: Date.now(), stats: [] };
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

/** Parse `index, utilization.gpu, memory.used, memory.total` lines (MiB, no units). Bad lines are skipped. */
export function parseGpuCsv(text: string): GpuStat[] {
  const stats: GpuStat[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(',').map((f) => Number(f.trim()));
    if (fields.length !== 4 || fields.some((f) => !Number.isFinite(f))) continue;
    const [index, util, used, total] = fields as [number, number, number, number];
    stats.push({ index, utilizationPercent: util, memoryUsedBytes: used * MIB, memoryTotalBytes: total * MIB });
  }
  return stats;
}
