/**
 * @module harness/redis — a throwaway redis-server (or valkey-server) for the tests of the Redis usage store: found
 * where the distribution installs it, started on a free 127.0.0.1 port without persistence.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { RedisUsageStore } from '../router/keys/redis-usage-store.js';
import { until } from './polling.js';
import { freePort } from './ports.js';

/** The redis-server binary, or undefined where none is installed (.ci/run installs one). */
export const REDIS_SERVER = ['/usr/bin/redis-server', '/usr/bin/valkey-server'].find((bin) => existsSync(bin));

/** Starts REDIS_SERVER; resolves with its URL once a usage store can read from it. Kill `server` when done. */
export async function startRedisServer(): Promise<{ server: ChildProcess; url: string }> {
  const port = await freePort();
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'];
  const server = spawn(REDIS_SERVER!, args, { stdio: 'ignore' });
  const url = `redis://127.0.0.1:${port}`;
  await until('redis-server to answer', async () => {
    const probe = new RedisUsageStore(url);
    try {
      await probe.usages(['probe']);
      return true;
    } catch {
      return false;
    } finally {
      await probe.close().catch(() => {});
    }
  });
  return { server, url };
}
