/**
 * @module bench/scenarios/engine-layout — figure 12, the weight layout: does a model whose weights are inline in
 * its .onnx files (the published export: a 1.3 GB decoder file) run as fast as the same model with its weights in
 * `*.onnx_data` files? The engine edits the decoder graph at load on both (engine/graphs/onnx-wire.ts), so both should
 * take the fast path; this measures that they do and what it costs.
 *
 *     node --import tsx bench/scenarios/engine-layout.ts [inlineDir externalDir] [--pairs 3] [--tokens 16] [--threads 2]
 *
 * Without folders: the generated m2m100-418m model and its external-data twin (bench/lib/models: the same preset
 * and seed, so the same weights), built under MT_BENCH_MODELS_DIR (default ./models) when absent or stale.
 * Both engines are loaded side by side in one process (load time and the resident memory each adds, inline first),
 * then their `translate` calls are interleaved, alternating which goes first, on the same fresh sentences, so a
 * load swing on this shared host hits both alike: `--pairs` rounds at batch 64 and 4× as many at batch 1, 16
 * generated tokens per sentence, greedy. Reported: tokens/s medians, inline ÷ external (the median of the
 * per-round ratios, and the ratio of the medians), whether the two gave the same tokens for every sentence,
 * and whether each engine took the fast path (no decoder notes, appended cache and greedy top-2 outputs).
 * Prints a JSON summary on its last line. In `npm run bench` it runs in a fresh process (bench/probe.ts).
 */
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { resetPeakRss, statusBytes } from '../../harness/proc-tree.js';
import { TranslationEngine } from '../../model-server/engine/engine.js';
import type { DecoderOutputs } from '../../model-server/engine/session.js';
import type { BenchContext, Scenario } from '../lib/context.js';
import { ensureModel, EXTERNAL_TWIN, type BenchModel } from '../lib/models.js';
import { runProbe } from '../lib/probe-runner.js';
import { checkTarget, formatBytes, formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { engineRows } from './engine-probe.js';

const LAYOUTS = ['inline', 'external'] as const;
export type WeightLayout = (typeof LAYOUTS)[number];

export interface LayoutProbeRequest {
  kind: 'layout';
  inlineDir: string;
  externalDir: string;
  /** Batch sizes, in the order to run them. */
  batches: number[];
  /** Timed rounds (one call per layout) at each batch size; batch 1 gets 4× as many. */
  pairs: number;
  newTokens: number;
  /** onnxruntime intra-op threads per engine (0 = onnxruntime's default, all cores). */
  intraOpThreads: number;
}

export interface LayoutLoad {
  loadMs: number;
  /** Resident memory of the process after the load minus before it, both read after a full garbage collection. */
  rssAddedBytes: number;
  /** Peak resident memory during the load minus the resident memory before it (null off Linux). */
  peakRssAddedBytes: number | null;
  decoderKind: string;
  decoderOutputs: DecoderOutputs;
  /** Split decoder, appended cache entries and greedy top-2 outputs: the graph rewrites all made. */
  fastPath: boolean;
}

export interface LayoutBatchResult {
  batch: number;
  rounds: number;
  tokensPerS: Record<WeightLayout, number[]>;
  /** inline ÷ external tokens/s, per round. */
  ratios: number[];
  /** Sentences whose generated tokens were the same on both layouts, of `sentences`. */
  identical: number;
  sentences: number;
}

export interface LayoutProbeResult {
  loads: Record<WeightLayout, LayoutLoad>;
  batches: LayoutBatchResult[];
  loadAverage: { start: number[]; end: number[] };
  /** Resident memory of the process with both engines loaded, after every round. */
  rssEndBytes: number;
}

/** Linux's resident-memory high-water mark of this process (resetPeakRss starts it again). */
const peakRssBytes = (): number => statusBytes('self', 'VmHWM');

let gc: (() => void) | undefined;

/**
 * A full garbage collection: the inline load reads its decoder file into buffers that live until collected, and
 * without one the next load's figure would count their release against itself.
 */
function collectGarbage(): void {
  if (gc === undefined) {
    setFlagsFromString('--expose-gc');
    gc = runInNewContext('gc') as () => void;
  }
  gc();
}

async function loadEngine(
  modelDir: string,
  intraOpThreads: number,
): Promise<{ engine: TranslationEngine; load: LayoutLoad }> {
  collectGarbage();
  const rssBefore = process.memoryUsage.rss();
  const peakKnown = resetPeakRss();
  const started = performance.now();
  const engine = await TranslationEngine.load({ modelDir, dtype: 'fp32', intraOpThreads, device: { kind: 'cpu' } });
  const loadMs = performance.now() - started;
  const outputs = engine.decoderOutputs;
  const peakBytes = peakKnown ? peakRssBytes() : Number.NaN;
  collectGarbage();
  return {
    engine,
    load: {
      loadMs,
      rssAddedBytes: process.memoryUsage.rss() - rssBefore,
      peakRssAddedBytes: peakKnown ? peakBytes - rssBefore : null,
      decoderKind: engine.decoderKind,
      decoderOutputs: { ...outputs, notes: [...outputs.notes] },
      fastPath: outputs.notes.length === 0 && outputs.appendedCache !== null && outputs.greedyTop2 !== null,
    },
  };
}

/** The measurement, in this process: both engines loaded, calls interleaved. */
export async function runLayoutProbe(
  request: LayoutProbeRequest,
  log: (line: string) => void = () => {},
): Promise<LayoutProbeResult> {
  const start = os.loadavg();
  const engines = new Map<WeightLayout, TranslationEngine>();
  const loads = {} as Record<WeightLayout, LayoutLoad>;
  try {
    for (const layout of LAYOUTS) {
      const { engine, load } = await loadEngine(
        layout === 'inline' ? request.inlineDir : request.externalDir,
        request.intraOpThreads,
      );
      engines.set(layout, engine);
      loads[layout] = load;
      log(
        `${layout}: loaded in ${(load.loadMs / 1000).toFixed(1)} s, +${formatBytes(load.rssAddedBytes)} resident ` +
          `(peak +${formatBytes(load.peakRssAddedBytes ?? Number.NaN)}), ` +
          `${load.fastPath ? 'fast path' : `NOT the fast path: ${load.decoderOutputs.notes.join('; ')}`}`,
      );
    }
    const options = { numBeams: 1, minNewTokens: request.newTokens, maxNewTokens: request.newTokens };
    const batches: LayoutBatchResult[] = [];
    let next = 0;
    for (const batch of request.batches) {
      // One untimed call per engine at this batch size, on sentences no timed round uses.
      for (const engine of engines.values())
        await engine.translate(engineRows(batch, ['en'], 900_000 + batch), options);
      const rounds = batch === 1 ? 4 * request.pairs : request.pairs;
      const result: LayoutBatchResult = {
        batch,
        rounds,
        tokensPerS: { inline: [], external: [] },
        ratios: [],
        identical: 0,
        sentences: 0,
      };
      for (let r = 0; r < rounds; r++) {
        const rows = engineRows(batch, ['en'], next);
        next += batch;
        const tokens = {} as Record<WeightLayout, number[][]>;
        for (const layout of r % 2 === 0 ? LAYOUTS : [...LAYOUTS].reverse()) {
          const started = performance.now();
          const out = await engines.get(layout)!.translate(rows, options);
          const seconds = (performance.now() - started) / 1000;
          result.tokensPerS[layout].push(out.reduce((sum, t) => sum + t.generatedTokens, 0) / seconds);
          tokens[layout] = out.map((t) => t.tokenIds);
        }
        result.ratios.push(result.tokensPerS.inline[r]! / result.tokensPerS.external[r]!);
        result.sentences += rows.length;
        result.identical += tokens.inline.filter((ids, i) => ids.join() === tokens.external[i]!.join()).length;
      }
      const m = (layout: WeightLayout) => median(result.tokensPerS[layout]);
      log(
        `batch ${batch}, ${rounds} rounds: inline ${m('inline').toFixed(1)}, external ${m('external').toFixed(1)} ` +
          `tokens/s; inline ÷ external ${median(result.ratios).toFixed(3)} (median of rounds), ` +
          `${result.identical}/${result.sentences} sentences identical; load ${os.loadavg()[0]!.toFixed(2)}`,
      );
      batches.push(result);
    }
    return { loads, batches, loadAverage: { start, end: os.loadavg() }, rssEndBytes: process.memoryUsage.rss() };
  } finally {
    for (const engine of engines.values()) await engine.close();
  }
}

/** The model pair of a run: `model` and its external-data twin. */
function externalTwinOf(model: BenchModel): BenchModel {
  const twin = (EXTERNAL_TWIN as Partial<Record<BenchModel, BenchModel>>)[model];
  if (twin === undefined) throw new Error(`model ${model} has no external-data twin (bench/lib/models EXTERNAL_TWIN)`);
  return twin;
}

/** The report section of a measurement. */
export function layoutSection(result: LayoutProbeResult, request: LayoutProbeRequest, model: string): Section {
  const s = section(
    'engine-layout',
    '12. Engine on inline weights vs external data',
    `The translation engine on ${model} with its weights inline in the .onnx files (as published) and on the same ` +
      'model with them in *.onnx_data files (same seed, same weights), both loaded in one process, calls ' +
      `interleaved on the same sentences (${request.newTokens} generated tokens, greedy, fp32).`,
  );
  const rows = result.batches.map((b) => {
    const inline = median(b.tokensPerS.inline);
    const external = median(b.tokensPerS.external);
    return [
      b.batch,
      b.rounds,
      inline,
      external,
      formatRatio(median(b.ratios)),
      formatRatio(ratio(inline, external)),
      `${b.identical}/${b.sentences}`,
    ];
  });
  s.tables.push({
    title: 'Engine tokens/s by weight layout',
    columns: [
      'Batch',
      'Rounds',
      'Inline tokens/s',
      'External tokens/s',
      'Inline ÷ external (median of rounds)',
      'Ratio of medians',
      'Same tokens',
    ],
    rows,
    note: 'Each round runs both engines on the same sentences, alternating which goes first.',
  });
  s.tables.push({
    title: 'Loading (inline first, then external, in one process)',
    columns: ['Layout', 'Load s', 'Resident memory added', 'Peak during load', 'Fast path'],
    rows: LAYOUTS.map((layout) => {
      const load = result.loads[layout];
      return [
        layout,
        formatNumber(load.loadMs / 1000),
        formatBytes(load.rssAddedBytes),
        formatBytes(load.peakRssAddedBytes ?? Number.NaN),
        load.fastPath ? 'yes' : `no: ${load.decoderOutputs.notes.join('; ')}`,
      ];
    }),
  });
  for (const b of result.batches) {
    s.targets.push(
      checkTarget(`inline ÷ external engine tokens/s, batch ${b.batch}`, median(b.ratios), '>=', 0.95, '×'),
    );
  }
  s.targets.push(
    checkTarget('layouts on the fast path (of 2)', LAYOUTS.filter((l) => result.loads[l].fastPath).length, '>=', 2),
  );
  const [start, end] = [result.loadAverage.start[0]!, result.loadAverage.end[0]!];
  s.notes.push(
    `Load average ${start.toFixed(2)} at the start of the measurement, ${end.toFixed(2)} at its end; ` +
      `${formatBytes(result.rssEndBytes)} resident with both engines after the last round.`,
  );
  s.data = { request, ...result };
  return s;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const inlineDir = await ctx.model(settings.speedModel);
  const externalDir = await ctx.model(externalTwinOf(settings.speedModel));
  const request: LayoutProbeRequest = {
    kind: 'layout',
    inlineDir,
    externalDir,
    batches: [64, 1],
    pairs: settings.layoutPairs,
    newTokens: settings.newTokens,
    intraOpThreads: settings.intraOpThreads,
  };
  const result = await runProbe<LayoutProbeResult>(request, {
    workDir: ctx.workDir,
    label: 'engine-layout',
    timeoutMs: 30 * 60_000,
  });
  for (const b of result.batches)
    ctx.log(
      `weight layout, batch ${b.batch}: inline ÷ external ${median(b.ratios).toFixed(3)} over ${b.rounds} rounds`,
    );
  return layoutSection(result, request, settings.speedModel);
}

export const engineLayoutScenario: Scenario = {
  id: 'engine-layout',
  title: '12. Engine on inline weights vs external data',
  run,
};

async function main(argv: string[]): Promise<void> {
  const flag = (name: string, fallback: number) => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : fallback;
  };
  const positional = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
  const log = (line: string) => process.stderr.write(`${line}\n`);
  let [inlineDir, externalDir] = positional;
  if (inlineDir === undefined || externalDir === undefined) {
    const root = fileURLToPath(new URL('../..', import.meta.url));
    const modelsDir = path.resolve(process.env.MT_BENCH_MODELS_DIR ?? path.join(root, 'models'));
    inlineDir = await ensureModel('m2m100-418m', modelsDir, log);
    externalDir = await ensureModel(externalTwinOf('m2m100-418m'), modelsDir, log);
  }
  const request: LayoutProbeRequest = {
    kind: 'layout',
    inlineDir,
    externalDir,
    batches: [64, 1],
    pairs: flag('--pairs', 3),
    newTokens: flag('--tokens', 16),
    intraOpThreads: flag('--threads', 2),
  };
  const result = await runLayoutProbe(request, log);
  const summary = {
    request,
    loads: result.loads,
    loadAverage: result.loadAverage,
    rssEndBytes: result.rssEndBytes,
    batches: result.batches.map((b) => ({
      ...b,
      medians: { inline: median(b.tokensPerS.inline), external: median(b.tokensPerS.external) },
      inlineOverExternal: median(b.ratios),
    })),
  };
  console.log(JSON.stringify(summary));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  await main(process.argv.slice(2));
}
