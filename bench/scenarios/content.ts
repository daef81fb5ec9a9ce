/**
 * @module bench/scenarios/content — figure 13, what users send beside plain text: the same sentences as HTML
 * (`format: "html"`, each in a block of markup with attributes and a comment) and with a 100-term glossary
 * (`glossary`, every sentence holding some of its terms, enforced while decoding), against plain text, in
 * sentences/s from 64 closed-loop clients. Straight to the model server (where markup is parsed and terms found).
 *
 * Arms run one after another on one stack, each on its own sentences (same length mix), so the translation cache
 * never answers; full mode runs three rounds in rotating order and takes each arm's median, so a slow stretch of
 * the machine does not fall on one arm. Rows end at their own length (the source-length cap: the generated models
 * never write `</s>` first), and a glossary row's cap grows by its terms' tokens, so the glossary arm generates more
 * tokens per sentence than plain text: the report gives generated tokens/s beside sentences/s.
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop, type LoadResult } from '../lib/load-generator.js';
import { scrape, total } from '../lib/metrics.js';
import { checkTarget, formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { sentence } from '../lib/workload.js';

const TARGET = 'de';
const SOURCE = 'en';
const CLIENTS = 64;
const GLOSSARY_TERMS = 100;

type ArmId = 'plain' | 'html' | 'glossary';

/**
 * A glossary of ten of the workload's own words (so each sentence holds about two of its terms), each to another
 * of its words, and ninety terms no sentence holds: what a product glossary looks like against one text.
 */
function glossary(): Record<string, string> {
  const words = [
    ...new Set(Array.from({ length: 400 }, (_, i) => sentence(i).slice(0, -1).toLowerCase().split(' ')).flat()),
  ]
    .filter((w) => w.length > 3)
    .sort();
  const entries: Record<string, string> = {};
  for (let i = 0; i < 10; i++) entries[words[i * 3]!] = words[(i * 3 + 1) % words.length]!;
  for (let i = 0; Object.keys(entries).length < GLOSSARY_TERMS; i++) entries[`product${i}`] = `Produkt${i}`;
  return entries;
}

function body(arm: ArmId, seq: number, terms: Record<string, string>): Record<string, unknown> {
  const offset = { plain: 300_000, html: 400_000, glossary: 500_000 }[arm];
  const text = sentence(offset + seq);
  if (arm === 'html') {
    return {
      src_text: `<div class="post" id="p${seq}"><p class="lead">${text}</p><!-- ${seq} --></div>`,
      format: 'html',
    };
  }
  return arm === 'glossary' ? { src_text: text, glossary: terms } : { src_text: text };
}

interface Arm {
  id: ArmId;
  load: LoadResult;
  tokensPerS: number;
}

const ARMS: readonly ArmId[] = ['plain', 'html', 'glossary'];

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? Number.NaN;

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'content',
    '13. Markup and glossaries vs plain text',
    `The same sentence mix as plain text, as HTML (a block with attributes and a comment around each sentence) and with a ${GLOSSARY_TERMS}-term glossary, ` +
      `from ${CLIENTS} closed-loop clients, straight to the model server, one language.`,
  );
  const model = settings.mode === 'smoke' ? 'tiny' : 'bench-mid';
  const stack = await startRunStack(ctx, {
    name: 'content',
    modelDir: await ctx.model(model),
    languages: [TARGET],
    layers: 'model-server',
    // Each row ends at its own cap (2 × its source tokens + 10; the generated models never end a row first), as
    // outputs end at their own length in real traffic: a fixed length for every row would make plain text the one
    // arm whose rows all leave the batch together.
    maxNewTokens: 400,
    minNewTokens: 0,
  });
  const windowMs = settings.mode === 'full' ? 40_000 : settings.mode === 'quick' ? 12_000 : 2_000;
  const generated = async () => total(await scrape(`${stack.metrics}/metrics`), 'mt_engine_step_rows_total');
  const terms = glossary();
  const arms: Arm[] = [];
  const rounds = settings.mode === 'full' ? 3 : 1;
  try {
    for (let round = 0; round < rounds * ARMS.length; round++) {
      const id = ARMS[(round + Math.floor(round / ARMS.length)) % ARMS.length]!;
      if (ctx.signal.aborted) break;
      let opened = Promise.resolve(0);
      let closed = Promise.resolve(0);
      const load = await runClosedLoop({
        origin: stack.inference,
        concurrency: CLIENTS,
        request: (seq) => ({
          path: `/predictions/${TARGET}`,
          body: JSON.stringify({ src_lang: SOURCE, ...body(id, round * 10_000 + seq, terms) }),
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
        onWindowOpen: () => (opened = generated()),
        onWindowClose: () => (closed = generated()),
      });
      const tokensPerS = ((await closed) - (await opened)) / (load.windowMs / 1000);
      arms.push({ id, load, tokensPerS });
      ctx.log(`content ${id}: ${load.unitsPerS.toFixed(1)} sentences/s, ${tokensPerS.toFixed(0)} tokens/s`);
    }
  } finally {
    await stack.stop();
  }
  const rate = (id: ArmId) => median(arms.filter((a) => a.id === id).map((a) => a.load.unitsPerS));
  s.tables.push({
    title: 'Sentences/s by what the sentence came in, each round',
    columns: ['Request', 'sentences/s', 'generated tokens/s', 'p50 ms', 'p99 ms', 'failed'],
    rows: arms.map((a) => [
      a.id,
      a.load.unitsPerS,
      a.tokensPerS,
      a.load.latency.p50,
      a.load.latency.p99,
      a.load.failed,
    ]),
    note: 'Generated tokens from mt_engine_step_rows_total over the window (one token per row per decoder run).',
  });
  const html = rate('html') / rate('plain');
  const withGlossary = rate('glossary') / rate('plain');
  s.targets.push(checkTarget('HTML ÷ plain text, median sentences/s at concurrency 64', html, '>=', 0.8, '×'));
  s.targets.push(
    checkTarget(`${GLOSSARY_TERMS}-term glossary ÷ plain text, median sentences/s`, withGlossary, '>=', 0.8, '×'),
  );
  s.notes.push(
    `HTML served ${formatRatio(html)} and the glossary ${formatRatio(withGlossary)} the sentences/s of plain text.`,
  );
  s.data = { arms: arms.map((a) => ({ id: a.id, unitsPerS: a.load.unitsPerS, tokensPerS: a.tokensPerS })), model };
  return s;
}

export const contentScenario: Scenario = {
  id: 'content',
  title: '13. Markup and glossaries vs plain text',
  run,
};
