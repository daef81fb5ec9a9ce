/**
 * @module test/e2e/support/model-stack — a real model server for end-to-end tests: the tiny generated model,
 * a temp store archived by the real CLI, the real model server on ports 0, languages registered through the
 * real management API.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { isListening, ROOT, startEntry, TSX, type Child } from './processes.js';

export interface ModelStack {
  dir: string;
  /** setup_config.json written for the test: language → device id. */
  setupConfig: string;
  cudaIds: Record<string, string>;
  modelDir: string;
  store: string;
  /** Environment that points any of our processes at this stack's files. */
  env: Record<string, string>;
  server: Child;
  ports: { inference: number; management: number; metrics: number };
  close(): Promise<void>;
}

const tsx = (script: string, args: string[], cwd: string) =>
  execFileSync(process.execPath, ['--import', TSX, path.join(ROOT, script), ...args], {
    cwd,
    encoding: 'utf8',
    stdio: 'pipe',
  });

/** Generate the tiny model and a store for `cudaIds` in a temp dir (no server). */
export function prepareModelFiles(cudaIds: Record<string, string>): Omit<ModelStack, 'server' | 'ports' | 'close'> {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-e2e-'));
  const setupConfig = path.join(dir, 'setup_config.json');
  writeFileSync(setupConfig, JSON.stringify({ cuda_id: cudaIds }));
  const modelDir = path.join(dir, 'models', 'tiny');
  const store = path.join(dir, 'model_store');
  tsx('scripts/make-demo-model.ts', ['tiny', modelDir, '--no-check'], dir);
  tsx(
    'model-server/cli.ts',
    ['archive', '--model-dir', modelDir, '--store', store, '--setup-config', setupConfig],
    dir,
  );
  const env = {
    SETUP_CONFIG: setupConfig,
    MODEL_DIR: modelDir,
    MODEL_STORE: store,
    LOG_DIR: path.join(dir, 'logs'),
    RUN_DIR: path.join(dir, 'run'),
    NUM_BEAMS: '1',
    MAX_NEW_TOKENS: '16',
    LOG_LEVEL: 'warn',
  };
  return { dir, setupConfig, cudaIds, modelDir, store, env };
}

/** Start the model server on ports 0 and register every language of `cudaIds`. */
export async function startModelStack(cudaIds: Record<string, string>): Promise<ModelStack> {
  const files = prepareModelFiles(cudaIds);
  const server = startEntry('model-server/main.ts', files.dir, {
    ...files.env,
    INFERENCE_ADDRESS: '127.0.0.1:0',
    MANAGEMENT_ADDRESS: '127.0.0.1:0',
    METRICS_ADDRESS: '127.0.0.1:0',
  });
  const listening = await server.message(
    (m): m is { type: 'listening'; ports: ModelStack['ports'] } => isListening(m) && 'ports' in (m as object),
  );
  for (const lang of Object.keys(cudaIds)) {
    const res = await fetch(
      `http://127.0.0.1:${listening.ports.management}/models?url=${lang}&batch_size=8&max_batch_delay=20&initial_workers=1&synchronous=true`,
      { method: 'POST' },
    );
    if (res.status !== 200)
      throw new Error(`registering ${lang}: ${res.status} ${await res.text()}\n${server.output()}`);
  }
  return {
    ...files,
    server,
    ports: listening.ports,
    close: async () => {
      await server.stop();
      rmSync(files.dir, { recursive: true, force: true });
    },
  };
}
