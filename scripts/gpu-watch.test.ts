/**
 * scripts/gpu-watch --once as a real process against the model server's status document: a fake metrics API that
 * is a real HTTP server serving `/status.json` in the model server's own type (GPUs, languages on GPUs and on the
 * CPU, a missing nvidia-smi), a real model server whose GpuMonitor runs a fake nvidia-smi, and a setup_config.json
 * pinning languages to two present GPUs and one absent one.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GpuMonitor } from '../model-server/wlm/gpu-monitor.js';
import type { ModelStatus, ServerStatus } from '../model-server/translation/status.js';
import { call } from '../harness/http.js';
import { startTestServer } from '../harness/model-server.js';
import { ROOT, tsx } from '../harness/processes.js';

const MIB = 2 ** 20;
let dir: string;
let metrics: Server;
let metricsPort: number;
/** What the fake metrics API answers next. */
let document: ServerStatus;

function model(name: string, queueDepth: number, device: string, deviceFallback?: string): ModelStatus {
  return {
    name,
    version: '1.0',
    engine: `${device} · tiny`,
    requestedDevice: 'cuda:0',
    device,
    ...(deviceFallback === undefined ? {} : { deviceFallback }),
    dtype: 'fp32',
    workers: [{ id: '9000', state: 'ready', pid: 4242 }],
    queueDepth,
    requestsPerS: 0,
    errorsPerS: 0,
    p50Ms: null,
    p99Ms: null,
    rowsPerStep: null,
    cacheHitRatio: null,
    cacheHits: 0,
    cacheMisses: 0,
  };
}

function statusDocument(gpus: ServerStatus['gpus'], gpuError?: string): ServerStatus {
  return {
    time: '2026-11-24T12:00:00.000Z',
    windowS: 60,
    sampleS: 2,
    models: [model('ko', 12, 'cuda:0'), model('en', 0, 'cuda:0'), model('de', 3, 'cpu', 'CUDA provider missing')],
    engines: [],
    gpus,
    ...(gpuError === undefined ? {} : { gpuError }),
    cache: { enabled: true, maxBytes: 64 * MIB, bytes: 0, entries: 0 },
    history: { at: [], models: {} },
  };
}

const H100 = { name: 'NVIDIA H100 80GB HBM3', memoryTotalBytes: 81559 * MIB };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'gpu-watch-'));
  writeFileSync(
    path.join(dir, 'setup_config.json'),
    JSON.stringify({ cuda_id: { ko: '0', en: '0', de: '1', pt: '3' } }),
  );
  metrics = createServer((req, res) => {
    if (req.url !== '/status.json') return void res.writeHead(404).end('{}');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(document));
  });
  await new Promise<void>((resolve) => metrics.listen(0, '127.0.0.1', resolve));
  metricsPort = (metrics.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => metrics.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function gpuWatch(
  metricsAddress: string,
  setupConfig = path.join(dir, 'setup_config.json'),
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', tsx(), path.join(ROOT, 'scripts/gpu-watch.ts'), '--once'],
      {
        cwd: dir,
        env: {
          // No nvidia-smi on this PATH: every GPU figure must come from the model server.
          PATH: path.join(dir, 'no-such-bin'),
          SETUP_CONFIG: setupConfig,
          METRICS_ADDRESS: metricsAddress,
        },
        timeout: 30_000,
      },
      (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe('gpu-watch --once', () => {
  it('shows each GPU with its languages, their queues, workers and actual device', async () => {
    document = statusDocument([
      { index: 0, ...H100, utilizationPercent: 37, memoryUsedBytes: 12034 * MIB },
      { index: 1, ...H100, utilizationPercent: 0, memoryUsedBytes: 1 * MIB },
    ]);
    const { code, stdout } = await gpuWatch(`127.0.0.1:${metricsPort}`);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
    expect(lines[0]).toBe(`mt-serve gpu-watch  2026-11-24 12:00:00  (model server http://127.0.0.1:${metricsPort})`);
    const gpu0 = lines.findIndex((l) => l.startsWith('GPU 0'));
    expect(lines[gpu0]).toBe(
      'GPU 0  NVIDIA H100 80GB HBM3    util  37% [####......]  memory  12034 / 81559 MiB [#.........]',
    );
    expect(lines[gpu0 + 1]).toBe('    ko   queue    12 · workers 1/1 ready on cuda:0');
    expect(lines[gpu0 + 2]).toBe('    en   queue     0 · workers 1/1 ready on cuda:0');
    const gpu1 = lines.findIndex((l) => l.startsWith('GPU 1'));
    expect(lines[gpu1 + 1]).toBe('    de   queue     3 · workers 1/1 ready on cpu  (fallback: CUDA provider missing)');
    expect(stdout).toContain('pinned to GPU 3 (no such GPU here):\n    pt   not registered');
  });

  it('says why there is no GPU figure and still shows the languages and queues', async () => {
    document = statusDocument([], 'nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU');
    const { code, stdout } = await gpuWatch(`127.0.0.1:${metricsPort}`);
    expect(code).toBe(0);
    expect(stdout).toContain('nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU');
    expect(stdout).toContain('pinned to GPU 0 (GPU not visible):\n    ko   queue    12 · workers 1/1 ready on cuda:0');
  });

  it('reports an unreachable model server plainly', async () => {
    const { code, stdout } = await gpuWatch('127.0.0.1:1');
    expect(code).toBe(0);
    expect(stdout).toContain('GPU figures come from the model server, which did not answer');
    expect(stdout).toContain('    ko   queue  ?');
    expect(stdout).toContain('model server not reachable at http://127.0.0.1:1');
  });

  it('reads a real model server: its GPU monitor, its languages and their devices', async () => {
    const smi = path.join(dir, 'nvidia-smi');
    writeFileSync(smi, '#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3, 55, 2048, 81559"\n');
    chmodSync(smi, 0o755);
    const setupConfig = path.join(dir, 'setup_config-real.json');
    writeFileSync(setupConfig, JSON.stringify({ cuda_id: { ko: '0', en: '0' } }));
    const server = await startTestServer({
      entries: ['ko', 'en'],
      setupConfig: { cuda_id: { ko: '0', en: '0' } },
      gpu: new GpuMonitor({ command: smi }),
    });
    try {
      for (const m of ['ko', 'en'])
        expect((await call(`${server.management}/models?url=${m}`, { method: 'POST' })).status).toBe(200);
      const { code, stdout } = await gpuWatch(server.metrics.replace('http://', ''), setupConfig);
      expect(code).toBe(0);
      const lines = stdout.split('\n');
      const gpu0 = lines.findIndex((l) => l.startsWith('GPU 0'));
      expect(lines[gpu0]).toBe(
        'GPU 0  NVIDIA H100 80GB HBM3    util  55% [######....]  memory   2048 / 81559 MiB [..........]',
      );
      expect(lines[gpu0 + 1]).toBe(
        '    ko   queue     0 · workers 1/1 ready on cpu  (fallback: cuda:0 requested; no GPU on the test host)',
      );
      expect(lines[gpu0 + 2]).toBe(
        '    en   queue     0 · workers 1/1 ready on cpu  (fallback: cuda:0 requested; no GPU on the test host)',
      );
    } finally {
      await server.close();
    }
  });
});
