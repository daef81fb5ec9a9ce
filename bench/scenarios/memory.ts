/**
 * @module bench/scenarios/memory — figure 5, memory: the peak resident memory of every model-server process
 * (the frontend and all its workers, sampled from /proc every 250 ms from start through a load that keeps every
 * language busy) when serving 1 language, 14 languages with one engine per device (ENGINE_SHARING=device, the
 * default), and 14 languages with one engine per language (ENGINE_SHARING=language, TorchServe's layout).
 *
 * On m2m100-418m the per-language layout would need ~14 copies of ~2.4 GB of weights, more than this machine has,
 * so it is measured on `bench-mid` (see bench/lib/models), with the other two layouts beside it on the same
 * preset; the 1-vs-14 target is read on m2m100-418m. The router and the front hold no model and are not counted.
 *
 * The int8 arm: 1 language on m2m100-418m's q8 files (MODEL_DTYPE=q8) beside the same layout on fp32, same load.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import type { BenchModel } from '../lib/models.js';
import { RssSampler, type MemoryPeak } from '../../harness/proc-tree.js';
import { startRunStack } from '../lib/stack.js';
import { checkTarget, formatBytes, formatRatio, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { SEED_LANGUAGES } from '../lib/workload.js';
import { measure } from './load.js';

interface Layout {
  label: string;
  languages: readonly string[];
  sharing: 'device' | 'language';
  /** MODEL_DTYPE (default fp32). */
  dtype?: 'fp32' | 'q8';
}

const LAYOUTS: Layout[] = [
  { label: '1 language', languages: ['en'], sharing: 'device' },
  { label: '14 languages, one engine per device', languages: SEED_LANGUAGES, sharing: 'device' },
  { label: '14 languages, one engine per language', languages: SEED_LANGUAGES, sharing: 'language' },
];

/** 1 language on the q8 files: the int8 arm, read against LAYOUTS[0] on the same model. */
const Q8_LAYOUT: Layout = { label: '1 language, q8 weights', languages: ['en'], sharing: 'device', dtype: 'q8' };

/** The seed's spread of languages over GPUs 0–2 (setup_config.json); on a CPU-only host all fall back to the CPU. */
const SEED_DEVICES: Record<string, string> = {
  ko: '0',
  en: '0',
  zh: '0',
  es: '0',
  fr: '0',
  ru: '1',
  id: '1',
  ja: '1',
  vi: '1',
  de: '1',
  it: '2',
  hi: '2',
  ar: '2',
  pt: '2',
};

