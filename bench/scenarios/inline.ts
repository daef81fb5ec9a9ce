/**
 * @module bench/scenarios/inline — figure 16, what the word alignment costs: the same sentence mix as HTML paragraphs
 * with inline elements (`<b>`, `<a href>`: the sentence is translated whole and its rows ask for their alignment, one
 * teacher-forced decoder pass each after generation, engine/alignment.ts) against the same paragraphs without them
 * (no alignment asked), in sentences/s from 64 closed-loop clients straight to the model server.
 *
 * Arms alternate on one stack, each on sentences of its own (same length mix), so the translation cache never
 * answers; quick mode runs two rounds (A B, B A) and full mode four, and each arm's median is taken, so a slow
 * stretch of the shared machine does not fall on one arm alone.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop, type LoadResult } from '../lib/load-generator.js';
import { checkTarget, formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { sentence } from '../lib/workload.js';

const TARGET = 'de';
const SOURCE = 'en';
const CLIENTS = 64;

type ArmId = 'plain-html' | 'inline-html';

/** A paragraph of one sentence; with `inline`, its second word bold and its fourth and fifth a link. */
function paragraph(arm: ArmId, seq: number): string {
  const words = sentence({ 'plain-html': 600_000, 'inline-html': 700_000 }[arm] + seq).split(' ');
  if (arm === 'inline-html' && words.length >= 6) {
    words[1] = `<b>${words[1]}</b>`;
    words[3] = `<a href="/w/${seq}" class="x">${words[3]}`;
    words[4] = `${words[4]}</a>`;
  }
  return `<p class="lead">${words.join(' ')}</p>`;
}

interface Arm {
  id: ArmId;
  load: LoadResult;
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length / 2;
  return sorted.length % 2 === 1 ? sorted[Math.floor(mid)]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'inline',
    '16. Inline markup: the word alignment against none',
    `The same sentence mix as HTML paragraphs with inline elements (a bold word and a link: each sentence translated whole, ` +
      `its row asking for its word alignment) and without them (no alignment asked), from ${CLIENTS} closed-loop clients, ` +
      'straight to the model server, one language.',
  );
  const model = settings.mode === 'smoke' ? 'tiny' : 'bench-mid';
  const stack = await startRunStack(ctx, {
    name: 'inline',
    modelDir: await ctx.model(model),
    languages: [TARGET],
    layers: 'model-server',
    // Rows end at their own cap (2 × source tokens + 10), as in figure 13.
    maxNewTokens: 400,
    minNewTokens: 0,
  });
  const windowMs = settings.mode === 'full' ? 40_000 : settings.mode === 'quick' ? 12_000 : 2_000;
  const order: ArmId[] =
    settings.mode === 'full'
      ? [
          'plain-html',
          'inline-html',
          'inline-html',
          'plain-html',
          'plain-html',
          'inline-html',
          'inline-html',
          'plain-html',
        ]
      : ['plain-html', 'inline-html', 'inline-html', 'plain-html'];
  const arms: Arm[] = [];
  try {
    for (const [round, id] of order.entries()) {
      if (ctx.signal.aborted) break;
      const load = await runClosedLoop({
        origin: stack.inference,
        concurrency: CLIENTS,
        request: (seq) => ({
          path: `/predictions/${TARGET}`,
          body: JSON.stringify({ src_lang: SOURCE, src_text: paragraph(id, round * 10_000 + seq), format: 'html' }),
          units: 1,
        }),
        warmupMs: Math.min(5_000, windowMs / 2),
        warmupPerClient: 1,
        minWindowMs: windowMs,
        minWindowCompletions: CLIENTS,
        wholeRounds: true,
        onWindowEnd: 'drain',
        maxTotalMs: 10 * windowMs + 120_000,
        signal: ctx.signal,
      });
      arms.push({ id, load });
      ctx.log(`inline ${id}: ${load.unitsPerS.toFixed(1)} sentences/s`);
    }
  } finally {
    await stack.stop();
  }
  const rate = (id: ArmId) => median(arms.filter((a) => a.id === id).map((a) => a.load.unitsPerS));
  s.tables.push({
    title: 'Sentences/s with and without inline markup, each round in the order run',
    columns: ['Request', 'sentences/s', 'p50 ms', 'p99 ms', 'failed'],
    rows: arms.map((a) => [a.id, a.load.unitsPerS, a.load.latency.p50, a.load.latency.p99, a.load.failed]),
  });
  const ratio = rate('inline-html') / rate('plain-html');
  s.targets.push(
    checkTarget('inline markup (alignment) ÷ none, median sentences/s at concurrency 64', ratio, '>=', 0.9, '×'),
  );
  s.notes.push(`Paragraphs with inline markup served ${formatRatio(ratio)} the sentences/s of the same without.`);
  s.data = { arms: arms.map((a) => ({ id: a.id, unitsPerS: a.load.unitsPerS })), model };
  return s;
}

export const inlineScenario: Scenario = {
  id: 'inline',
  title: '16. Inline markup: the word alignment against none',
  run,
};
