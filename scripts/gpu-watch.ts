/**
 * @module scripts/gpu-watch — the seed's `watch -n 1 nvidia-smi`, for this stack: each GPU's utilisation and
 * memory, the languages setup_config.json pins to it, and each language's queue depth, workers and actual
 * device from the model server's management API (so a language pinned to a GPU but running on the CPU shows).
 *
 *     scripts/gpu-watch              # refresh every second until Ctrl-C
 *     scripts/gpu-watch --once       # one snapshot, for scripts
 *     scripts/gpu-watch --interval 5
 *
 * Without nvidia-smi it says so and still shows the languages and their queues. Configuration as the servers
 * read it (.env, then the environment).
 */
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { ConfigError, loadConfig, readEnv, readSetupConfig } from '../common/config.js';
import { localUrl } from './config-env.js';

export interface GpuStats {
  index: number;
  name: string;
  utilizationPct: number | null;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number | null;
}

/** What the management API says about one language. */
export interface LanguageStatus {
  pending: number;
  workers: string[];
  device: string | undefined;
  fallback: string | undefined;
}

export interface Snapshot {
  time: Date;
  /** null with the reason when nvidia-smi is missing or failed. */
  gpus: GpuStats[] | { error: string };
  /** Device id (setup_config.json's value) → languages pinned there, in file order. */
  pinned: Map<string, string[]>;
  /** Language → status, or an error string when the management API is unreachable. */
  languages: Map<string, LanguageStatus> | { error: string };
  managementUrl: string;
}

export const NVIDIA_SMI_ARGS = [
  '--query-gpu=index,name,utilization.gpu,memory.used,memory.total',
  '--format=csv,noheader,nounits',
];

/** Parse `nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`. */
export function parseNvidiaSmi(csv: string): GpuStats[] {
  const num = (s: string | undefined) => {
    const n = Number(s?.trim());
    return s === undefined || s.trim() === '' || !Number.isFinite(n) ? null : n; // "[N/A]" → null
  };
  return csv
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const fields = line.split(',').map((f) => f.trim());
      // A GPU name may itself contain commas: index first, three numbers last, the name in between.
      const [index, ...rest] = fields;
      const [util, used, total] = rest.slice(-3);
      return {
        index: Number(index),
        name: rest.slice(0, -3).join(', '),
        utilizationPct: num(util),
        memoryUsedMiB: num(used),
        memoryTotalMiB: num(total),
      };
    });
}

function queryGpus(): Promise<GpuStats[] | { error: string }> {
  return new Promise((resolve) => {
    execFile('nvidia-smi', NVIDIA_SMI_ARGS, { timeout: 5_000 }, (err, stdout, stderr) => {
      if (err) {
        const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
        resolve({
          error: missing
            ? 'nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU'
            : `nvidia-smi failed: ${(stderr || err.message).trim().split('\n')[0]}`,
        });
      } else resolve(parseNvidiaSmi(stdout));
    });
  });
}

async function queryLanguages(
  managementUrl: string,
  languages: readonly string[],
  authorization: string | undefined,
): Promise<Map<string, LanguageStatus> | { error: string }> {
  const headers: Record<string, string> = authorization ? { authorization } : {};
  const result = new Map<string, LanguageStatus>();
  try {
    await Promise.all(
      languages.map(async (lang) => {
        const res = await fetch(`${managementUrl}/models/${lang}`, { headers, signal: AbortSignal.timeout(2_000) });
        if (res.status === 404) return void (await res.body?.cancel());
        if (!res.ok) throw new Error(`GET /models/${lang} answered ${res.status}`);
        const [model] = (await res.json()) as {
          engine?: { device?: string; deviceFallback?: string };
          workers?: { status: string }[];
          jobQueueStatus?: { pendingRequests: number };
        }[];
        result.set(lang, {
          pending: model?.jobQueueStatus?.pendingRequests ?? 0,
          workers: (model?.workers ?? []).map((w) => w.status),
          device: model?.engine?.device,
          fallback: model?.engine?.deviceFallback,
        });
      }),
    );
  } catch (err) {
    return { error: `model server management API not reachable at ${managementUrl} (${(err as Error).message})` };
  }
  return result;
}

const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const bar = (pct: number | null, width = 20) =>
  pct === null ? ' '.repeat(width + 2) : `[${'#'.repeat(Math.round((pct / 100) * width)).padEnd(width, '.')}]`;