async function measureLayout(
  ctx: BenchContext,
  model: BenchModel,
  layout: Layout,
  repeat: number,
): Promise<MemoryPeak & { workers: number; sentencesPerS: number }> {
  const { settings } = ctx;
  const modelDir = await ctx.model(model);
  const sampler = new RssSampler();
  const stack = await startRunStack(ctx, {
    name: `memory-${model}-${layout.languages.length}-${layout.sharing}-${layout.dtype ?? 'fp32'}-${repeat}`,
    modelDtype: layout.dtype ?? 'fp32',
    modelDir,
    languages: layout.languages,
    devices: SEED_DEVICES,
    layers: 'model-server',
    engineSharing: layout.sharing,
    // Loading 14 engines one after another takes a while on 2 cores.
    startTimeoutMs: 20 * 60_000,
  }).catch((err: unknown) => {
    sampler.stop();
    throw err;
  });
  // Sampling starts once the pid is known: the load phase (engines loaded, activations, KV caches) is the peak.
  for (const p of stack.processes) sampler.addRoot(p.pid);
  sampler.sample();
  try {
    // Every language busy at once, so every engine allocates its working memory.
    const load = await measure(ctx, {
      origin: stack.inference,
      entry: 'model-server',
      concurrency: Math.max(layout.languages.length, 16),
      targets: layout.languages,
      drain: false,
      window: { warmupMs: 0, minWindowMs: settings.memoryWindowMs, cyclesPerClient: 1 },
      label: `memory ${model} ${layout.label}`,
    });
    const peak = sampler.stop();
    return { ...peak, workers: peak.peakProcesses - 1, sentencesPerS: load.sentencesPerS };
  } finally {
    sampler.stop();
    await stack.stop();
  }
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'memory',
    '5. Memory: 14 languages on one engine per device vs one engine per language',
    'Peak summed RSS (and PSS) of the model server and all its workers, sampled every 250 ms from start through a load that keeps every served language busy. ' +
      'setup_config.json spreads the 14 languages over devices 0–2 as in the seed; with no GPU they all fall back to the CPU, i.e. one device.',
  );
  const big = settings.speedModel;
  const plan: { model: BenchModel; layouts: Layout[] }[] = [
    { model: big, layouts: [...LAYOUTS.slice(0, 2), Q8_LAYOUT] },
    { model: settings.perLanguageModel, layouts: LAYOUTS },
  ];
  const repeats = settings.loadRepeats;
  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  const peaks = new Map<string, number>();
  for (const { model, layouts } of plan) {
    const samples = new Map<string, (MemoryPeak & { workers: number; sentencesPerS: number })[]>();
    for (let r = 0; r < repeats; r++) {
      const order = r % 2 === 0 ? layouts : [...layouts].reverse();
      for (const layout of order) {
        if (ctx.signal.aborted) break;
        ctx.log(`memory ${model}: ${layout.label}`);
        const m = await measureLayout(ctx, model, layout, r);
        samples.set(layout.label, [...(samples.get(layout.label) ?? []), m]);
      }
    }
    const one = median((samples.get(LAYOUTS[0]!.label) ?? []).map((m) => m.peakRssBytes));
    for (const layout of layouts) {
      const ms = samples.get(layout.label) ?? [];
      const rss = median(ms.map((m) => m.peakRssBytes));
      const pss = median(ms.map((m) => m.peakPssBytes));
      const workers = median(ms.map((m) => m.workers));
      peaks.set(`${model}:${layout.label}`, rss);
      rows.push([model, layout.label, workers, formatBytes(rss), formatBytes(pss), formatRatio(ratio(rss, one))]);
      data.push({
        model,
        layout: layout.label,
        engineSharing: layout.sharing,
        languages: layout.languages.length,
        workers,
        peakRssBytes: rss,
        peakPssBytes: pss,
        vsOneLanguage: ratio(rss, one),
      });
    }
  }
  s.tables.push({
    title: 'Peak memory of the model server and its workers',
    columns: ['Model', 'Layout', 'worker processes', 'peak RSS', 'peak PSS', 'RSS vs 1 language'],
    rows,
    note: "bench-mid: d_model 256, 6+6 layers, FFN 1024, M2M100's 128 112-token vocabulary, ~45 M parameters — the preset on which 14 per-language copies fit this machine; m2m100-418m per language would need ~14 × 2.4 GB.",
  });
  const shared = ratio(
    peaks.get(`${big}:${LAYOUTS[1]!.label}`) ?? Number.NaN,
    peaks.get(`${big}:${LAYOUTS[0]!.label}`) ?? Number.NaN,
  );
  s.targets.push(
    checkTarget(`14 languages ÷ 1 language peak RSS, ${big}, one engine per device`, shared, '<=', 1.25, '×'),
  );
  const q8 = ratio(
    peaks.get(`${big}:${Q8_LAYOUT.label}`) ?? Number.NaN,
    peaks.get(`${big}:${LAYOUTS[0]!.label}`) ?? Number.NaN,
  );
  s.targets.push(checkTarget(`q8 ÷ fp32 peak RSS, ${big}, 1 language`, q8, '<=', 0.4, '×'));
  const small = settings.perLanguageModel;
  const perLanguage = ratio(
    peaks.get(`${small}:${LAYOUTS[2]!.label}`) ?? Number.NaN,
    peaks.get(`${small}:${LAYOUTS[1]!.label}`) ?? Number.NaN,
  );
  s.notes.push(
    `On ${small}, one engine per language costs ${formatRatio(perLanguage)} the memory of one engine per device for the same 14 languages.`,
  );
  s.data = { rows: data };
  return s;
}

export const memoryScenario: Scenario = {
  id: 'memory',
  title: '5. Memory: 14 languages on one engine per device vs one engine per language',
  run,
};
