/**
 * scripts/gpu-watch --once as a real process: a fake `nvidia-smi` script on PATH, a fake management API that
 * is a real HTTP server, and a setup_config.json pinning languages to two present GPUs and one absent one.
 */
import { execFile } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT, TSX } from '../test/e2e/support/processes.js';
import { parseNvidiaSmi } from './gpu-watch.js';

let dir: string;
let management: Server;
let managementPort: number;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'gpu-watch-'));
  writeFileSync(
    path.join(dir, 'setup_config.json'),
    JSON.stringify({ cuda_id: { ko: '0', en: '0', de: '1', pt: '3' } }),
  );
  for (const [name, script] of [
    ['ok', 'echo "0, NVIDIA H100 80GB HBM3, 37, 12034, 81559"\necho "1, NVIDIA H100 80GB HBM3, 0, 1, 81559"'],
    ['broken', 'echo "NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver." >&2\nexit 9'],
  ]) {
    mkdirSync(path.join(dir, name));
    const file = path.join(dir, name, 'nvidia-smi');
    writeFileSync(file, `#!/bin/sh\n${script}\n`);
    chmodSync(file, 0o755);
  }
  management = createServer((req, res) => {
    const lang = /^\/models\/(\w+)$/.exec(req.url ?? '')?.[1];
    const queues: Record<string, number> = { ko: 12, en: 0, de: 3 };
    if (!lang || !(lang in queues)) return void res.writeHead(404).end('{}');
    const device = lang === 'de' ? 'cpu' : 'cuda:0';
    res.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify([
        {
          modelName: lang,
          engine: { device, ...(lang === 'de' ? { deviceFallback: 'CUDA provider missing' } : {}) },
          workers: [{ status: 'READY' }],
          jobQueueStatus: { remainingCapacity: 100, pendingRequests: queues[lang] },
        },
      ]),
    );
  });
  await new Promise<void>((resolve) => management.listen(0, '127.0.0.1', resolve));
  managementPort = (management.address() as AddressInfo).port;
});
afterAll(async () => {
  await new Promise((resolve) => management.close(resolve));
  rmSync(dir, { recursive: true, force: true });
});

function gpuWatch(
  pathDir: string,
  managementAddress: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', TSX, path.join(ROOT, 'scripts/gpu-watch.ts'), '--once'],
      {
        cwd: dir,
        env: {
          PATH: pathDir,
          SETUP_CONFIG: path.join(dir, 'setup_config.json'),
          MANAGEMENT_ADDRESS: managementAddress,
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
    const { code, stdout } = await gpuWatch(path.join(dir, 'ok'), `127.0.0.1:${managementPort}`);
    expect(code).toBe(0);
    const lines = stdout.split('\n');
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

  it('says when nvidia-smi is missing and still shows the languages and queues', async () => {
    const empty = path.join(dir, 'empty');
    mkdirSync(empty, { recursive: true });
    const { code, stdout } = await gpuWatch(empty, `127.0.0.1:${managementPort}`);
    expect(code).toBe(0);
    expect(stdout).toContain('nvidia-smi not found: no NVIDIA driver here, so every language runs on the CPU');
    expect(stdout).toContain('pinned to GPU 0 (GPU not visible):\n    ko   queue    12 · workers 1/1 ready on cuda:0');
  });

  it('reports a failing nvidia-smi and an unreachable model server plainly', async () => {
    const { code, stdout } = await gpuWatch(path.join(dir, 'broken'), '127.0.0.1:1');
    expect(code).toBe(0);
    expect(stdout).toContain(
      'nvidia-smi failed: NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.',
    );
    expect(stdout).toContain('    ko   queue  ?');
    expect(stdout).toContain('model server management API not reachable at http://127.0.0.1:1');
  });
});

describe('parseNvidiaSmi', () => {
  it('reads names with commas and [N/A] fields', () => {
    expect(parseNvidiaSmi('3, Tesla T4, rev A, [N/A], 100, 15360\n')).toEqual([
      { index: 3, name: 'Tesla T4, rev A', utilizationPct: null, memoryUsedMiB: 100, memoryTotalMiB: 15360 },
    ]);
  });
});
