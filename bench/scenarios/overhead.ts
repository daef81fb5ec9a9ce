/**
 * @module bench/scenarios/overhead — figure 6, serving overhead: the `echo` handler (everything but the model)
 * through the full stack (front → router cluster → model server → worker), straight to the router, and straight
 * to the model server's inference API, at each concurrency: requests/s and what each hop adds to p50 and p99.
 * One stack serves all three entry points; entry points alternate their order on every repeat and concurrency.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { startRunStack } from '../lib/stack.js';
import { formatNumber, section, type Section } from '../lib/report.js';
import { alternatingOrder, median } from '../lib/stats.js';
import { SEED_LANGUAGES } from '../lib/workload.js';
import { measure, type LoadMeasurement } from './load.js';

type Entry = 'front' | 'router' | 'model-server';
const ENTRIES: Entry[] = ['front', 'router', 'model-server'];

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'overhead',
    '6. Serving overhead with the echo handler',
    `The \`echo\` handler in place of the model (it answers {"translated": src_text}), ${SEED_LANGUAGES.length} languages registered, batch_size ${settings.batchSize}, ` +
      'immediate dispatch: requests/s and latency entering at the front, at the router, and at the model server; the difference between two entry points is what that hop adds.',
  );
  const stack = await startRunStack(ctx, {
    name: 'overhead',
    modelDir: await ctx.model('tiny'),
    languages: SEED_LANGUAGES,
    handler: 'echo',
  });
  const results = new Map<string, LoadMeasurement[]>();
  try {
    for (const c of settings.echoConcurrencies) {
      for (const [r, round] of alternatingOrder(ENTRIES, Math.max(2, settings.loadRepeats)).entries()) {
        for (const entry of round) {
          if (ctx.signal.aborted) break;
          const origin =
            entry === 'front' ? stack.frontUrl! : entry === 'router' ? stack.routerUrls[0]! : stack.inference;
          const m = await measure(ctx, {
            origin,
            entry: entry === 'model-server' ? 'model-server' : 'front',
            concurrency: c,
            targets: SEED_LANGUAGES,
            drain: true,
            window: { warmupMs: 1_000, minWindowMs: settings.echoWindowMs, cyclesPerClient: 1 },
            label: `echo via ${entry} (${r + 1})`,
          });
          results.set(`${entry}:${c}`, [...(results.get(`${entry}:${c}`) ?? []), m]);
        }
      }
    }
  } finally {
    await stack.stop();
  }
  const med = (entry: Entry, c: number, pick: (m: LoadMeasurement) => number) =>
    median((results.get(`${entry}:${c}`) ?? []).map(pick).filter(Number.isFinite));
  const rows: (string | number)[][] = [];
  const hops: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  for (const c of settings.echoConcurrencies) {
    for (const entry of ENTRIES) {
      const rps = med(entry, c, (m) => m.load.requestsPerS);
      const p50 = med(entry, c, (m) => m.load.latency.p50);
      const p99 = med(entry, c, (m) => m.load.latency.p99);
      const errors = (results.get(`${entry}:${c}`) ?? []).reduce((n, m) => n + m.load.failed, 0);
      rows.push([entry, c, rps, p50, p99, errors]);
      data.push({ entry, concurrency: c, requestsPerS: rps, p50, p99, errors });
    }
    const added = (upper: Entry, lower: Entry, pick: (m: LoadMeasurement) => number) =>
      med(upper, c, pick) - med(lower, c, pick);
    const p50 = (m: LoadMeasurement) => m.load.latency.p50;
    const p99 = (m: LoadMeasurement) => m.load.latency.p99;
    hops.push([
      `front (${stack.frontKind ?? '?'}) → router`,
      c,
      added('front', 'router', p50),
      added('front', 'router', p99),
    ]);
    hops.push(['router → model server', c, added('router', 'model-server', p50), added('router', 'model-server', p99)]);
    hops.push(['model server + worker (echo)', c, med('model-server', c, p50), med('model-server', c, p99)]);
  }
  s.tables.push({
    title: 'Echo requests/s and latency by entry point',
    columns: ['Entry point', 'Concurrency', 'requests/s', 'p50 ms', 'p99 ms', 'errors'],
    rows,
    note: `Medians of ${Math.max(2, settings.loadRepeats)} alternating repeats, ${formatNumber(settings.echoWindowMs / 1000)} s windows.`,
  });
  s.tables.push({
    title: 'Latency added per hop (difference of entry points)',
    columns: ['Hop', 'Concurrency', 'added p50 ms', 'added p99 ms'],
    rows: hops,
    note: 'The last row is the whole model-server path with echo: HTTP parsing, queue, batcher, IPC to the worker and back.',
  });
  s.data = { rows: data, frontKind: stack.frontKind };
  return s;
}

export const overheadScenario: Scenario = { id: 'overhead', title: '6. Serving overhead with the echo handler', run };
