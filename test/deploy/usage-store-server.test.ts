/**
 * USAGE_STORE_SERVER=true: the pm2 ecosystem (built config, as `npm start` loads it) adds a `usage-store` app that
 * runs the installed redis-server on USAGE_STORE's address with its data in RUN_DIR; started as pm2 would start it,
 * it answers the routers' usage store. Skipped, saying so, only where redis-server is not installed (CI installs it).
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../harness/ports.js';
import { RedisUsageStore } from '../../router/keys/redis-usage-store.js';
import { ROOT } from '../../harness/processes.js';

const installed = ['/usr/bin/redis-server', '/usr/bin/valkey-server'].some((bin) => existsSync(bin));
if (!installed)
  console.warn(
    'usage-store-server.test: redis-server is not installed; NOT tested here (apt-get install redis-server)',
  );

// .ci/run installs redis-server: on CI a missing one is a failure, not a skip.
it.runIf(!installed && process.env.CI === 'true')('redis-server is installed on CI', () => {
  expect.fail('redis-server is not installed: .ci/run installs it (apt-get install redis-server)');
});

describe.skipIf(!installed)('USAGE_STORE_SERVER', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-usage-server-'));
  let server: ChildProcess | undefined;
  afterAll(() => {
    server?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs redis-server where USAGE_STORE points, and the routers count in it', async () => {
    const port = await freePort();
    const script =
      "import('./ecosystem.config.js').then((m) => process.stdout.write(JSON.stringify(m.apps.find((a) => a.name === 'usage-store'))))";
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: ROOT,
      env: {
        ...process.env,
        USAGE_STORE: `redis://127.0.0.1:${port}`,
        USAGE_STORE_SERVER: 'true',
        RUN_DIR: dir,
        LOG_DIR: dir,
      },
    });
    const app = JSON.parse(stdout) as { script: string; args: string[]; interpreter: string };
    expect(app.interpreter).toBe('none');
    expect(app.args).toEqual([
      '--bind',
      '127.0.0.1',
      '--port',
      String(port),
      '--dir',
      path.join(dir, 'usage-store'),
      '--appendonly',
      'yes',
      '--save',
      '',
    ]);
    server = spawn(app.script, app.args, { stdio: 'ignore' });
    const store = new RedisUsageStore(`redis://127.0.0.1:${port}`);
    const key = { id: 'served', periodS: 60, characterQuota: 10 };
    expect(await store.admit(key, 8)).toMatchObject({ ok: true, charge: { characters: 8 } });
    expect(await store.admit(key, 8)).toEqual({ ok: false, reason: 'quota', limit: 10 });
    await store.close();
  });
});
