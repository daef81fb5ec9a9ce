import { defineConfig } from 'vitest/config';
import base, { SOLO_TESTS } from './vitest.config.js';

/** The latency-bound drills, one file at a time and alone on the machine (see SOLO_TESTS in vitest.config.ts). */
export default defineConfig({
  test: {
    ...base.test,
    include: SOLO_TESTS,
    exclude: ['node_modules/**', 'dist/**'],
    maxWorkers: 1,
    fileParallelism: false,
  },
});
