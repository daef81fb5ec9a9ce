import { defineConfig } from 'vitest/config';

/**
 * The tiers, each a vitest project (`npx vitest run --project unit`):
 * - unit: a module's own tests, beside its code;
 * - integration: a process's tests from its edge (`router/test/`, `model-server/test/`, `front/test/`, real servers
 *   on port 0, real workers) and the repository's checks (`test/architecture`, `test/docs`, `test/deploy`);
 * - stack: whole stacks from a user's seat (`test/e2e`, `test/browser`: pm2, nginx, chromium; `test/compat`: the
 *   DeepL and LibreTranslate clients' own suites);
 * - drills: faults and hostile traffic against whole stacks (`test/reliability`);
 * - solo: the drills whose outcome depends on timing under load they create themselves: goodput at 10× overload and
 *   refusals answered at admission (goodput), 1,000 clients leaving at once (abandon), a router instance SIGKILLed
 *   under load (pm2), the model server SIGKILLed under load (restart), a host of several killed (hosts). They run
 *   after every other tier, one file at a time in one fork, so a neighbouring file's CPU load on this 2-core machine
 *   cannot be what they measure.
 * `npm test` runs them all; `npm run test:quick` unit and integration, the everyday run.
 */
const SOLO = ['goodput', 'abandon', 'pm2', 'restart', 'hosts'].map((name) => `test/reliability/${name}.test.ts`);

/**
 * `shared`: the tier's files also share each fork's module registry, not only the fork. Most of a unit or integration
 * file's cost was starting a process and importing its modules again (docs/performance.md, "The test suite's own
 * time"); their servers and workers are their own, closed by their own hooks. A file there that needs a module
 * evaluated afresh (a mock of what it imports, RegExps counted as modules load) calls `vi.resetModules()` and
 * imports it then (router/test/language-routes.test.ts, test/architecture/regexes.test.ts). The other tiers reset
 * the registry for each file.
 */
const tier = (name: string, include: string[], exclude: string[] = [], shared = false) => ({
  extends: true as const,
  test: {
    name,
    include,
    // test/compat/<client>/ holds a client's own suite (vendored, run by its own runner) and its own node_modules.
    exclude: ['node_modules/**', 'dist/**', 'test/compat/*/**', ...exclude],
    poolOptions: { forks: { isolate: !shared } },
  },
});

// Tests start real servers and child processes; on a 2-core machine two test files at a time is the
// most that keeps timing-sensitive batching tests honest. A hang is a failure: generous but finite timeouts.
export default defineConfig({
  test: {
    pool: 'forks',
    // A fork runs file after file of one tier (the tiers one after another, each in fresh forks), rather than a
    // process per file: see `shared` above for what files of a tier may then share.
    poolOptions: { forks: { isolate: false } },
    maxWorkers: 2,
    minWorkers: 1,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    teardownTimeout: 30_000,
    projects: [
      tier('unit', ['**/*.test.ts'], ['test/**', '**/test/**'], true),
      tier(
        'integration',
        ['**/test/**/*.test.ts', 'test/{architecture,docs,deploy}/**/*.test.ts'],
        ['test/{e2e,browser,compat,reliability}/**'],
        true,
      ),
      tier('stack', ['test/{e2e,browser,compat}/**/*.test.ts']),
      tier('drills', ['test/reliability/**/*.test.ts'], SOLO),
      {
        extends: true,
        test: {
          name: 'solo',
          include: SOLO,
          sequence: { groupOrder: 1 },
          poolOptions: { forks: { singleFork: true, isolate: true } },
        },
      },
    ],
  },
});
