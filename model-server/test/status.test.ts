/**
 * `GET /status.json` on the metrics port of a real model server (real workers, the generated tiny model, a fake
 * nvidia-smi): what each language and engine reports, that traffic moves it, that it names no port or path, and
 * that reading it changes nothing.
 */
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { GpuMonitor } from '../wlm/gpu-monitor.js';
import type { ServerStatus } from '../translation/status.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';

let dir: string;
let modelRoot: string;
let t: TestServer;

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-status-'));
  modelRoot = path.join(dir, 'tiny-model');
  makeDemoModel('tiny', modelRoot);
  const smi = path.join(dir, 'nvidia-smi');
  writeFileSync(smi, '#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3, 37, 12034, 81559"\n');
  chmodSync(smi, 0o755);
  t = await startTestServer({
    entries: ['ko', 'de', 'en-de'],
    handler: 'translation',
    modelDir: modelRoot,
    setupConfig: { cuda_id: { ko: '0', de: '0' }, pairs: { 'en-de': { model_dir: modelRoot, cuda_id: '0' } } },
    config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1 },
    gpu: new GpuMonitor({ command: smi }),
  });
  for (const m of ['ko', 'de', 'en-de']) {
    const res = await call(`${t.management}/models?url=${m}&batch_size=8&max_batch_delay=5`, { method: 'POST' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  }
});
afterAll(async () => {
  await t?.close();
  rmSync(dir, { recursive: true, force: true });
});

const status = async () => {
  const res = await fetch(`${t.metrics}/status.json`);
  expect(res.status).toBe(200);
  expect(res.headers.get('cache-control')).toBe('no-store');
  const text = await res.text();
  return { text, doc: JSON.parse(text) as ServerStatus };
};

describe('GET /status.json', () => {
  it('names every language with its device, worker, dtype and an idle queue; each engine and GPU', async () => {
    const { doc } = await status();
    expect(doc.models.map((m) => m.name).sort()).toEqual(['de', 'en-de', 'ko']);
    const ko = doc.models.find((m) => m.name === 'ko')!;
    expect(ko).toMatchObject({
      version: '1.0',
      engine: 'cpu · tiny-model',
      requestedDevice: 'cuda:0',
      device: 'cpu',
      deviceFallback: 'cuda:0 requested; no GPU on the test host',
      // makeDemoModel writes the q8-rows files too, the CPU's first choice (engine/session.ts AUTO_DTYPES).
      dtype: 'q8-rows',
      queueDepth: 0,
      requestsPerS: 0,
      p50Ms: null,
      p99Ms: null,
      cacheHitRatio: null,
    });
    expect(ko.workers).toEqual([{ id: expect.any(String), state: 'ready', pid: expect.any(Number) }]);
    expect(doc.engines).toEqual([
      expect.objectContaining({
        id: 'cpu · tiny-model',
        device: 'cpu',
        dtype: 'q8-rows',
        models: ['ko', 'de', 'en-de'],
        workers: ko.workers,
        gpuIndex: null,
      }),
    ]);
    expect(doc.gpus).toEqual([
      {
        index: 0,
        name: 'NVIDIA H100 80GB HBM3',
        utilizationPercent: 37,
        memoryUsedBytes: 12034 * 2 ** 20,
        memoryTotalBytes: 81559 * 2 ** 20,
      },
    ]);
    expect(doc.gpuError).toBeUndefined();
    expect(doc).toMatchObject({ windowS: 60, sampleS: 2, cache: { enabled: true, maxBytes: 64 * 2 ** 20 } });
    // The same dtype in TorchServe's describe.
    const describe = await call(`${t.management}/models/ko`);
    expect(describe.body[0].engine.dtype).toBe('q8-rows');
  });

  it('shows each model once with its family, the pairs it serves, its device and its memory', async () => {
    const { doc } = await status();
    // The three entries share one folder on one device: one engine, one copy of the weights.
    expect(doc.engines).toHaveLength(1);
    const [engine] = doc.engines;
    const onDisk = ['encoder_model_quantized_rows.onnx', 'decoder_model_merged_quantized_rows.onnx']
      .map((f) => statSync(path.join(modelRoot, 'onnx', f)).size)
      .reduce((a, b) => a + b, 0);
    expect(engine).toMatchObject({
      family: 'M2M100',
      pairs: ['any → ko', 'any → de', 'en → de'],
      device: 'cpu',
      weightsBytes: onDisk,
    });
    // One worker's resident set holds at least its weights (and onnxruntime besides).
    expect(engine!.residentBytes).toBeGreaterThan(onDisk);
    const described = (await call(`${t.management}/models/en-de`)).body[0].engine;
    expect(described).toMatchObject({
      family: 'M2M100',
      pairs: engine!.pairs,
      device: 'cpu',
      weightsBytes: onDisk,
      residentBytes: expect.any(Number),
    });
  });

  it('moves with traffic: requests/s, latencies, rows per decoder step, cache hits', async () => {
    const texts = ['Good morning.', 'The shop opens at eight.', 'Where is the station?'];
    for (const text of [...texts, texts[0]]) {
      const res = await call(`${t.inference}/predictions/ko`, { body: { src_lang: 'en', src_text: text } });
      expect(res.status).toBe(200);
    }
    const ko = (await status()).doc.models.find((m) => m.name === 'ko')!;
    expect(ko.requestsPerS).toBeGreaterThan(0);
    expect(ko.p50Ms).toBeGreaterThan(0);
    expect(ko.p99Ms).toBeGreaterThanOrEqual(ko.p50Ms!);
    expect(ko.rowsPerStep).toBeGreaterThanOrEqual(1);
    expect(ko).toMatchObject({ cacheHits: 1, cacheMisses: 3, cacheHitRatio: 0.25 });
    const { doc } = await status();
    expect(doc.cache.entries).toBe(3);
    expect(doc.cache.bytes).toBeGreaterThan(0);
  });

  it('names no port or folder path, and reading it changes nothing', async () => {
    const before = (await call(`${t.metrics}/metrics?name[]=mt_requests_total`)).body as string;
    const { text } = await status();
    for (const url of [t.inference, t.management, t.metrics]) expect(text).not.toContain(`:${new URL(url).port}`);
    expect(text).not.toMatch(/127\.0\.0\.1|localhost|https?:/);
    expect(text).not.toContain(dir);
    await status();
    expect((await call(`${t.metrics}/metrics?name[]=mt_requests_total`)).body).toBe(before);
    const post = await call(`${t.metrics}/status.json`, { method: 'POST', body: {} });
    expect(post.status).toBe(405);
  });
});
