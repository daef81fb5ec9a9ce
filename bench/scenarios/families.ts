/**
 * @module bench/scenarios/families — the same pair, en→de, served by a Marian opus-mt-en-de stand-in (~74M
 * parameters, 6+6 layers of 512) and by the m2m100-418m stand-in (~484M, 12+12 of 1024): what a pair-specific model
 * buys. Each model is served alone by a fresh model server (one language, `de`), every request from `en`, at
 * concurrency 1 (latency) and at the load figure's highest concurrency (throughput); the two arms alternate order
 * across repeats, medians reported. Random weights, fixed output length: the figures are the models' compute.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import type { BenchModel } from '../lib/models.js';
import { startRunStack } from '../lib/stack.js';
import { formatRatio, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { measure } from './load.js';

interface Arm {
  label: string;
  model: BenchModel;
}

interface ArmResult {
  sentencesPerS: number;
  p50Ms: number;
  loadedSentencesPerS: number;
  loadedP50Ms: number;
}

async function measureArm(ctx: BenchContext, arm: Arm, concurrency: number, repeat: number): Promise<ArmResult> {
  const stack = await startRunStack(ctx, {
    name: `families-${arm.model}-${repeat}`,
    modelDir: await ctx.model(arm.model),
    languages: ['de'],
    layers: 'model-server',
  });
  try {
    const at = async (c: number) =>
      measure(ctx, {
        origin: stack.inference,
        entry: 'model-server',
        concurrency: c,
        targets: ['de'],
        sources: ['en'],
        metricsUrl: stack.metrics,
        drain: true,
        label: `families ${arm.label} c=${c}`,
      });
    const one = await at(1);
    const loaded = await at(concurrency);
    return {
      sentencesPerS: one.sentencesPerS,
      p50Ms: one.load.latency.p50,
      loadedSentencesPerS: loaded.sentencesPerS,
      loadedP50Ms: loaded.load.latency.p50,
    };
  } finally {
    await stack.stop();
  }
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const smoke = settings.mode === 'smoke';
  const arms: Arm[] = [
    { label: 'opus-mt-en-de (Marian)', model: smoke ? 'tiny-opus-mt-en-de' : 'opus-mt-en-de' },
    { label: 'm2m100-418m', model: settings.speedModel },
  ];
  const concurrency = Math.max(...settings.servingConcurrencies);
  const s = section(
    'families',
    'Families: opus-mt-en-de vs m2m100-418m on the same pair',
    `en→de only, one language (de) registered on a fresh model server per arm, ${settings.newTokens} tokens per sentence, ` +
      `at concurrency 1 and ${concurrency}; arms alternate order across ${settings.loadRepeats} repeat(s), medians.`,
  );
  const samples = new Map<string, ArmResult[]>();
  for (let r = 0; r < settings.loadRepeats; r++) {
    for (const arm of r % 2 === 0 ? arms : [...arms].reverse()) {
      if (ctx.signal.aborted) break;
      ctx.log(`families: ${arm.label}`);
      samples.set(arm.label, [...(samples.get(arm.label) ?? []), await measureArm(ctx, arm, concurrency, r)]);
    }
  }
  const medians = arms.map((arm) => {
    const list = samples.get(arm.label) ?? [];
    const m = (key: keyof ArmResult) => median(list.map((x) => x[key]));
    return {
      ...arm,
      sentencesPerS: m('sentencesPerS'),
      p50Ms: m('p50Ms'),
      loadedSentencesPerS: m('loadedSentencesPerS'),
      loadedP50Ms: m('loadedP50Ms'),
    };
  });
  const [marian, m2m] = medians as [(typeof medians)[0], (typeof medians)[0]];
  s.tables.push({
    title: 'en→de served by each model',
    columns: ['Model', 'sentences/s at 1', 'p50 ms at 1', `sentences/s at ${concurrency}`, `p50 ms at ${concurrency}`],
    rows: medians.map((a) => [a.label, a.sentencesPerS, a.p50Ms, a.loadedSentencesPerS, a.loadedP50Ms]),
  });
  s.notes.push(
    `opus-mt-en-de serves ${formatRatio(ratio(marian.loadedSentencesPerS, m2m.loadedSentencesPerS))} the sentences/s of m2m100-418m at concurrency ${concurrency}, ` +
      `at ${formatRatio(ratio(marian.p50Ms, m2m.p50Ms))} its p50 latency alone.`,
  );
  s.data = { arms: medians, concurrency };
  return s;
}

export const familiesScenario: Scenario = {
  id: 'families',
  title: 'Families: opus-mt-en-de vs m2m100-418m on the same pair',
  run,
};
