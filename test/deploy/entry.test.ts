/**
 * The model server container's entry (deploy/docker/model-server-entry.ts) as a real process, the way the pod runs
 * it but from source: it archives the store, starts the model server with real workers on the generated tiny
 * model, registers every language of SETUP_CONFIG, writes the file the startupProbe waits for, answers
 * translations, and on SIGTERM lets the model server drain and exits 0 with the ready file gone.
 */
import { fork, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../common/config.js';
import { READY_FILE, registrationUrl } from '../../deploy/docker/model-server-entry.js';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { call } from '../../harness/http.js';
import { until } from '../../harness/polling.js';

const entry = fileURLToPath(new URL('../../deploy/docker/model-server-entry.ts', import.meta.url));
const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

describe('model server container entry', () => {
  let dir: string;
  let child: ChildProcess;
  let ports: { inference: number; management: number; metrics: number };
  const logs: string[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-entry-'));
    makeDemoModel('tiny', path.join(dir, 'models', 'tiny'));
    writeFileSync(path.join(dir, 'setup_config.json'), JSON.stringify({ cuda_id: { ko: '0', en: '0' } }));
    child = fork(entry, [], {
      cwd: dir,
      execArgv: ['--import', tsx],
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      env: {
        ...process.env,
        // The pod's layout, relative to its working directory: the models volume, an emptyDir store and run dir.
        MODEL_DIR: './models/tiny',
        MODEL_STORE: './model_store',
        RUN_DIR: './run',
        SETUP_CONFIG: './setup_config.json',
        INFERENCE_ADDRESS: 'http://127.0.0.1:0',
        MANAGEMENT_ADDRESS: 'http://127.0.0.1:0',
        METRICS_ADDRESS: 'http://127.0.0.1:0',
        NUM_BEAMS: '1',
        MAX_NEW_TOKENS: '8',
        INTRA_OP_THREADS: '1',
        BATCH_SIZE: '8',
        MAX_BATCH_DELAY_MS: '5',
        LOG_LEVEL: 'info',
      },
    });
    child.stdout!.on('data', (d: Buffer) => logs.push(d.toString()));
    child.stderr!.on('data', (d: Buffer) => logs.push(d.toString()));
    ports = await new Promise((resolve, reject) => {
      child.on('message', (m: { type?: string; ports?: typeof ports }) => {
        if (m?.type === 'listening') resolve(m.ports!);
      });
      child.once('exit', (code) => reject(new Error(`entry exited ${code}:\n${logs.join('')}`)));
    });
  });

  afterAll(async () => {
    if (child && child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await new Promise((resolve) => child.once('exit', resolve));
    }
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('registers every language with the configured batch settings, then writes the ready file', async () => {
    const readyFile = path.join(dir, 'run', READY_FILE);
    await until('the ready file', () => existsSync(readyFile), 60_000);
    expect(readFileSync(readyFile, 'utf8')).toMatch(/ ko en\n$/);
    const models = await call(`http://127.0.0.1:${ports.management}/models`);
    expect(models.body.models.map((m: { modelName: string }) => m.modelName).sort()).toEqual(['en', 'ko']);
    const ko = (await call(`http://127.0.0.1:${ports.management}/models/ko`)).body[0];
    expect(ko).toMatchObject({ batchSize: 8, maxBatchDelay: 5, minWorkers: 1 });
    expect(ko.workers[0].status).toBe('READY');
    expect((await call(`http://127.0.0.1:${ports.inference}/ping`)).status).toBe(200);
    const res = await call(`http://127.0.0.1:${ports.inference}/predictions/en`, {
      body: { src_lang: 'ko', src_text: '안녕하세요' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(typeof res.body.translated).toBe('string');
  });

  it('passes SIGTERM to the model server, which drains; exits 0 and removes the ready file', async () => {
    const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(existsSync(path.join(dir, 'run', READY_FILE))).toBe(false);
    expect(logs.join('')).toContain('passing the signal to the model server');
  });

  it('exits 1 naming MODEL_DIR when the models volume lacks the model, and never becomes ready', async () => {
    const run = mkdtempSync(path.join(tmpdir(), 'mt-serve-entry-empty-'));
    try {
      writeFileSync(path.join(run, 'setup_config.json'), JSON.stringify({ cuda_id: { ko: '0' } }));
      const out: string[] = [];
      const empty = fork(entry, [], {
        cwd: run,
        execArgv: ['--import', tsx],
        stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
        env: { ...process.env, MODEL_DIR: './models/missing', SETUP_CONFIG: './setup_config.json', RUN_DIR: './run' },
      });
      empty.stdout!.on('data', (d: Buffer) => out.push(d.toString()));
      empty.stderr!.on('data', (d: Buffer) => out.push(d.toString()));
      const code = await new Promise((resolve) => empty.once('exit', resolve));
      expect(code).toBe(1);
      const line = JSON.parse(out.join('').trim().split('\n').at(-1)!);
      expect(line).toMatchObject({
        msg: 'cannot archive the model store',
        MODEL_DIR: path.join(run, 'models/missing'),
        err: `--model-dir ${path.join(run, 'models/missing')} is not a folder`,
      });
      expect(existsSync(path.join(run, 'run', READY_FILE))).toBe(false);
    } finally {
      rmSync(run, { recursive: true, force: true });
    }
  });

  it("builds start.sh's registration request from the config", () => {
    const config = loadConfig({ BATCH_SIZE: '32', MAX_BATCH_DELAY_MS: '50', DEFAULT_WORKERS_PER_MODEL: '2' });
    expect(registrationUrl('http://127.0.0.1:8081', 'ko', config)).toBe(
      'http://127.0.0.1:8081/models?url=ko&batch_size=32&max_batch_delay=50&initial_workers=2&synchronous=true',
    );
  });
});
