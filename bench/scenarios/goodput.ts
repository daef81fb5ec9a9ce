/**
 * @module bench/scenarios/goodput — figure 7, overload: closed-loop clients at 1×, 2×, 5× and 10× the concurrency
 * that saturates the engine (its batch_size: the jobs one worker holds at once), honouring `Retry-After`, through
 * the front (:7777's path) and straight to the model server (:9999). Goodput is the sentences answered 200 within
 * the deadline per second; the target is ≥ 0.9 × the peak at every level, with refusals (503 + Retry-After)
 * answered in < 50 ms at p99 and no worker recycled. A chart of goodput and p99 latency against offered load is
 * written beside the report.
 *
 * The model is `bench-mid` (the 418M model's vocabulary and graphs, smaller layers): a generation cycle of about a
 * second gives each window many cycles, so the figure measures the serving stack's behaviour under overload rather
 * than where a window happens to cut a 10-second 418M cycle.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { LOOP_DELAY_NOT_MEASURED, runClosedLoop, type LoadResult, type LoopDelay } from '../lib/load-generator.js';
import { scrape, total } from '../lib/metrics.js';
import { CPU_TICK_US, cpuTicks, ownCpuTicks, parentMap } from '../../harness/proc-tree.js';
import { checkTarget, formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack, type Stack } from '../lib/stack.js';
import { summarize } from '../lib/stats.js';
import { lineChart } from '../lib/svg-chart.js';
import { translatedCheck, translationRequest, type EntryKind } from './load.js';

const TARGETS = ['en'];
const FACTORS = [1, 2, 5, 10];
/** The clients' deadline and the model's response_timeout, s: an answer later than this is not goodput. */
const DEADLINE_S = 30;

interface Level {
  path: EntryKind;
  clients: number;
  goodputPerS: number;
  p99Ms: number;
  refusals: number;
  refusalP99Ms: number;
  late: number;
  /** Answers other than 200 and 503 (a 504 means a deadline passed on a worker). */
  otherErrors: Record<string, number>;
  /** CPU time each part used during the window, in cores (1 = one core busy throughout). */
  cpu: CpuShares;
  /**
   * How late the event loops ran during the window, p99 / max ms: the load generator's (its latencies include
   * that much of its own delay) and the model server's HTTP process (a refusal waits that long behind other work).
   */
  loopDelayMs: { generator: LoopDelay; modelServer: LoopDelay };
}

/** Where the processor goes under overload: the engine, or the HTTP side answering and refusing. */
const CPU_PARTS = ['workers', 'model server', 'router', 'front', 'load generator'] as const;
type CpuShares = Record<(typeof CPU_PARTS)[number], number>;

/** CPU ticks of each part of `stack` so far (the load generator is this process). */
function cpuNow(stack: Stack): CpuShares {
  const parents = parentMap();
  const tree = (proc: { pid: number } | undefined) => (proc === undefined ? 0 : cpuTicks(proc.pid, parents));
  const modelServer = stack.modelServer.pid;
  let own = Number.NaN;
  try {
    own = ownCpuTicks(modelServer);
  } catch {
    // gone: NaN says so in the report
  }
  const self = process.cpuUsage();
  return {
    workers: cpuTicks(modelServer, parents) - own,
    'model server': own,
    router: tree(stack.routers[0]),
    front: tree(stack.front),
    'load generator': (self.user + self.system) / CPU_TICK_US,
  };
}

function cpuShares(from: CpuShares, to: CpuShares, windowMs: number): CpuShares {
  const out = {} as CpuShares;
  for (const part of CPU_PARTS) out[part] = ((to[part] - from[part]) * CPU_TICK_US) / 1000 / windowMs;
  return out;
}

/** The model server's event-loop delay since its previous scrape (prom-client resets it at every collect), ms. */
async function modelServerLoopDelay(stack: Stack): Promise<LoopDelay> {
  try {
    const samples = await scrape(`${stack.metrics}/metrics`);
    return {
      p99: total(samples, 'nodejs_eventloop_lag_p99_seconds') * 1000,
      max: total(samples, 'nodejs_eventloop_lag_max_seconds') * 1000,
    };
  } catch {
    return LOOP_DELAY_NOT_MEASURED;
  }
}

