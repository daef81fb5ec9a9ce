/**
 * @module scripts/soak — the long run (issue 6.5): the whole stack in fresh processes on free ports (model server
 * with its worker on the generated tiny M2M100, a router cluster, the front), mixed languages at high
 * concurrency for a fixed time. It prints RSS and open file descriptors of every process at start, after the
 * warm-up and at the end, the queue depth and throughput over time, and the tally of every request (2xx / which
 * error / unanswered). Exit status 0 only when nothing unexpected happened: no error, nothing unanswered, no
 * process died, and no process's descriptors grew after the warm-up.
 *
 *     npm run soak -- --minutes 10                # the documented run
 *     npm run soak -- --seconds 30 --json out.json
 *
 * Options: --minutes N | --seconds N (duration, default 1 minute), --concurrency N (64), --warmup-seconds N
 * (10 % of the run, 5–60 s), --interval-seconds N (sampling, default duration/20 within 2–30 s), --routers N
 * (cluster instances, 2), --front auto|builtin|nginx (auto: nginx when installed), --handler translation|echo,
 * --json FILE (the whole report).
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { findNginx } from '../front/nginx.js';
import { makeDemoModel } from '../model-server/tools/demo-model/index.js';
import { ENV_DEFAULTS } from '../common/config.js';
import { Tally, drive } from '../harness/load.js';
import { type ProcessSample, sampleProcesses } from '../harness/proc-tree.js';
import { stopAll } from '../harness/process-registry.js';
import { startMeasuredStack, translateBody, type Stack } from '../harness/stack.js';

/** Languages of the seed's setup_config.json that the tiny model's tokenizer knows, with a sentence in each. */
const SENTENCES: Record<string, string[]> = {
  en: ['The weather is nice today.', 'Where is the train station?', 'I would like a cup of coffee, please.'],
  ko: ['오늘 날씨가 좋네요.', '기차역이 어디에 있나요?', '커피 한 잔 주세요.'],
  zh: ['今天天气很好。', '火车站在哪里？', '请给我一杯咖啡。'],
  es: ['Hoy hace buen tiempo.', '¿Dónde está la estación de tren?', 'Un café, por favor.'],
  fr: ['Il fait beau aujourd’hui.', 'Où est la gare ?', 'Un café, s’il vous plaît.'],
  de: ['Heute ist schönes Wetter.', 'Wo ist der Bahnhof?', 'Einen Kaffee, bitte.'],
  ja: ['今日はいい天気ですね。', '駅はどこですか？', 'コーヒーを一杯ください。'],
};
const LANGUAGES = Object.keys(SENTENCES);

interface Options {
  durationS: number;
  concurrency: number;
  warmupS: number;
  intervalS: number;
  routers: number;
  front: 'builtin' | 'nginx';
  handler: 'translation' | 'echo';
  json: string | undefined;
}

function parseOptions(argv: string[]): Options {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string' },
      seconds: { type: 'string' },
      concurrency: { type: 'string', default: '64' },
      'warmup-seconds': { type: 'string' },
      'interval-seconds': { type: 'string' },
      routers: { type: 'string', default: '2' },
      front: { type: 'string', default: 'auto' },
      handler: { type: 'string', default: 'translation' },
      json: { type: 'string' },
    },
  });
  const number = (name: string, value: string | undefined, min: number) => {
    const n = Number(value);
    if (!Number.isFinite(n) || n < min) throw new Error(`--${name} must be a number ≥ ${min}, got ${value}`);
    return n;
  };
  const seconds = (name: 'warmup-seconds' | 'interval-seconds', min: number, fallback: number) =>
    values[name] !== undefined ? number(name, values[name], min) : fallback;
  const durationS =
    values.seconds !== undefined
      ? number('seconds', values.seconds, 5)
      : number('minutes', values.minutes ?? '1', 5 / 60) * 60;
  const front = values.front === 'auto' ? (findNginx(process.env) ? 'nginx' : 'builtin') : values.front;
  if (front !== 'nginx' && front !== 'builtin') throw new Error(`--front must be auto, nginx or builtin`);
  if (values.handler !== 'translation' && values.handler !== 'echo')
    throw new Error('--handler must be translation or echo');
  return {
    durationS,
    concurrency: number('concurrency', values.concurrency, 1),
    warmupS: seconds('warmup-seconds', 0, Math.min(60, Math.max(5, durationS * 0.1))),
    intervalS: seconds('interval-seconds', 0.5, Math.min(30, Math.max(2, durationS / 20))),
    routers: number('routers', values.routers, 1),
    front,
    handler: values.handler,
    json: values.json,
  };
}