/** The text of one snapshot (what `--once` prints, and each refresh draws). */
export function renderSnapshot(s: Snapshot): string {
  const lines = [
    `mt-serve gpu-watch  ${s.time.toISOString().replace('T', ' ').slice(0, 19)}  (management ${s.managementUrl})`,
    '',
  ];
  const langLine = (lang: string) => {
    if (!(s.languages instanceof Map)) return `    ${pad(lang, 4)} queue  ?`;
    const status = s.languages.get(lang);
    if (!status) return `    ${pad(lang, 4)} not registered`;
    const ready = status.workers.filter((w) => w === 'READY').length;
    const where = status.device ? ` on ${status.device}` : '';
    const fallback = status.fallback ? `  (fallback: ${status.fallback})` : '';
    return `    ${pad(lang, 4)} queue ${String(status.pending).padStart(5)} · workers ${ready}/${status.workers.length} ready${where}${fallback}`;
  };
  const gpus = Array.isArray(s.gpus) ? s.gpus : [];
  if (!Array.isArray(s.gpus)) lines.push(s.gpus.error, '');
  for (const gpu of gpus) {
    const mem =
      gpu.memoryUsedMiB === null || gpu.memoryTotalMiB === null
        ? 'memory n/a'
        : `memory ${String(gpu.memoryUsedMiB).padStart(6)} / ${gpu.memoryTotalMiB} MiB ${bar((gpu.memoryUsedMiB / gpu.memoryTotalMiB) * 100, 10)}`;
    const util =
      gpu.utilizationPct === null
        ? 'util  n/a'
        : `util ${String(gpu.utilizationPct).padStart(3)}% ${bar(gpu.utilizationPct, 10)}`;
    lines.push(`GPU ${gpu.index}  ${pad(gpu.name, 24)} ${util}  ${mem}`);
    const langs = s.pinned.get(String(gpu.index)) ?? [];
    if (langs.length === 0) lines.push('    (no language pinned here)');
    for (const lang of langs) lines.push(langLine(lang));
    lines.push('');
  }
  const seen = new Set(gpus.map((g) => String(g.index)));
  for (const [device, langs] of s.pinned) {
    if (seen.has(device)) continue;
    const why = Array.isArray(s.gpus) ? 'no such GPU here' : 'GPU not visible';
    lines.push(`pinned to GPU ${device} (${why}):`);
    for (const lang of langs) lines.push(langLine(lang));
    lines.push('');
  }
  if (!(s.languages instanceof Map)) lines.push(s.languages.error);
  return lines.join('\n').trimEnd() + '\n';
}

async function main(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        once: { type: 'boolean', default: false },
        interval: { type: 'string', default: '1' },
        help: { type: 'boolean' },
      },
    }));
  } catch (err) {
    process.stderr.write(
      `gpu-watch: ${(err as Error).message}\nusage: scripts/gpu-watch [--once] [--interval SECONDS]\n`,
    );
    return 2;
  }
  if (values.help) {
    process.stdout.write('usage: scripts/gpu-watch [--once] [--interval SECONDS]\n');
    return 0;
  }
  const intervalS = Number(values.interval);
  if (!(intervalS > 0)) {
    process.stderr.write(`gpu-watch: --interval must be a positive number of seconds, got ${values.interval}\n`);
    return 2;
  }
  const root = process.cwd();
  let config;
  let cudaIds: Record<string, string>;
  try {
    config = loadConfig(readEnv(root), root);
    cudaIds = readSetupConfig(config.modelServer.setupConfigPath).cuda_id;
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`gpu-watch: ${err.message}\n`);
    return 2;
  }
  const pinned = new Map<string, string[]>();
  for (const [lang, device] of Object.entries(cudaIds)) pinned.set(device, [...(pinned.get(device) ?? []), lang]);
  const managementUrl = localUrl(config.modelServer.management);
  const ms = config.modelServer;
  const authorization = () => {
    if (!ms.tokenAuth) return undefined;
    try {
      return `Bearer ${(JSON.parse(readFileSync(ms.keyFile, 'utf8')) as { management: { key: string } }).management.key}`;
    } catch {
      return undefined;
    }
  };
  const snapshot = async (): Promise<Snapshot> => {
    const [gpus, languages] = await Promise.all([
      queryGpus(),
      queryLanguages(managementUrl, Object.keys(cudaIds), authorization()),
    ]);
    return { time: new Date(), gpus, pinned, languages, managementUrl };
  };
  if (values.once) {
    process.stdout.write(renderSnapshot(await snapshot()));
    return 0;
  }
  process.on('SIGINT', () => process.exit(0));
  for (;;) {
    const text = renderSnapshot(await snapshot());
    process.stdout.write(`\x1b[H\x1b[2J${text}\n(every ${intervalS} s; Ctrl-C to quit)\n`);
    await new Promise((resolve) => setTimeout(resolve, intervalS * 1000));
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`gpu-watch: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
