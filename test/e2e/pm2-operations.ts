/**
 * The README's operations, for real, as a suite both fronts run (pm2-builtin.test.ts, pm2-nginx.test.ts):
 * `scripts/start.sh new` brings the whole stack up under pm2 (build, demo model, store, registration, front),
 * `pm2 reload router` under steady load loses no request, and `scripts/stop.sh` stops it. Everything is private
 * to the suite: a temp PM2_HOME (its daemon is killed at the end; a user's pm2 is never touched), temp
 * model/store/log/run folders, free ports.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Pool } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PM2, privatePm2, type CommandResult, type Pm2 } from '../../harness/pm2.js';
import { until } from '../../harness/polling.js';
import { fixedAddresses } from '../../harness/stack.js';

/** The pm2 suite with FRONT=`front`. */
export function describePm2Operations(front: 'nginx' | 'builtin'): void {
  let dir: string;
  let pm2: Pm2 | undefined;
  let frontUrl: string;
  let startOutput = '';

  const run = (file: string, args: string[], timeoutMs = 180_000): Promise<CommandResult> =>
    pm2!.run(file, args, timeoutMs);

  async function routerPids(): Promise<number[]> {
    const { stdout } = await run(PM2, ['jlist']);
    return (JSON.parse(stdout) as { name: string; pid: number }[]).filter((p) => p.name === 'router').map((p) => p.pid);
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-pm2-'));
    const setupConfig = path.join(dir, 'setup_config.json');
    writeFileSync(setupConfig, JSON.stringify({ cuda_id: { ko: '0', de: '1' } }));
    const addresses = await fixedAddresses();
    frontUrl = addresses.urls.front;
    pm2 = privatePm2(path.join(dir, 'pm2'), {
      SETUP_CONFIG: setupConfig,
      MODEL_DIR: path.join(dir, 'models', 'tiny'),
      MODEL_STORE: path.join(dir, 'model_store'),
      LOG_DIR: path.join(dir, 'logs'),
      RUN_DIR: path.join(dir, 'run'),
      ...addresses.env,
      FRONT: front,
      ROUTER_INSTANCES: '2',
      BATCH_SIZE: '8',
      MAX_BATCH_DELAY_MS: '10',
      NUM_BEAMS: '1',
      MAX_NEW_TOKENS: '16',
      // info: the routers' drain lines are what proves a reload drained (below).
      LOG_LEVEL: 'info',
    });
    const started = await run('bash', ['scripts/start.sh', 'new']);
    startOutput = started.stdout + started.stderr;
    if (started.code !== 0) throw new Error(`start.sh new failed (${started.code}):\n${startOutput}`);
  });

  afterAll(async () => {
    await pm2?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe(`pm2 operations (${front} front)`, () => {
    it('start.sh new registers every language, reports the front and a working curl', async () => {
      expect(startOutput).toMatch(/ {2}ko {3}registered\n {2}de {3}registered/);
      expect(startOutput).toContain(`mt-serve is ready: front ${front} on ${frontUrl} → router ×2`);
      expect(startOutput).toContain(
        `curl -s -X POST ${frontUrl} -d '{"src_lang":"en","src_text":"Hello, world!","tgt_lang":"ko"}'`,
      );
      const res = await fetch(frontUrl, {
        method: 'POST',
        body: JSON.stringify({ src_lang: 'en', src_text: ['a', 'b'], tgt_lang: 'de' }),
      });
      expect(res.status).toBe(200);
      expect(res.headers.get('x-model-name')).toBe('de');
    });

    it('pm2 reload router under load loses no request', async () => {
      const before = await routerPids();
      expect(before).toHaveLength(2);
      const pool = new Pool(frontUrl, { connections: 8 });
      const statuses = new Map<string, number>();
      let done = 0;
      let stop = false;
      const client = async (n: number) => {
        while (!stop) {
          let key: string;
          try {
            const res = await pool.request({
              method: 'POST',
              path: '/',
              headers: { 'content-type': 'application/json' },
              body: JSON.stringify({ src_lang: 'en', src_text: `request ${n} ${done}`, tgt_lang: n % 2 ? 'ko' : 'de' }),
            });
            const body = await res.body.text();
            key = res.statusCode === 200 ? '200' : `${res.statusCode} ${body}`;
          } catch (err) {
            key = `error ${(err as Error).message}`;
          }
          statuses.set(key, (statuses.get(key) ?? 0) + 1);
          done += 1;
        }
      };
      const clients = [0, 1, 2, 3, 4, 5, 6, 7].map(client);
      try {
        await until('40 requests before the reload', () => done >= 40, 20_000);
        const reload = await run(PM2, ['reload', 'router'], 60_000);
        expect(reload.code, reload.stdout + reload.stderr).toBe(0);
        const afterReload = done;
        await until('40 requests after the reload', () => done >= afterReload + 40, 20_000);
      } finally {
        stop = true;
        await Promise.all(clients);
        await pool.close();
      }
      const after = await routerPids();
      expect(after).toHaveLength(2);
      for (const pid of after) expect(before).not.toContain(pid);
      expect(Object.fromEntries(statuses)).toEqual({ '200': done });
      // Every answer was a 200, and not because the front resent what a router dropped: each old instance
      // finished its drain (every request answered, every connection closed by its client) before exiting.
      const lines = readFileSync(path.join(pm2!.env.LOG_DIR!, 'router-out.log'), 'utf8')
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as { pid: number; msg: string; clean?: boolean });
      for (const pid of before) {
        expect(lines.find((l) => l.pid === pid && l.msg === 'router stopped')).toMatchObject({ clean: true });
      }
    });

    it('stop.sh drains and stops every app', async () => {
      const stopped = await run('bash', ['scripts/stop.sh'], 120_000);
      expect(stopped.code, stopped.stderr).toBe(0);
      expect(stopped.stdout).toContain('mt-serve stopped');
      await expect(fetch(frontUrl)).rejects.toThrow();
      const again = await run('bash', ['scripts/stop.sh']);
      expect(again.stdout).toContain('mt-serve is not running');
    });
  });
}
