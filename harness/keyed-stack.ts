/**
 * @module harness/keyed-stack — the stack a compatible API's client suite runs against (test/compat/): the tiny
 * demo model serving every demo language, API keys on with one key of no limits, behind the front a deployment
 * runs (nginx where installed, else the built-in one).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { findNginx } from '../front/nginx.js';
import { DEMO_LANGUAGES } from '../model-server/tools/demo-model/index.js';
import { hashKey } from '../router/keys/key-ring.js';
import { stopAll } from './process-registry.js';
import { startStackWithFronts } from './stack.js';

export interface KeyedStack {
  /** The front's URL, `http://localhost:<port>`. */
  url: string;
  /** A folder of the run's own, removed by `stop`. */
  dir: string;
  stop(): Promise<void>;
}

/** Starts the stack with `secret` as its one API key (id `keyId`). */
export async function startKeyedStack(keyId: string, secret: string): Promise<KeyedStack> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-keyed-stack-'));
  writeFileSync(path.join(dir, 'keys.json'), JSON.stringify({ keys: [{ id: keyId, sha256: hashKey(secret) }] }));
  const front = findNginx(process.env) ? 'nginx' : 'builtin';
  const stack = await startStackWithFronts(
    {
      languages: DEMO_LANGUAGES,
      handler: 'translation',
      demoModel: 'tiny',
      env: { API_KEYS: dir },
      register: { batchSize: 8, maxBatchDelayMs: 5, workers: 1 },
    },
    [front],
  );
  return {
    // localhost, as a user's would be (deepl-node's nock tests intercept `http://localhost:<port>` only).
    url: stack.fronts[front]!.url.replace('127.0.0.1', 'localhost'),
    dir,
    async stop() {
      await stack.stop();
      await stopAll();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
