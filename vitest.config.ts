import { defineConfig } from 'vitest/config';

/**
 * Drills whose outcome depends on timing under load they create themselves: goodput at 10× overload and refusals
 * answered at admission (goodput), 1,000 clients leaving at once (abandon), a router instance SIGKILLed under load
 * (pm2: only the requests in flight on it may fail), the model server SIGKILLed under load (restart: back within 15 s), a host of several killed (hosts: the shared
 * language's rate held). They run after everything else, one file at a time
 * (vitest.solo.config.ts), so a neighbouring test file's CPU load on this 2-core machine cannot be what they measure.
 */
export const SOLO_TESTS = [
  'test/reliability/goodput.test.ts',
  'test/reliability/abandon.test.ts',
  'test/reliability/pm2.test.ts',
  'test/reliability/restart.test.ts',
  'test/reliability/hosts.test.ts',
];

// Tests start real servers and child processes; on a 2-core machine two test files at a time is the
// most that keeps timing-sensitive batching tests honest. A hang is a failure: generous but finite timeouts.
export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    // test/compat/<client>/ holds a client's own suite (vendored, run by its own runner) and its own node_modules.
    exclude: ['node_modules/**', 'dist/**', 'test/compat/*/**', ...SOLO_TESTS],
    pool: 'forks',
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
  },
});