function levelOf(
  path: EntryKind,
  clients: number,
  load: LoadResult,
  cpu: CpuShares,
  modelServerDelay: LoopDelay,
): Level {
  const seconds = load.windowMs / 1000;
  const good = load.records.filter((r) => r.error === undefined && r.latencyMs <= DEADLINE_S * 1000);
  const refusals = load.records.filter((r) => r.status === 503);
  const otherErrors: Record<string, number> = {};
  for (const r of load.records) {
    if (r.error === undefined || r.status === 503) continue;
    otherErrors[r.error] = (otherErrors[r.error] ?? 0) + 1;
  }
  return {
    path,
    clients,
    goodputPerS: seconds > 0 ? good.length / seconds : Number.NaN,
    p99Ms: summarize(good.map((r) => r.latencyMs)).p99,
    refusals: refusals.length,
    refusalP99Ms: refusals.length > 0 ? summarize(refusals.map((r) => r.latencyMs)).p99 : Number.NaN,
    late: load.ok - good.length,
    otherErrors,
    cpu,
    loopDelayMs: { generator: load.loopDelayMs, modelServer: modelServerDelay },
  };
}

const delayText = (d: LoopDelay) => `${d.p99.toFixed(1)} / ${d.max.toFixed(1)}`;

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const saturating = settings.batchSize;
  const s = section(
    'goodput',
    '7. Goodput under overload',
    `Closed-loop clients at ${FACTORS.map((f) => `${f}×`).join(', ')} the concurrency that saturates the engine (${saturating}: the jobs one worker holds, its batch_size), ` +
      `clients honouring Retry-After (plus up to 1 s of jitter), deadline ${DEADLINE_S} s (the response timeout), queue budget 5 s (the default). ` +
      'Goodput: 200 answers within the deadline per second. Through the front and straight to the model server, on one stack.',
  );
  const model = settings.mode === 'smoke' ? 'tiny' : 'bench-mid';
  const modelDir = await ctx.model(model);
  const stack = await startRunStack(ctx, {
    name: 'goodput',
    modelDir,
    languages: TARGETS,
    responseTimeoutS: DEADLINE_S,
    queueBudgetMs: 5_000,
  });
  const levels: Level[] = [];
  let deaths = Number.NaN;
  // A batch of `saturating` sentences ends at once, about one a second on bench-mid, so a window holds whole
  // batches only: with 10 in a 10 s window one batch more or less read as ±0.1 of the peak (quick runs read
  // 0.82–1.0 at one throughput). 30 batches or more keep that under ±0.035.
  const windowMs = settings.mode === 'full' ? 60_000 : settings.mode === 'quick' ? 30_000 : 2_000;
  try {
    for (const path of ['front', 'model-server'] as const) {
      const origin = path === 'front' ? stack.frontUrl! : stack.inference;
      // One untimed level first: the model learns its service rate, the engine its shapes.
      for (const [i, factor] of [1, ...FACTORS].entries()) {
        if (ctx.signal.aborted) break;
        const clients = factor * saturating;
        const levelWindowMs = i === 0 ? Math.min(windowMs, 5_000) : windowMs;
        let cpuFrom: CpuShares | undefined;
        let cpuTo: CpuShares | undefined;
        // Scraped when the window opens (which resets the model server's loop-delay histogram) and when it closes.
        let delayReset: Promise<unknown> = Promise.resolve();
        let delayRead: Promise<LoopDelay> | undefined;
        const load = await runClosedLoop({
          origin,
          concurrency: clients,
          request: translationRequest(path, TARGETS),
          check: translatedCheck,
          honorRetryAfter: true,
          warmupMs: Math.min(5_000, windowMs / 2),
          minWindowMs: levelWindowMs,
          // Abandon what is in flight at the end: those clients disconnect, and their work is cancelled.
          onWindowEnd: 'abort',
          timeoutMs: 4 * DEADLINE_S * 1000,
          maxTotalMs: 3 * levelWindowMs + 60_000,
          signal: ctx.signal,
          onWindowOpen: () => {
            cpuFrom = cpuNow(stack);
            delayReset = modelServerLoopDelay(stack);
          },
          onWindowClose: () => {
            cpuTo = cpuNow(stack);
            delayRead = delayReset.then(() => modelServerLoopDelay(stack));
          },
        });
        const cpu = cpuShares(cpuFrom ?? cpuNow(stack), cpuTo ?? cpuNow(stack), load.windowMs);
        const level = levelOf(path, clients, load, cpu, (await delayRead) ?? LOOP_DELAY_NOT_MEASURED);
        ctx.log(
          `goodput ${path} ${clients} clients: ${level.goodputPerS.toFixed(1)}/s good, p99 ${level.p99Ms.toFixed(0)} ms, ` +
            `${level.refusals} refused (p99 ${level.refusalP99Ms.toFixed(1)} ms), ${level.late} late, other ${JSON.stringify(level.otherErrors)}; ` +
            `CPU (cores) ${CPU_PARTS.map((p) => `${p} ${cpu[p].toFixed(2)}`).join(', ')}; ` +
            `loop delay p99/max ms: generator ${delayText(level.loopDelayMs.generator)}, model server ${delayText(level.loopDelayMs.modelServer)}`,
        );
        if (levels.some((l) => l.path === path && l.clients === clients)) {
          levels[levels.findIndex((l) => l.path === path && l.clients === clients)] = level;
        } else levels.push(level);
      }
    }
    deaths = total(await scrape(`${stack.metrics}/metrics`), 'mt_worker_deaths_total');
  } finally {
    await stack.stop();
  }

  const rows: (string | number)[][] = [];
  const charts = new Map<EntryKind, { goodput: [number, number][]; p99: [number, number][] }>();
  for (const path of ['front', 'model-server'] as const) {
    const mine = levels.filter((l) => l.path === path);
    const peak = Math.max(...mine.map((l) => l.goodputPerS).filter(Number.isFinite));
    charts.set(path, {
      goodput: mine.map((l) => [l.clients, l.goodputPerS]),
      p99: mine.map((l) => [l.clients, l.p99Ms]),
    });
    for (const l of mine) {
      const share = l.goodputPerS / peak;
      rows.push([
        path === 'front' ? 'front → router → model server' : 'model server (:9999)',
        l.clients,
        l.goodputPerS,
        formatRatio(share),
        l.p99Ms,
        l.refusals,
        l.refusalP99Ms,
        l.late,
        Object.keys(l.otherErrors).length === 0 ? '-' : JSON.stringify(l.otherErrors),
      ]);
      if (l.clients > saturating) {
        const where = path === 'front' ? 'through the front' : 'straight to :9999';
        s.targets.push(checkTarget(`goodput ÷ peak at ${l.clients} clients, ${where}`, share, '>=', 0.9));
        if (l.refusals > 0)
          s.targets.push(checkTarget(`refusal p99 at ${l.clients} clients, ${where}`, l.refusalP99Ms, '<=', 50, ' ms'));
      }
    }
  }
  s.tables.push({
    title: 'Goodput and latency against offered load',
    columns: [
      'Path',
      'clients',
      'goodput /s',
      'of peak',
      'p99 ms (200s)',
      '503s',
      '503 p99 ms',
      'late 200s',
      'other answers',
    ],
    rows,
    note: `Late: 200 answers after the ${DEADLINE_S} s deadline (not goodput). Other answers: anything but 200 and 503, by status.`,
  });
  s.tables.push({
    title: 'Where the processor went during each window',
    columns: ['Path', 'clients', ...CPU_PARTS],
    rows: levels.map((l) => [
      l.path === 'front' ? 'front → router → model server' : 'model server (:9999)',
      l.clients,
      ...CPU_PARTS.map((p) => l.cpu[p]),
    ]),
    note: 'CPU time (user + system) of each part over the window, in cores: 1 is one core busy throughout. Workers: the engine processes; model server: its HTTP frontend; load generator: this process.',
  });
  s.tables.push({
    title: 'Event-loop delay during each window (p99 / max, ms)',
    columns: ['Path', 'clients', '503 p99 ms', 'load generator', 'model server'],
    rows: levels.map((l) => [
      l.path === 'front' ? 'front → router → model server' : 'model server (:9999)',
      l.clients,
      l.refusalP99Ms,
      delayText(l.loopDelayMs.generator),
      delayText(l.loopDelayMs.modelServer),
    ]),
    note: "How late each event loop ran (perf_hooks monitorEventLoopDelay; the model server's through prom-client, resolution 10 ms). A latency the load generator records includes up to its own delay; a request at the model server waits up to its delay behind other work.",
  });
  s.targets.push(checkTarget('worker recycles during the run', deaths, '<=', 0));
  const name = (path: EntryKind) => (path === 'front' ? 'through the front' : 'model server :9999');
  s.figures = [
    {
      id: 'goodput',
      title: 'Goodput and p99 latency against offered load',
      svg: lineChart({
        title: `Goodput under overload (${model}, saturating concurrency ${saturating})`,
        xLabel: 'closed-loop clients (offered load)',
        panels: [
          {
            title: 'Goodput: 200s within the deadline',
            yLabel: 'sentences / s',
            series: [...charts].map(([path, c]) => ({ name: name(path), points: c.goodput })),
          },
          {
            title: 'p99 latency of the 200s',
            yLabel: 'ms',
            series: [...charts].map(([path, c]) => ({ name: name(path), points: c.p99 })),
            reference: { y: DEADLINE_S * 1000, label: 'deadline' },
          },
        ],
      }),
    },
  ];
  s.notes.push(
    `Worker deaths (mt_worker_deaths_total) after all levels: ${formatNumber(deaths)}. Admission (model-server/wlm/batcher.ts) keeps each language's queue within the wait its measured service rate allows; past it a request is refused at once.`,
  );
  s.data = { levels, deaths, saturating, deadlineS: DEADLINE_S, model };
  return s;
}

export const goodputScenario: Scenario = {
  id: 'goodput',
  title: '7. Goodput under overload',
  run,
};
