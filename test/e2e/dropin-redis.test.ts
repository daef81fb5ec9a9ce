/**
 * API keys counted in Redis, end to end: a real redis-server as USAGE_STORE, two router instances (as on two
 * machines, they share nothing but Redis), the front before the first. The official DeepL client uses up part of a
 * quota through the front and is refused the rest on the other router, with DeepL's own QuotaExceededError; its
 * usage reads the same figures from either. Skipped, saying so, only where redis-server is not installed (CI
 * installs it).
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import * as deepl from 'deepl-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stopAll } from '../../harness/process-registry.js';
import { REDIS_SERVER, startRedisServer } from '../../harness/redis.js';
import { hashKey } from '../../router/keys/key-ring.js';
import { startStack, type Stack } from '../../harness/stack.js';

if (REDIS_SERVER === undefined)
  console.warn('dropin-redis.test: redis-server is not installed; NOT tested here (apt-get install redis-server)');

// .ci/run installs redis-server: on CI a missing one is a failure, not a skip.
it.runIf(REDIS_SERVER === undefined && process.env.CI === 'true')('redis-server is installed on CI', () => {
  expect.fail('redis-server is not installed: .ci/run installs it (apt-get install redis-server)');
});

describe.skipIf(REDIS_SERVER === undefined)('API keys counted in Redis across router instances', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'mt-dropin-redis-'));
  const KEY = 'shared-quota-key-0123456789';
  let redis: ChildProcess;
  let stack: Stack;

  beforeAll(async () => {
    const started = await startRedisServer();
    redis = started.server;
    const url = started.url;
    writeFileSync(
      path.join(dir, 'keys.json'),
      JSON.stringify({ id: 'shared', sha256: hashKey(KEY), character_quota: 20 }),
    );
    stack = await startStack({
      languages: ['en', 'de'],
      handler: 'echo',
      routers: 2,
      front: 'builtin',
      env: { API_KEYS: path.join(dir, 'keys.json'), USAGE_STORE: url },
    });
  });

  afterAll(async () => {
    await stack?.stop();
    await stopAll();
    redis?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it("refuses on one router what another used up, with deepl-node's QuotaExceededError", async () => {
    const viaFront = new deepl.Translator(KEY, { serverUrl: stack.frontUrl!, maxRetries: 0 });
    const viaOther = new deepl.Translator(KEY, { serverUrl: stack.routerUrls[1]!, maxRetries: 0 });
    expect((await viaFront.translateText('Fifteen chars..', 'en', 'de')).text).toBe('Fifteen chars..');
    await expect(viaOther.translateText('Ten chars.', 'en', 'de')).rejects.toThrow(deepl.QuotaExceededError);
    for (const translator of [viaFront, viaOther]) {
      const usage = await translator.getUsage();
      expect([usage.character?.count, usage.character?.limit]).toEqual([15, 20]);
    }
    expect((await viaOther.translateText('Five.', 'en', 'de')).text).toBe('Five.');
    const usage = await viaFront.getUsage();
    expect(usage.anyLimitReached()).toBe(true);
  });
});
