/**
 * The README's "Several hosts" commands in the order a new user may meet them (issue 28): the router host first,
 * its model server after. `scripts/start.sh new --role router` with no model server up yet exits 0, saying which
 * model server it waits for and why (connection refused); `--role model-server` then starts one, and the router
 * serves its languages as they appear, naming the model server that answered (`x-model-server`, and in the
 * router's log line). A plain `scripts/start.sh --role model-server` (no `new`) reloads the model server, which
 * registers its models again from its snapshot: the script's registrations answer "already registered".
 *
 * Both roles run on this machine with separate pm2 daemons (temp PM2_HOMEs, killed at the end), folders and ports.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/ports.js';
import { until } from '../../harness/polling.js';
import { ROOT } from '../../harness/processes.js';

const PM2 = path.join(ROOT, 'node_modules/.bin/pm2');

describe('several hosts, started in any order (scripts/start.sh --role)', () => {
  let dir: string;
  let routerEnv: NodeJS.ProcessEnv;
  let modelServerEnv: NodeJS.ProcessEnv;
  let frontUrl: string;
  let inferenceHost: string;

  const run = (env: NodeJS.ProcessEnv, file: string, args: string[], timeoutMs = 240_000) =>
    new Promise<{ code: number; out: string }>((resolve) =>
      execFile(file, args, { cwd: ROOT, env, timeout: timeoutMs, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
        resolve({ code: err ? Number((err as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      ),
    );
  const translate = (tgt: string) =>
    fetch(frontUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ src_lang: 'en', src_text: 'Hello', tgt_lang: tgt }),
      signal: AbortSignal.timeout(10_000),
    });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-roles-'));
    const setupConfig = path.join(dir, 'setup_config.json');
    writeFileSync(setupConfig, JSON.stringify({ cuda_id: { ko: '0', de: '0' } }));
    // The model server starts later and must refuse connections until then: claimed ports (harness/ports.ts).
    const [inference, management, metrics, router, front] = await Promise.all([1, 2, 3, 4, 5].map(() => freePort()));
    frontUrl = `http://127.0.0.1:${front}`;
    inferenceHost = `127.0.0.1:${inference}`;
    const common = {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      SETUP_CONFIG: setupConfig,
      LOG_LEVEL: 'info',
      NUM_BEAMS: '1',
      MAX_NEW_TOKENS: '8',
    };
    routerEnv = {
      ...common,
      PM2_HOME: path.join(dir, 'router', 'pm2'),
      LOG_DIR: path.join(dir, 'router', 'logs'),
      RUN_DIR: path.join(dir, 'router', 'run'),
      MODEL_STORE: path.join(dir, 'router', 'model_store'),
      MODEL_SERVERS: `http://${inferenceHost}`,
      ROUTER_ADDRESS: `127.0.0.1:${router}`,
      FRONT_ADDRESS: `127.0.0.1:${front}`,
      FRONT: 'builtin',
      ROUTER_INSTANCES: '1',
    };
    modelServerEnv = {
      ...common,
      PM2_HOME: path.join(dir, 'ms', 'pm2'),
      LOG_DIR: path.join(dir, 'ms', 'logs'),
      RUN_DIR: path.join(dir, 'ms', 'run'),
      MODEL_STORE: path.join(dir, 'ms', 'model_store'),
      MODEL_DIR: path.join(dir, 'ms', 'models', 'tiny'),
      INFERENCE_ADDRESS: inferenceHost,
      MANAGEMENT_ADDRESS: `127.0.0.1:${management}`,
      METRICS_ADDRESS: `127.0.0.1:${metrics}`,
      BATCH_SIZE: '4',
    };
  });

  afterAll(async () => {
    for (const env of [routerEnv, modelServerEnv]) if (env) await run(env, PM2, ['kill'], 30_000);
    if (dir) rmSync(dir, { recursive: true, force: true });
  }, 90_000);

  it('the router host first: it starts, names the model server it waits for and why, and exits 0', async () => {
    const started = await run(routerEnv, 'bash', ['scripts/start.sh', 'new', '--role', 'router']);
    expect(started.code, started.out).toBe(0);
    expect(started.out).toContain('router host is up');
    expect(started.out).toContain(`http://${inferenceHost}  not answering (connection refused`);
    expect(started.out).not.toContain('the front did not answer');
    // Meanwhile a translation is refused at once as unavailable, never "not found", never a hang.
    const res = await translate('ko');
    expect([502, 503]).toContain(res.status);
  }, 240_000);

  it('then its model server: the router serves its languages as they appear and names the host that answered', async () => {
    const started = await run(modelServerEnv, 'bash', ['scripts/start.sh', 'new', '--role', 'model-server']);
    expect(started.code, started.out).toBe(0);
    expect(started.out).toMatch(/ {2}ko {3}registered\n {2}de {3}registered/);
    const res = await until(
      'ko through the router host',
      async () => {
        const r = await translate('ko');
        expect([200, 502, 503]).toContain(r.status);
        return r.status === 200 ? r : undefined;
      },
      30_000,
      200,
    );
    expect(res.headers.get('x-model-server')).toBe(inferenceHost);
    await until('the request line in the router log', () =>
      readFileSync(path.join(routerEnv.LOG_DIR!, 'router-out.log'), 'utf8').includes(
        `"modelServer":"${inferenceHost}"`,
      ),
    );
  }, 240_000);

  it('a plain start.sh (no `new`) on the model-server host: it comes back with its models from its snapshot', async () => {
    const again = await run(modelServerEnv, 'bash', ['scripts/start.sh', '--role', 'model-server']);
    expect(again.code, again.out).toBe(0);
    expect(again.out).toMatch(/ {2}ko {3}already registered\n {2}de {3}already registered/);
    const log = readFileSync(path.join(modelServerEnv.LOG_DIR!, 'model-server-out.log'), 'utf8');
    expect(log).toContain('models restored from the snapshot');
    await until('de through the router host', async () => (await translate('de')).status === 200, 30_000, 200);
  }, 240_000);
});
