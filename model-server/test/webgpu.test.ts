/**
 * A model server whose language is pinned to GPU 0 on a host without CUDA: the real WebGPU probe (a child process)
 * finds lavapipe, allowed here as WEBGPU_ALLOW_SOFTWARE=1 would, and the worker runs the generated tiny model on
 * it, saying which device and why in the headers, describe output and /status.json. Skipped (saying why) where
 * lavapipe is missing, except on CI.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { detectWebGpu } from '../wlm/devices.js';
import type { ServerStatus } from '../translation/status.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';

const webgpu = detectWebGpu({ allowSoftware: true });
if (!webgpu.available && process.env.CI !== 'true') {
  console.warn(`model-server/test/webgpu.test.ts skipped: ${webgpu.unavailableReason}; .ci/run installs lavapipe`);
}

describe('a GPU-pinned language on WebGPU (lavapipe) behind the model server', () => {
  it.runIf(!webgpu.available && process.env.CI === 'true')('WebGPU is available on CI', () => {
    expect.fail(`CI must run the WebGPU tests: ${webgpu.unavailableReason}`);
  });

  describe.skipIf(!webgpu.available)('on lavapipe', () => {
    let t: TestServer;
    let modelRoot: string;
    afterAll(async () => {
      await t?.close();
      if (modelRoot) rmSync(modelRoot, { recursive: true, force: true });
    });

    it('translates on webgpu:0 (software) and says so: header, describe, /status.json', async () => {
      expect(webgpu).toEqual({ available: true, software: true, unavailableReason: undefined });
      modelRoot = mkdtempSync(path.join(tmpdir(), 'mt-serve-webgpu-'));
      makeDemoModel('tiny', modelRoot);
      t = await startTestServer({
        entries: ['ko'],
        handler: 'translation',
        modelDir: modelRoot,
        setupConfig: { cuda_id: { ko: '0' } },
        webgpu,
        config: { numBeams: 1, maxNewTokens: 8, intraOpThreads: 1 },
      });
      const registered = await call(`${t.management}/models?url=ko&batch_size=4&max_batch_delay=5`, {
        method: 'POST',
      });
      expect(registered.status, JSON.stringify(registered.body)).toBe(200);

      const one = await call(`${t.inference}/predictions/ko`, { body: { src_lang: 'en', src_text: 'Hello world' } });
      expect(one.status, JSON.stringify(one.body)).toBe(200);
      expect(typeof one.body.translated).toBe('string');
      expect(one.headers.get('x-device')).toBe('webgpu:0 (software)');
      const why = 'cuda:0 requested; no GPU on the test host: running on WebGPU';
      expect(one.headers.get('x-device-fallback')).toBe(
        `${why} (a software adapter, allowed by WEBGPU_ALLOW_SOFTWARE)`,
      );

      const [described] = (await call(`${t.management}/models/ko`)).body;
      expect(described.workers[0]).toMatchObject({ device: 'webgpu:0 (software)', gpu: true });
      expect(described.workers[0].deviceFallback).toContain(why);
      // WebGPU's dtype choice: fp32 (the generated folder also holds int8 files, the CPU's first choice).
      const doc = (await (await fetch(`${t.metrics}/status.json`)).json()) as ServerStatus;
      expect(doc.models.find((m) => m.name === 'ko')).toMatchObject({
        requestedDevice: 'cuda:0',
        device: 'webgpu:0 (software)',
        dtype: 'fp32',
      });
    });
  });
});
