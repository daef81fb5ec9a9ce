import { defineConfig } from 'vitest/config';

// Tests start real servers and child processes; on a 2-core machine two test files at a time is the
// most that keeps timing-sensitive batching tests honest. A hang is a failure: generous but finite timeouts.
export default defineConfig({
  test: {
    include: ['**/*.test.ts'],
    exclude: ['node_modules/**', 'dist/**'],
    pool: 'forks',
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
  },
});