/** One process of the stack as /proc shows it. */
interface Interval {
  atS: number;
  requests: number;
  rps: number;
  errors: number;
  p50Ms: number;
  p99Ms: number;
  maxQueueDepth: number;
  rssMiB: number;
  fds: number;
  /** Every process at this point (the JSON report keeps the per-process series). */
  processes: ProcessSample[];
}

/** The largest `mt_queue_depth` sample (any model) from the metrics API. */
async function queueDepth(metricsUrl: string): Promise<number> {
  const lines = (await (await fetch(`${metricsUrl}/metrics`)).text()).split('\n');
  const depths = lines
    .filter((l) => l.startsWith('mt_queue_depth{'))
    .map((l) => Number(l.slice(l.lastIndexOf(' ') + 1)));
  return Math.max(0, ...depths);
}

const signed = (n: number, digits = 0) => `${n >= 0 ? '+' : ''}${n.toFixed(digits)}`;
const total = (samples: ProcessSample[], field: 'rssMiB' | 'fds') => samples.reduce((a, s) => a + s[field], 0);

function table(title: string, samples: ProcessSample[]): string {
  const row = (name: string, pid: string, rss: string, fds: string) =>
    `  ${name.padEnd(18)} ${pid.padStart(8)} ${rss.padStart(9)} ${fds.padStart(5)}`;
  return [
    title,
    row('process', 'pid', 'RSS MiB', 'fds'),
    ...samples.map((s) => row(s.name, String(s.pid), s.rssMiB.toFixed(1), String(s.fds))),
    row('total', '', total(samples, 'rssMiB').toFixed(1), String(total(samples, 'fds'))),
  ].join('\n');
}

export interface SoakReport {
  options: Options;
  frontKind: string | undefined;
  tally: ReturnType<Tally['toJSON']>;
  start: ProcessSample[];
  warm: ProcessSample[];
  end: ProcessSample[];
  intervals: Interval[];
  /** Per process alive at warm-up and at the end: RSS and fd change after the warm-up. */
  growth: ProcessSample[];
  /** Total RSS change over the second half of the run, MiB per minute (a leak shows as a steady slope). */
  rssSlopeMiBPerMin: number;
  died: string[];
  ok: boolean;
  problems: string[];
}

