/**
 * @module scripts/gpu-watch — the seed's `watch -n 1 nvidia-smi`, for this stack: each GPU's utilisation and
 * memory, the languages setup_config.json pins to it, and each language's queue depth, workers and actual
 * device (so a language pinned to a GPU but running on the CPU shows). Every figure comes from the model server's
 * status document (`GET /status.json` on its metrics port, model-server/translation/status.ts), the same one the
 * status page on :7777 shows: the model server asks nvidia-smi, so the two never disagree.
 *
 *     scripts/gpu-watch              # refresh every second until Ctrl-C
 *     scripts/gpu-watch --once       # one snapshot, for scripts
 *     scripts/gpu-watch --interval 5
 *
 * Without nvidia-smi it says so and still shows the languages and their queues. Configuration as the servers
 * read it (.env, then the environment).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { configOrExit, loadConfig, localUrl, readEnv, readSetupConfig } from '../common/config.js';
import type { ServerStatus } from '../model-server/translation/status.js';

export interface GpuStats {
  index: number;
  name: string;
  utilizationPct: number | null;
  memoryUsedMiB: number | null;
  memoryTotalMiB: number | null;
}

/** What the model server says about one language. */
export interface LanguageStatus {
  pending: number;
  workers: string[];
  device: string | undefined;
  fallback: string | undefined;
}

export interface Snapshot {
  time: Date;
  /** The reason instead, when nvidia-smi is missing or failed (or the model server cannot be asked). */
  gpus: GpuStats[] | { error: string };
  /** Device id (setup_config.json's value) → languages pinned there, in file order. */
  pinned: Map<string, string[]>;
  /** Language → status, or an error string when the model server is unreachable. */
  languages: Map<string, LanguageStatus> | { error: string };
  /** Where the figures come from: the model server's metrics API. */
  statusUrl: string;
}

const MIB = 2 ** 20;
const USAGE = 'usage: scripts/gpu-watch [--once] [--interval SECONDS]\n';

/** A snapshot from the model server's status document (what the status page shows too). */
export function snapshotOf(status: ServerStatus, pinned: Map<string, string[]>, statusUrl: string): Snapshot {
  const mib = (bytes: number | null) => (bytes === null ? null : Math.round(bytes / MIB));
  const gpus =
    status.gpuError !== undefined && status.gpus.length === 0
      ? { error: status.gpuError }
      : status.gpus.map((g) => ({
          index: g.index,
          name: g.name,
          utilizationPct: g.utilizationPercent,
          memoryUsedMiB: mib(g.memoryUsedBytes),
          memoryTotalMiB: mib(g.memoryTotalBytes),
        }));
  const languages = new Map<string, LanguageStatus>();
  for (const m of status.models) {
    languages.set(m.name, {
      pending: m.queueDepth,
      workers: m.workers.map((w) => w.state.toUpperCase()),
      device: m.device,
      fallback: m.deviceFallback,
    });
  }
  return { time: new Date(status.time), gpus, pinned, languages, statusUrl };
}

async function queryStatus(statusUrl: string): Promise<ServerStatus | { error: string }> {
  try {
    const res = await fetch(`${statusUrl}/status.json`, { signal: AbortSignal.timeout(3_000) });
    if (!res.ok) throw new Error(`GET /status.json answered ${res.status}`);
    return (await res.json()) as ServerStatus;
  } catch (err) {
    return { error: `model server not reachable at ${statusUrl} (${(err as Error).message})` };
  }
}

const bar = (pct: number | null, width = 20) =>
  pct === null ? ' '.repeat(width + 2) : `[${'#'.repeat(Math.round((pct / 100) * width)).padEnd(width, '.')}]`;

/** The text of one snapshot (what `--once` prints, and each refresh draws). */
export function renderSnapshot(s: Snapshot): string {
  const lines = [
    `mt-serve gpu-watch  ${s.time.toISOString().replace('T', ' ').slice(0, 19)}  (model server ${s.statusUrl})`,
    '',
  ];
  const langLine = (lang: string) => {
    if (!(s.languages instanceof Map)) return `    ${lang.padEnd(4)} queue  ?`;
    const status = s.languages.get(lang);
    if (!status) return `    ${lang.padEnd(4)} not registered`;
    const ready = status.workers.filter((w) => w === 'READY').length;
    const where = status.device ? ` on ${status.device}` : '';
    const fallback = status.fallback ? `  (fallback: ${status.fallback})` : '';
    return `    ${lang.padEnd(4)} queue ${String(status.pending).padStart(5)} · workers ${ready}/${status.workers.length} ready${where}${fallback}`;
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
    lines.push(`GPU ${gpu.index}  ${gpu.name.padEnd(24)} ${util}  ${mem}`);
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
    process.stderr.write(`gpu-watch: ${(err as Error).message}\n${USAGE}`);
    return 2;
  }
  if (values.help) {
    process.stdout.write(USAGE);
    return 0;
  }
  const intervalS = Number(values.interval);
  if (!(intervalS > 0)) {
    process.stderr.write(`gpu-watch: --interval must be a positive number of seconds, got ${values.interval}\n`);
    return 2;
  }
  const root = process.cwd();
  const [config, cudaIds] = configOrExit('gpu-watch', () => {
    const config = loadConfig(readEnv(root), root);
    return [config, readSetupConfig(config.modelServer.setupConfigPath).cuda_id] as const;
  });
  const pinned = new Map<string, string[]>();
  for (const [lang, device] of Object.entries(cudaIds)) pinned.set(device, [...(pinned.get(device) ?? []), lang]);
  const statusUrl = localUrl(config.modelServer.metrics);
  const snapshot = async (): Promise<Snapshot> => {
    const status = await queryStatus(statusUrl);
    if ('error' in status) {
      const gpus = { error: 'GPU figures come from the model server, which did not answer' };
      return { time: new Date(), gpus, pinned, languages: status, statusUrl };
    }
    return snapshotOf(status, pinned, statusUrl);
  };
  if (values.once) {
    process.stdout.write(renderSnapshot(await snapshot()));
    return 0;
  }
  process.on('SIGINT', () => process.exit(0));
  for (;;) {
    const text = renderSnapshot(await snapshot());
    process.stdout.write(`\x1b[H\x1b[2J${text}\n(every ${intervalS} s; Ctrl-C to quit)\n`);
    await sleep(intervalS * 1000);
  }
}

main(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    process.stderr.write(`gpu-watch: ${err instanceof Error ? err.stack : String(err)}\n`);
    process.exitCode = 1;
  },
);
