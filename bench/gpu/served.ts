/**
 * @module bench/gpu/served — the served arm of the GPU benchmark (bench/gpu/run.sh): the whole stack as `npm start`
 * runs it but for pm2 and nginx, which a GPU machine without network does not have (the built-in front on top, a
 * router cluster, the model server, one worker pinned to GPU 0 by setup_config.json), on the benchmark's model
 * folder; closed-loop clients through the front at each concurrency, the fixed output length, served tokens/s. It
 * runs compiled (dist/bench/gpu/served.js) with the kit's node, beside the production modules only.
 *
 *   served --model DIR --out FILE [--concurrency 1,64,256] [--workers 1,2] [--new-tokens 16] [--window-s 10]
 *          [--threads 2] [--software] [--allow-cpu] [--deadline-s 240] [--dtype fp32|fp16] [--generation auto]
 *
 * Each concurrency is measured with the model scaled to each worker count in turn (`min_worker`; a worker count above
 * the concurrency is skipped): worker processes on one GPU record their GPU programs from the host side by side, while
 * one worker's decoder step is bound by that recording (docs/performance.md), so the second worker measures how much of
 * the GPU one worker leaves idle. Every worker's device (describe's `device`: provider, fallback reason) is in the
 * JSON, and a worker that fell back to the CPU fails the run unless `--allow-cpu`: a served figure must say what served
 * it. `--software` lets the workers take a software adapter (lavapipe; a smoke test on a CPU-only machine).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { startMeasuredStack, type Stack } from '../../harness/stack.js';
import { settingsFor, type BenchContext } from '../lib/context.js';
import { measure } from '../scenarios/load.js';

const TARGET = 'fr';
/** Environment the worker needs from the kit (kit-env.sh: the Vulkan loader and driver) and the engine's allocator. */
const PASSED_ENV = [
  'LD_LIBRARY_PATH',
  'VK_DRIVER_FILES',
  'VK_ICD_FILENAMES',
  'MALLOC_MMAP_THRESHOLD_',
  'MALLOC_TRIM_THRESHOLD_',
];

function options() {
  const { values } = parseArgs({
    options: {
      model: { type: 'string' },
      out: { type: 'string' },
      concurrency: { type: 'string', default: '1,64,256' },
      workers: { type: 'string', default: '1,2' },
      'new-tokens': { type: 'string', default: '16' },
      'window-s': { type: 'string', default: '10' },
      threads: { type: 'string', default: '2' },
      software: { type: 'boolean', default: false },
      'allow-cpu': { type: 'boolean', default: false },
      'deadline-s': { type: 'string', default: '240' },
      dtype: { type: 'string', default: 'fp32' },
      generation: { type: 'string', default: 'auto' },
    },
  });
  if (values.model === undefined || values.out === undefined) {
    throw new Error('usage: served --model DIR --out FILE [--concurrency 1,64,256] [--software] [--allow-cpu]');
  }
  return {
    model: path.resolve(values.model),
    out: path.resolve(values.out),
    concurrency: values.concurrency.split(',').map(Number),
    workers: values.workers.split(',').map(Number),
    newTokens: Number(values['new-tokens']),
    windowMs: 1000 * Number(values['window-s']),
    threads: Number(values.threads),
    software: values.software,
    allowCpu: values['allow-cpu'],
    deadlineMs: 1000 * Number(values['deadline-s']),
    dtype: values.dtype as 'fp32' | 'fp16',
    generation: values.generation,
  };
}

