/**
 * @module bench/scenarios/policy — figure 4, the batching policy: TorchServe's (a batch waits until batch_size
 * jobs or max_batch_delay) against immediate dispatch to a worker with room (batches grow with load on their own),
 * latency at low load (concurrency 1) and throughput at high load (concurrency 64), through the full stack (the
 * front adds about a millisecond to generations of about a second). Fresh stack per arm, alternating order; quick
 * runs take the immediate arm from figure 2's one-language stack, which is the same configuration.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { startRunStack } from '../lib/stack.js';
import { formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { alternatingOrder, median, ratio } from '../lib/stats.js';
import { LOAD_COLUMNS, measure, type LoadMeasurement } from './load.js';
import { SERVED_ONE_LANGUAGE_KEY } from './serving.js';

type Policy = 'immediate' | 'torchserve';
const POLICIES: Policy[] = ['immediate', 'torchserve'];
const TARGETS = ['en'];

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'policy',
    '4. Batching policy: TorchServe vs immediate dispatch',
    `The full stack, batch_size ${settings.batchSize}, max_batch_delay ${settings.maxBatchDelayMs} ms, one target language. ` +
      '`torchserve`: a batch leaves when it has batch_size jobs or its oldest job has waited max_batch_delay. `immediate`: a worker with room takes whatever is queued at once. ' +
      (settings.reuse
        ? "Fresh stack for torchserve; immediate is figure 2's one-language stack, measured earlier in this run."
        : 'Fresh stack per arm, arms in alternating order on each repeat, medians.'),
  );
  const modelDir = await ctx.model(ctx.settings.speedModel);
  const low = 1;
  const high = 64;
  const results = new Map<Policy, Map<number, LoadMeasurement>[]>(POLICIES.map((p) => [p, []]));
  for (const [r, round] of alternatingOrder(POLICIES, settings.loadRepeats).entries()) {
    for (const policy of round) {
      if (ctx.signal.aborted) break;
      const served = ctx.shared.get(SERVED_ONE_LANGUAGE_KEY) as Map<number, LoadMeasurement> | undefined;
      if (policy === 'immediate' && settings.reuse && served?.has(low) && served.has(high)) {
        results.get(policy)!.push(served);
        continue;
      }
      ctx.log(`policy, repeat ${r + 1}/${settings.loadRepeats}: ${policy}`);
      const stack = await startRunStack(ctx, {
        name: `policy-${policy}-${r}`,
        modelDir,
        languages: TARGETS,
        batchPolicy: policy,
      });
      const byConcurrency = new Map<number, LoadMeasurement>();
      try {
        for (const c of [low, high]) {
          if (ctx.signal.aborted) break;
          // The high-load level is the last on this server, which is stopped right after: no need to drain it.
          const drain = c !== high;
          byConcurrency.set(
            c,
            await measure(ctx, {
              origin: stack.frontUrl!,
              entry: 'front',
              concurrency: c,
              targets: TARGETS,
              metricsUrl: stack.metrics,
              drain,
              label: `policy ${policy}`,
            }),
          );
        }
      } finally {
        await stack.stop();
      }
      results.get(policy)!.push(byConcurrency);
    }
  }
  const med = (p: Policy, c: number, pick: (m: LoadMeasurement) => number) =>
    median(
      results
        .get(p)!
        .map((m) => (m.get(c) ? pick(m.get(c)!) : Number.NaN))
        .filter(Number.isFinite),
    );
  const rows: (string | number)[][] = [];
  for (const p of POLICIES) {
    for (const c of [low, high]) {
      rows.push([
        p,
        c,
        med(p, c, (m) => m.sentencesPerS),
        med(p, c, (m) => m.tokensPerS),
        med(p, c, (m) => m.load.latency.p50),
        med(p, c, (m) => m.load.latency.p90),
        med(p, c, (m) => m.load.latency.p99),
        med(p, c, (m) => m.meanBatchSize),
        med(p, c, (m) => m.rowsPerStep),
      ]);
    }
  }
  s.tables.push({
    title: 'Latency at low load, throughput at high load',
    columns: ['Policy', 'Concurrency', ...LOAD_COLUMNS],
    rows,
    note: 'Mean batch: jobs per batch the model server sent (mt_batch_size); rows per decoder run: the batch its engine stepped.',
  });
  const lowP50 = ratio(
    med('torchserve', low, (m) => m.load.latency.p50),
    med('immediate', low, (m) => m.load.latency.p50),
  );
  const highTput = ratio(
    med('torchserve', high, (m) => m.sentencesPerS),
    med('immediate', high, (m) => m.sentencesPerS),
  );
  const highP50 = ratio(
    med('torchserve', high, (m) => m.load.latency.p50),
    med('immediate', high, (m) => m.load.latency.p50),
  );
  s.tables.push({
    title: 'torchserve ÷ immediate',
    columns: ['Figure', 'ratio', 'better'],
    rows: [
      [
        `p50 latency at concurrency ${low}`,
        formatRatio(lowP50),
        Number.isFinite(lowP50) ? (lowP50 > 1 ? 'immediate' : 'torchserve') : 'n/a',
      ],
      [
        `sentences/s at concurrency ${high}`,
        formatRatio(highTput),
        Number.isFinite(highTput) ? (highTput < 1 ? 'immediate' : 'torchserve') : 'n/a',
      ],
      [
        `p50 latency at concurrency ${high}`,
        formatRatio(highP50),
        Number.isFinite(highP50) ? (highP50 > 1 ? 'immediate' : 'torchserve') : 'n/a',
      ],
    ],
    note: 'The default (BATCH_POLICY in .env.example) should be the policy that wins at low load without losing at high load.',
  });
  const lowWinner = lowP50 > 1 ? 'immediate' : 'torchserve';
  const highWinner = highTput < 1 ? 'immediate' : 'torchserve';
  const highBatch = (p: Policy) => formatNumber(med(p, high, (m) => m.rowsPerStep));
  s.notes.push(
    `At concurrency ${low}, ${lowWinner} answered faster (torchserve's p50 is ${formatRatio(lowP50)} immediate's; by design a lone job under torchserve waits up to ` +
      `max_batch_delay = ${settings.maxBatchDelayMs} ms for a batch that never fills, so a ratio below 1 here is load drift between the arms). ` +
      `At concurrency ${high}, ${highWinner} served more (torchserve's sentences/s is ${formatRatio(highTput)} immediate's), the engine stepping ` +
      `${highBatch('torchserve')} (torchserve) and ${highBatch('immediate')} (immediate) rows per decoder run. The issue sets no number here.`,
  );
  s.data = { rows, lowP50, highTput, highP50 };
  return s;
}

export const policyScenario: Scenario = {
  id: 'policy',
  title: '4. Batching policy: TorchServe vs immediate dispatch',
  run,
};
