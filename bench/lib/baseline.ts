/**
 * @module bench/lib/baseline — starts the transformers.js baseline server (bench/baseline/server.ts) in a fresh
 * process on a free port, on a given model folder, and waits until its model is loaded.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../harness/ports.js';
import { startProcess, waitForHttp, type ManagedProcess } from '../../harness/process-registry.js';
import { tsExecArgv } from './probe-runner.js';

const entry = fileURLToPath(
  new URL(`../baseline/server.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

export interface Baseline {
  url: string;
  process: ManagedProcess;
}

export async function startBaseline(options: {
  workDir: string;
  name: string;
  modelDir: string;
  newTokens: number;
  intraOpThreads: number;
  /** transformers.js `dtype`: fp32 (default) or q8 (the folder's *_quantized.onnx). */
  dtype?: 'fp32' | 'q8';
}): Promise<Baseline> {
  const port = await freePort();
  const proc = startProcess({
    name: `${options.name} baseline`,
    file: entry,
    execArgv: tsExecArgv(),
    logFile: path.join(options.workDir, `${options.name}-baseline.log`),
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      BASELINE_MODEL_DIR: options.modelDir,
      BASELINE_PORT: String(port),
      BASELINE_NEW_TOKENS: String(options.newTokens),
      INTRA_OP_THREADS: String(options.intraOpThreads),
      BASELINE_DTYPE: options.dtype ?? 'fp32',
    },
  });
  const url = `http://127.0.0.1:${port}`;
  try {
    await waitForHttp(`${url}/ping`, proc, 5 * 60_000);
  } catch (err) {
    await proc.stop(2_000);
    throw err;
  }
  return { url, process: proc };
}
