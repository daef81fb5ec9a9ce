/**
 * @module bench/scenarios/documents — figure 8, documents: (a) paragraphs of mixed lengths translated as
 * sentence rows (the default: the model server cuts each text into sentences, one engine row each) against the
 * whole paragraph as one row (`split: "none"`), sentences/s, generated tokens/s and latency; (b) fairness: the p50
 * of single-sentence requests (one client, closed loop) with a 500-sentence document in flight, against without.
 *
 * Output length: every row generates until its source-length cap (2 × its tokens + 10; the random weights never
 * say `</s>` first), under MAX_NEW_TOKENS 400, so a paragraph row and its sentence rows generate about the same
 * number of tokens and the two arms do comparable work. Generated tokens are read from the engine's
 * `mt_engine_step_rows_total` (one token per row per decoder run). Straight to the model server (:9999), where the
 * sentence splitting happens; `bench-mid` model (see figure 7 for why).
 */
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop, type LoadResult } from '../lib/load-generator.js';
import { scrape, total } from '../lib/metrics.js';
import { checkTarget, formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { sentence } from '../lib/workload.js';

const TARGET = 'en';
const SOURCE = 'de';
/** Sentences per paragraph, cycled: a short reply to a long section. */
const PARAGRAPH_SENTENCES = [3, 5, 8, 12] as const;
const DOCUMENT_SENTENCES = 500;

function paragraph(i: number): { text: string; sentences: number } {
  const n = PARAGRAPH_SENTENCES[i % PARAGRAPH_SENTENCES.length]!;
  const text = Array.from({ length: n }, (_, k) => sentence(i * 13 + k)).join(' ');
  return { text, sentences: n };
}

interface Arm {
  label: string;
  load: LoadResult;
  tokensPerS: number;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'documents',
    '8. Documents: sentence rows, and fairness to single sentences',
    `Paragraphs of ${PARAGRAPH_SENTENCES.join(', ')} sentences (cycled) from 8 closed-loop clients, as sentence rows (default) and as one row each (split "none"); ` +
      `then one client sending single sentences, alone and with a ${DOCUMENT_SENTENCES}-sentence document in flight. Straight to the model server, one language.`,
  );
  const model = settings.mode === 'smoke' ? 'tiny' : 'bench-mid';
  const modelDir = await ctx.model(model);
  const stack = await startRunStack(ctx, {
    name: 'documents',
    modelDir,
    languages: [TARGET],
    layers: 'model-server',
    maxNewTokens: 400,
    minNewTokens: 0,
  });
  const windowMs = settings.mode === 'full' ? 40_000 : settings.mode === 'quick' ? 12_000 : 2_000;
  const warmupMs = Math.min(5_000, windowMs / 2);
  const metricsUrl = `${stack.metrics}/metrics`;
  const generated = async () => total(await scrape(metricsUrl), 'mt_engine_step_rows_total');
  const origin = stack.inference;
  const post = (body: Record<string, unknown>, units: number) => ({
    path: `/predictions/${TARGET}`,
    body: JSON.stringify({ src_lang: SOURCE, ...body }),
    units,
  });
  const arms: Arm[] = [];
  let alone: LoadResult | undefined;
  let withDocument: LoadResult | undefined;
  try {
    for (const split of ['sentences', 'none'] as const) {
      if (ctx.signal.aborted) break;
      let opened = Promise.resolve(0);
      let closed = Promise.resolve(0);
      const load = await runClosedLoop({
        origin,
        concurrency: 8,
        request: (seq) => {
          const p = paragraph(seq);
          return post({ src_text: p.text, split }, p.sentences);
        },
        warmupMs,
        warmupPerClient: 1,
        minWindowMs: windowMs,
        minWindowCompletions: 16,
        onWindowEnd: 'drain',
        maxTotalMs: 10 * windowMs + 120_000,
        signal: ctx.signal,
        onWindowOpen: () => (opened = generated()),
        onWindowClose: () => (closed = generated()),
      });
      const tokens = (await closed) - (await opened);
      const label = split === 'sentences' ? 'sentence rows (default)' : 'whole paragraph as one row';
      arms.push({ label, load, tokensPerS: tokens / (load.windowMs / 1000) });
      ctx.log(
        `documents ${label}: ${load.unitsPerS.toFixed(1)} sentences/s, p50 ${load.latency.p50.toFixed(0)} ms, ${(tokens / (load.windowMs / 1000)).toFixed(0)} tokens/s`,
      );
    }
    const single = () =>
      runClosedLoop({
        origin,
        concurrency: 1,
        request: (seq) => post({ src_text: sentence(100_000 + seq) }, 1),
        warmupMs: 1_000,
        warmupPerClient: 1,
        minWindowMs: windowMs,
        minWindowCompletions: 5,
        onWindowEnd: 'drain',
        maxTotalMs: 10 * windowMs + 120_000,
        signal: ctx.signal,
      });
    alone = await single();
    // The document client re-sends its document whenever it is answered, so one is always in flight.
    const documentText = Array.from({ length: DOCUMENT_SENTENCES }, (_, k) => sentence(200_000 + k)).join(' ');
    const stopDocument = new AbortController();
    const documents = runClosedLoop({
      origin,
      concurrency: 1,
      request: () => post({ src_text: documentText }, DOCUMENT_SENTENCES),
      minWindowMs: 24 * 3_600_000,
      signal: stopDocument.signal,
    });
    // Let the document fill the engine before the single sentences start.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    withDocument = await single();
    stopDocument.abort();
    await documents;
  } finally {
    await stack.stop();
  }

  s.tables.push({
    title: 'Paragraphs: sentence rows vs the whole paragraph as one row',
    columns: ['Rows', 'sentences/s', 'generated tokens/s', 'p50 ms', 'p90 ms', 'p99 ms', 'failed'],
    rows: arms.map((a) => [
      a.label,
      a.load.unitsPerS,
      a.tokensPerS,
      a.load.latency.p50,
      a.load.latency.p90,
      a.load.latency.p99,
      a.load.failed,
    ]),
    note: 'p50/p90/p99: latency of one paragraph request. Generated tokens from mt_engine_step_rows_total over the window.',
  });
  const sentencesOverParagraph = arms.length === 2 ? arms[0]!.load.unitsPerS / arms[1]!.load.unitsPerS : Number.NaN;
  const ratio = alone && withDocument ? withDocument.latency.p50 / alone.latency.p50 : Number.NaN;
  s.tables.push({
    title: `Fairness: single sentences with a ${DOCUMENT_SENTENCES}-sentence document in flight`,
    columns: ['Single-sentence client', 'answers', 'p50 ms', 'p90 ms', 'p99 ms'],
    rows: [
      [
        'alone',
        alone?.ok ?? Number.NaN,
        alone?.latency.p50 ?? Number.NaN,
        alone?.latency.p90 ?? Number.NaN,
        alone?.latency.p99 ?? Number.NaN,
      ],
      [
        'with the document in flight',
        withDocument?.ok ?? Number.NaN,
        withDocument?.latency.p50 ?? Number.NaN,
        withDocument?.latency.p90 ?? Number.NaN,
        withDocument?.latency.p99 ?? Number.NaN,
      ],
    ],
    note: "The queue takes one job per waiting request in turn, so a single sentence leaves with the document's next sentence, not after all of them.",
  });
  s.targets.push(checkTarget('single-sentence p50 with a document in flight ÷ without', ratio, '<=', 2, '×'));
  s.notes.push(
    `Sentence rows served ${formatRatio(sentencesOverParagraph)} the sentences/s of whole-paragraph rows.`,
    "A single sentence that arrives while a document fills the engine starts with the next free slot (the fair queue), then shares decoder runs with the document's rows: on a CPU a step of 64 rows costs many times a step of one, which is what the ratio above measures.",
  );
  s.data = {
    arms: arms.map((a) => ({
      label: a.label,
      unitsPerS: a.load.unitsPerS,
      tokensPerS: a.tokensPerS,
      latency: a.load.latency,
    })),
    alone: alone?.latency,
    withDocument: withDocument?.latency,
    ratio,
    model,
  };
  return s;
}

export const documentsScenario: Scenario = {
  id: 'documents',
  title: '8. Documents: sentence rows, and fairness to single sentences',
  run,
};