/** Run a soak; resolves with its report (also printed as it goes). */
export async function soak(
  options: Options,
  log: (line: string) => void = (l) => process.stdout.write(`${l}\n`),
): Promise<SoakReport> {
  const work = mkdtempSync(path.join(tmpdir(), 'mt-soak-'));
  let stack: Stack | undefined;
  try {
    const modelDir = path.join(work, 'tiny');
    if (options.handler === 'translation') makeDemoModel('tiny', modelDir);
    else mkdirSync(modelDir); // echo reads no model: an empty folder
    log(
      `soak: starting the stack (${options.handler}, ${LANGUAGES.length} languages, router ×${options.routers}, ${options.front} front)`,
    );
    // The bench's stack (a router cluster on one port, the front) at the deployed defaults: beam search, the
    // translation cache, the default response timeout and queue budget, outputs ending at </s>.
    stack = await startMeasuredStack({
      name: 'soak',
      workDir: work,
      languages: LANGUAGES,
      handler: options.handler,
      modelDir,
      layers: 'front',
      front: options.front,
      routerInstances: options.routers,
      batchSize: 32,
      maxBatchDelayMs: 10,
      batchPolicy: 'immediate',
      engineSharing: 'device',
      intraOpThreads: 0,
      maxNewTokens: 32,
      minNewTokens: 0,
      logLevel: 'info',
      responseTimeoutS: Number(ENV_DEFAULTS.RESPONSE_TIMEOUT_S),
      queueBudgetMs: Number(ENV_DEFAULTS.QUEUE_BUDGET_MS),
      cacheMaxBytes: Number(ENV_DEFAULTS.CACHE_MAX_BYTES),
      env: { NUM_BEAMS: '2' },
    });
    const roots = stack.processes.map((p) => p.pid);
    const url = stack.frontUrl!;
    const start = sampleProcesses(roots);
    log(table('processes at start (idle, before any request)', start));

    const startedAt = performance.now();
    const endAt = startedAt + options.durationS * 1000;
    /** This sampling interval's requests (the run's are the tally `drive` resolves with). */
    let window = new Tally();
    const load = drive({
      url: () => url,
      body: (i) => {
        const lang = LANGUAGES[i % LANGUAGES.length]!;
        const sentences = SENTENCES[lang]!;
        // One request in ten carries several texts (an array), as batch clients send.
        const text = i % 10 === 0 ? sentences : sentences[i % sentences.length]!;
        return translateBody(LANGUAGES[(i * 7 + 3) % LANGUAGES.length]!, text, lang);
      },
      concurrency: options.concurrency,
      signal: AbortSignal.timeout(options.durationS * 1000),
      deadlineMs: 120_000,
      onOutcome: (o) => window.add(o),
    });

    const intervals: Interval[] = [];
    let warm: ProcessSample[] | undefined;
    let previousAt = startedAt;
    log(
      `soak: ${options.concurrency} clients for ${options.durationS} s (warm-up ${options.warmupS} s), sampling every ${options.intervalS} s`,
    );
    log('     t   req/s  errors  p50 ms  p99 ms  queue  RSS MiB    fds');
    while (performance.now() < endAt) {
      await sleep(Math.min(options.intervalS * 1000, Math.max(0, endAt - performance.now())));
      const now = performance.now();
      const samples = sampleProcesses(roots);
      const row: Interval = {
        atS: (now - startedAt) / 1000,
        requests: window.sent,
        rps: window.sent / ((now - previousAt) / 1000),
        errors: window.sent - window.ok,
        p50Ms: window.okPercentile(50),
        p99Ms: window.okPercentile(99),
        maxQueueDepth: await queueDepth(stack.metrics).catch(() => -1),
        rssMiB: total(samples, 'rssMiB'),
        fds: total(samples, 'fds'),
        processes: samples,
      };
      intervals.push(row);
      previousAt = now;
      window = new Tally();
      log(
        `${row.atS.toFixed(0).padStart(6)} ${row.rps.toFixed(0).padStart(7)} ${String(row.errors).padStart(7)} ${row.p50Ms.toFixed(0).padStart(7)} ${row.p99Ms.toFixed(0).padStart(7)} ${String(row.maxQueueDepth).padStart(6)} ${row.rssMiB.toFixed(0).padStart(8)} ${String(row.fds).padStart(6)}`,
      );
      if (warm === undefined && row.atS >= options.warmupS) {
        warm = samples;
        log(table(`processes after the warm-up (${row.atS.toFixed(0)} s)`, warm));
      }
    }
    const tally = await load;
    const end = sampleProcesses(roots);
    warm ??= end;
    log(table('processes at the end', end));

    const died = warm.filter((w) => !end.some((e) => e.pid === w.pid)).map((w) => `${w.name} ${w.pid}`);
    const growth = warm.flatMap((w) => {
      const e = end.find((x) => x.pid === w.pid);
      return e
        ? [{ name: w.name, pid: w.pid, rssMiB: e.rssMiB - w.rssMiB, fds: e.fds - w.fds, files: e.files - w.files }]
        : [];
    });
    const problems: string[] = [];
    if (tally.errorCount > 0)
      problems.push(`${tally.errorCount} error answers: ${JSON.stringify(Object.fromEntries(tally.errors))}`);
    if (tally.unanswered > 0)
      problems.push(`${tally.unanswered} unanswered: ${JSON.stringify(Object.fromEntries(tally.lost))}`);
    if (died.length > 0) problems.push(`processes died: ${died.join(', ')}`);
    // Sockets come and go with the keep-alive connections of the load (bounded by its concurrency); every other
    // descriptor (files, pipes, event fds) must stay exactly where the warm-up left it.
    for (const g of growth) {
      if (g.files > 0)
        problems.push(`${g.name} ${g.pid}: ${g.files} more non-socket descriptors than after the warm-up`);
      if (g.fds > options.concurrency)
        problems.push(`${g.name} ${g.pid}: ${g.fds} more descriptors than after the warm-up`);
    }
    const half = intervals.filter((r) => r.atS >= options.durationS / 2);
    const [first, last] = [half[0], half.length >= 2 ? half.at(-1) : undefined];
    const perMinute = (from: number, to: number) => ((to - from) / (last!.atS - first!.atS)) * 60;
    const rssSlopeMiBPerMin = last ? perMinute(first.rssMiB, last.rssMiB) : 0;
    const depths = intervals.filter((r) => r.atS >= options.warmupS).map((r) => r.maxQueueDepth);
    log(
      `soak: ${tally.sent} requests in ${options.durationS} s (${(tally.sent / options.durationS).toFixed(0)}/s): ${tally.ok} ok, ` +
        `errors ${JSON.stringify(Object.fromEntries(tally.errors))}, unanswered ${tally.unanswered}; ` +
        `latency p50 ${tally.okPercentile(50).toFixed(0)} ms, p99 ${tally.okPercentile(99).toFixed(0)} ms; ` +
        `queue depth after warm-up max ${Math.max(0, ...depths)}`,
    );
    log(
      `soak: after warm-up → end: ${growth.map((g) => `${g.name} ${signed(g.rssMiB, 1)} MiB ${signed(g.fds)} fds (${signed(g.files)} non-socket)`).join('; ')}`,
    );
    // Per process: where a total trend comes from (a leak is one process climbing steadily).
    const slopes = (last ? first!.processes : []).flatMap((p) => {
      const q = last!.processes.find((x) => x.pid === p.pid);
      return q ? [`${p.name} ${signed(perMinute(p.rssMiB, q.rssMiB), 1)}`] : [];
    });
    log(
      `soak: RSS over the second half of the run, MiB/min: total ${signed(rssSlopeMiBPerMin, 1)} (${slopes.join('; ')})`,
    );
    log(
      problems.length === 0
        ? 'soak: OK — zero unexpected errors, nothing unanswered, descriptors flat'
        : `soak: FAILED\n  ${problems.join('\n  ')}`,
    );
    const report: SoakReport = {
      options,
      frontKind: stack.frontKind,
      tally: tally.toJSON(),
      start,
      warm,
      end,
      intervals,
      growth,
      rssSlopeMiBPerMin,
      died,
      ok: problems.length === 0,
      problems,
    };
    if (options.json) writeFileSync(options.json, `${JSON.stringify(report, null, 2)}\n`);
    return report;
  } finally {
    await stack?.stop();
    await stopAll();
    rmSync(work, { recursive: true, force: true });
  }
}

// Run as a program (the test imports `soak`).
if (process.argv[1] && path.resolve(process.argv[1]) === path.resolve(new URL(import.meta.url).pathname)) {
  let options: Options;
  try {
    options = parseOptions(process.argv.slice(2));
  } catch (err) {
    process.stderr.write(`soak: ${(err as Error).message}\n`);
    process.exit(2);
  }
  const interrupt = () => void stopAll().then(() => process.exit(130));
  process.on('SIGINT', interrupt);
  process.on('SIGTERM', interrupt);
  soak(options).then(
    (report) => process.exit(report.ok ? 0 : 1),
    async (err: unknown) => {
      process.stderr.write(`soak: ${err instanceof Error ? err.stack : String(err)}\n`);
      await stopAll();
      process.exit(1);
    },
  );
}

export { parseOptions, type Options as SoakOptions };
