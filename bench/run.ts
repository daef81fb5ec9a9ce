/**
 * @module bench/run — `npm run bench [-- --quick] [--only engine,serving,…]`: runs the benchmark scenarios of
 * issue 5 side by side on this machine, prints the report and writes it as JSON and Markdown to bench/results/.
 *
 * Every figure is a ratio of two measurements taken in the same run (fresh processes, alternating order,
 * medians of repeats): the machine is shared and noisy, so an absolute time alone would mean nothing.
 * Every process the run starts is stopped at the end, on failure and on Ctrl-C (harness/process-registry).
 */
import { mkdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { intraOpThreadCount } from '../model-server/engine/engine-options.js';
import { settingsFor, type BenchContext, type Scenario } from './lib/context.js';
import { ensureModel, type BenchModel } from './lib/models.js';
import { installCleanup, profileProcessesInto, stopAll, tempDir } from '../harness/process-registry.js';
import { machineInfo, renderMarkdown, writeReport, type Report, type Section } from './lib/report.js';
import { SCENARIOS } from './scenarios/index.js';

const root = fileURLToPath(new URL('..', import.meta.url));

const USAGE = `usage: npm run bench -- [--quick] [--only ${SCENARIOS.map((s) => s.id).join(',')}] [--out DIR] [--keep-work]

  --quick        every figure in ≈ 30 min: one repeat, one-cycle windows, shared measurements (full: ≈ 2 h)
  --smoke        every code path on the tiny model in a minute or two (numbers mean nothing; for development)
  --only LIST    run only these scenarios (comma-separated); the report is named after them
  --out DIR      where to write the report (default bench/results)
  --keep-work    keep the temp folder with every server log and model store
  --profile      every process writes a V8 CPU profile (--cpu-prof) into DIR/profiles/<report name>/
  --new-tokens N generated tokens per sentence for every system (default 16; the report name gets -tokN)
Environment: INTRA_OP_THREADS (onnxruntime threads per engine, default 0 = every core this process may use),
             MT_BENCH_MODELS_DIR (where bench models are built and reused, default ./models)`;

function parseCli() {
  const { values } = parseArgs({
    options: {
      quick: { type: 'boolean', default: false },
      smoke: { type: 'boolean', default: false },
      only: { type: 'string' },
      out: { type: 'string' },
      'keep-work': { type: 'boolean', default: false },
      profile: { type: 'boolean', default: false },
      'new-tokens': { type: 'string' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    allowPositionals: false,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const known = new Map(SCENARIOS.map((s) => [s.id, s]));
  let scenarios: Scenario[] = SCENARIOS;
  if (values.only) {
    const ids = values.only
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    const unknown = ids.filter((id) => !known.has(id));
    if (unknown.length > 0)
      throw new Error(`unknown scenario(s) ${unknown.join(', ')}; known: ${[...known.keys()].join(', ')}`);
    scenarios = SCENARIOS.filter((s) => ids.includes(s.id)); // keep the canonical order
  }
  const threads = Number(process.env.INTRA_OP_THREADS ?? '0');
  if (!(Number.isInteger(threads) && threads >= 0))
    throw new Error(`INTRA_OP_THREADS must be a non-negative integer, got ${process.env.INTRA_OP_THREADS}`);
  const newTokens = values['new-tokens'] === undefined ? undefined : Number(values['new-tokens']);
  if (newTokens !== undefined && !(Number.isInteger(newTokens) && newTokens >= 1 && newTokens <= 200))
    throw new Error(`--new-tokens must be an integer in 1..200, got ${values['new-tokens']}`);
  return {
    newTokens,
    mode: values.smoke ? ('smoke' as const) : values.quick ? ('quick' as const) : ('full' as const),
    scenarios,
    only: values.only !== undefined,
    outDir: path.resolve(values.out ?? path.join(root, 'bench', 'results')),
    keepWork: values['keep-work'] ?? false,
    profile: values.profile ?? false,
    // 0 resolved here, as the server resolves it (engine-options.ts intraOpThreadCount), so that every arm — the
    // engine, the MatMul ceiling, the transformers.js baseline — states the same count to onnxruntime.
    intraOpThreads: intraOpThreadCount(threads),
  };
}

async function main(): Promise<void> {
  const cli = parseCli();
  const settings = { ...settingsFor(cli.mode, cli.intraOpThreads), ...(cli.newTokens && { newTokens: cli.newTokens }) };
  const work = tempDir('run');
  const abort = new AbortController();
  const modelsDir = path.resolve(process.env.MT_BENCH_MODELS_DIR ?? path.join(root, 'models'));
  const log = (line: string) => process.stderr.write(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}\n`);
  const command = `npm run bench --${process.argv
    .slice(2)
    .map((a) => ` ${a}`)
    .join('')}`.replace(/ --$/, '');
  const tokens = cli.newTokens === undefined ? '' : `-tok${cli.newTokens}`;
  const reportName = cli.only
    ? `only-${cli.scenarios.map((s) => s.id).join('-')}-${cli.mode}${tokens}`
    : `latest-${cli.mode}${tokens}`;

  const report: Report = {
    title: 'mt-serve benchmark',
    command,
    mode: cli.mode,
    startedAt: new Date().toISOString(),
    machine: machineInfo(),
    settings: {
      model:
        settings.speedModel === 'm2m100-418m'
          ? 'm2m100-418m (generated: real M2M100-418M shapes, random weights)'
          : settings.speedModel,
      newTokensPerSentence: settings.newTokens,
      search: 'greedy',
      batchSize: settings.batchSize,
      maxBatchDelayMs: settings.maxBatchDelayMs,
      intraOpThreads: settings.intraOpThreads,
    },
    sections: [],
  };
  const finish = () => {
    report.finishedAt = new Date().toISOString();
    report.machine.loadAverageAtEnd = os.loadavg();
    const files = writeReport(report, cli.outDir, reportName);
    return files;
  };

  // Ctrl-C: stop the load, let the current scenario return, write what was measured, stop every server.
  installCleanup(async () => {
    abort.abort();
    try {
      const files = finish();
      log(`partial report written to ${files.markdown}`);
    } catch {
      // nothing to add: the servers are stopped next either way
    }
    if (!cli.keepWork) work.remove();
  });

  const models = new Map<BenchModel, Promise<string>>();
  const ctx: BenchContext = {
    shared: new Map(),
    settings,
    root,
    workDir: work.dir,
    signal: abort.signal,
    log,
    model: (name) => {
      let p = models.get(name);
      if (!p) {
        p = ensureModel(name, modelsDir, log);
        models.set(name, p);
        p.catch(() => models.delete(name)); // a failed build may be retried by the next scenario
      }
      return p;
    },
  };

  if (cli.profile) {
    const dir = path.join(cli.outDir, 'profiles', reportName);
    mkdirSync(dir, { recursive: true });
    profileProcessesInto(dir);
    log(`CPU profiles (*.cpuprofile, gitignored) go to ${dir}`);
  }
  log(`${cli.mode} run of ${cli.scenarios.map((s) => s.id).join(', ')}; work folder ${work.dir}`);
  try {
    for (const scenario of cli.scenarios) {
      if (abort.signal.aborted) break;
      const started = Date.now();
      log(`── ${scenario.title}`);
      let result: Section;
      try {
        result = await scenario.run(ctx);
      } catch (err) {
        log(`${scenario.id} failed: ${(err as Error).message.split('\n')[0]}`);
        result = {
          id: scenario.id,
          title: scenario.title,
          description: '',
          tables: [],
          targets: [],
          notes: [],
          data: {},
          error: (err as Error).stack ?? String(err),
        };
      } finally {
        await stopAll(); // nothing a scenario started survives it
      }
      result.durationS = (Date.now() - started) / 1000;
      report.sections.push(result);
      finish(); // a later crash still leaves every finished scenario on disk
    }
  } finally {
    await stopAll();
  }
  const files = finish();
  process.stdout.write(`\n${renderMarkdown(report)}\n`);
  log(`report: ${files.markdown} and ${files.json}`);
  if (cli.keepWork) log(`work folder kept: ${work.dir}`);
  else rmSync(work.dir, { recursive: true, force: true });
  const failed = report.sections.filter((s) => s.error).length;
  process.exitCode = failed > 0 ? 1 : 0;
}

main().catch(async (err: unknown) => {
  process.stderr.write(`bench: ${(err as Error).stack ?? err}\n`);
  await stopAll();
  process.exit(1);
});