async function main(): Promise<void> {
  const o = options();
  const started = Date.now();
  const workDir = mkdtempSync(path.join(tmpdir(), 'gpu-served-'));
  const batchSize = Math.max(...o.concurrency);
  const result = {
    arm: `served, ${o.dtype}, GENERATION=${o.generation}`,
    model: o.model,
    target: TARGET,
    newTokensPerRow: o.newTokens,
    batchSize,
    devices: [] as { workers: number; device: string; fallback: string | null }[],
    levels: [] as {
      workers: number;
      concurrency: number;
      tokensPerS: number;
      sentencesPerS: number;
      p50Ms: number;
      p90Ms: number;
      rowsPerDecoderRun: number;
    }[],
    errors: [] as string[],
  };
  const write = () => writeFileSync(o.out, `${JSON.stringify(result, null, 1)}\n`);
  const log = (line: string) =>
    process.stdout.write(`[served t=${((Date.now() - started) / 1000).toFixed(1)}s] ${line}\n`);
  let stack: Stack | null = null;
  try {
    stack = await startMeasuredStack({
      name: 'gpu-served',
      workDir,
      modelDir: o.model,
      languages: [TARGET],
      devices: { [TARGET]: '0' },
      handler: 'translation',
      layers: 'front',
      front: 'builtin',
      routerInstances: 4,
      batchSize,
      maxBatchDelayMs: 20,
      batchPolicy: 'immediate',
      engineSharing: 'device',
      intraOpThreads: o.threads,
      maxNewTokens: o.newTokens,
      modelDtype: o.dtype,
      logLevel: 'warn',
      env: {
        ...Object.fromEntries(PASSED_ENV.flatMap((name) => (process.env[name] ? [[name, process.env[name]!]] : []))),
        ...(o.software ? { WEBGPU_ALLOW_SOFTWARE: '1' } : {}),
        GENERATION: o.generation,
      },
    });
    const settings = { ...settingsFor('quick', o.threads), newTokens: o.newTokens };
    const ctx: BenchContext = {
      settings,
      root: process.cwd(),
      workDir,
      signal: AbortSignal.timeout(o.deadlineMs),
      log,
      model: () => Promise.reject(new Error('served: the model folder is given')),
      shared: new Map(),
    };
    for (const workers of o.workers) {
      const scaled = await fetch(
        `${stack.management}/models/${TARGET}?min_worker=${workers}&max_worker=${workers}&synchronous=true`,
        { method: 'PUT' },
      );
      if (!scaled.ok) throw new Error(`scaling to ${workers} workers: ${scaled.status} ${await scaled.text()}`);
      const described = (await (await fetch(`${stack.management}/models/${TARGET}`)).json()) as {
        workers?: { device?: string; deviceFallback?: string }[];
      }[];
      for (const worker of described[0]?.workers ?? []) {
        const device = { workers, device: worker.device ?? 'unknown', fallback: worker.deviceFallback ?? null };
        result.devices.push(device);
        log(`worker device: ${JSON.stringify(device)}`);
        if (!/^(webgpu|cuda):/.test(device.device) && !o.allowCpu) {
          throw new Error(`a worker is not on a GPU (${JSON.stringify(device)}); --allow-cpu measures it anyway`);
        }
      }
      for (const concurrency of o.concurrency.filter((c) => c >= workers)) {
        if (Date.now() - started > o.deadlineMs) {
          result.errors.push(`${workers} workers, c=${concurrency}: skipped, past the deadline`);
          break;
        }
        const m = await measure(ctx, {
          label: 'served',
          origin: stack.frontUrl!,
          entry: 'front',
          targets: [TARGET],
          concurrency,
          metricsUrl: stack.metrics,
          drain: false,
          window: { warmupMs: 2_000, warmupPerClient: 1, minWindowMs: o.windowMs, cyclesPerClient: 1 },
        });
        const at = `${workers} workers, c=${concurrency}`;
        if (m.load.failed > 0)
          result.errors.push(`${at}: ${m.load.failed} failed ${JSON.stringify(m.load.errorsByStatus)}`);
        result.levels.push({
          workers,
          concurrency,
          tokensPerS: m.tokensPerS,
          sentencesPerS: m.sentencesPerS,
          p50Ms: m.load.latency.p50,
          p90Ms: m.load.latency.p90,
          rowsPerDecoderRun: m.rowsPerStep,
        });
        log(`${at}: ${m.tokensPerS.toFixed(1)} tokens/s served, ${m.rowsPerStep.toFixed(1)} rows per decoder run`);
        write();
      }
    }
  } catch (err) {
    result.errors.push(err instanceof Error ? err.message : String(err));
    process.exitCode = 1;
  } finally {
    write();
    await stack?.stop();
    rmSync(workDir, { recursive: true, force: true });
  }
}

await main();
