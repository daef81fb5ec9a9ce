/**
 * @module bench/scenarios/office — figure 14, Office files: a 20-page .docx against the same text as a plain .txt,
 * 64 clients each uploading one to LibreTranslate's `/translate_file` (which answers once the file is translated)
 * through the front at once, sentences/s: every sentence over first upload to last answer. What the .docx adds: its
 * upload unzipped and planned in the router's office thread, its paragraphs sent as plain-text batches instead of one
 * text, the file rebuilt and zipped again. Every document is new text (no cache hit), and the two arms share no
 * sentence.
 *
 * The text: 20 pages of 5 paragraphs of 4 sentences (bench/lib/workload.ts `sentence`), each paragraph cut into three
 * runs as Word cuts one at a change of formatting, plus the fixture's header, footer, footnote, comment, text box and
 * table (harness/office-files.ts `docxFile`); the .txt is the .docx's units, one paragraph each, between blank lines.
 * A warm-up of both kinds comes first, unmeasured, so that what a fresh stack pays once falls on neither arm.
 *
 * Why a count and not a closed-loop window: the routers translate 4 documents at a time and queue the rest, so a
 * document answered in steady state has waited behind ~60 others (~5 minutes), and a run only reaches that after one
 * whole cycle of every client. A window opened 10 s in held the first 8–12 answers instead (p50 33–48 s), whose
 * rate moved by which documents happened to finish together. 64 uploads at once keep every slot busy until the
 * last few documents, the same for both arms.
 */
import { docxFile } from '../../harness/office-files.js';
import { planOffice } from '../../model-server/text/office/office-document.js';
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop, type LoadResult } from '../lib/load-generator.js';
import { checkTarget, formatRatio, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { sentence } from '../lib/workload.js';

const TARGET = 'en';
const SOURCE = 'de';
const PAGES = 20;
const PARAGRAPHS_PER_PAGE = 5;
const SENTENCES_PER_PARAGRAPH = 4;
const CONCURRENCY = 64;
/** Sentences a document's fixed parts add (harness/office-files.ts: "Name:", "Page", the header…): one per unit. */
const FIXED_UNITS = 9;
const BODY_SENTENCES = PAGES * PARAGRAPHS_PER_PAGE * SENTENCES_PER_PARAGRAPH;
/** Where the .txt arm's sentences start: far from the .docx arm's. */
const TXT_OFFSET = 50_000_000;
/** Where the warm-up's sentences start: far from both arms'. */
const WARM_UP_OFFSET = 90_000_000;

/** Document `seq`'s .docx of `pages`: its own sentences, each paragraph in three runs. */
function document(seq: number, offset: number, pages = PAGES): Uint8Array {
  const first = offset + seq * BODY_SENTENCES;
  const body = Array.from({ length: pages * PARAGRAPHS_PER_PAGE }, (_, p) => {
    const words = Array.from({ length: SENTENCES_PER_PARAGRAPH }, (_, k) =>
      sentence(first + p * SENTENCES_PER_PARAGRAPH + k),
    )
      .join(' ')
      .split(' ');
    const third = Math.ceil(words.length / 3);
    return [words.slice(0, third), words.slice(third, 2 * third), words.slice(2 * third)].map(
      (run, i) => (i > 0 ? ' ' : '') + run.join(' '),
    );
  });
  return docxFile(body);
}

/** `docx` as the .txt the other arm uploads: its units, one paragraph each, between blank lines. */
const asText = (docx: Uint8Array) => Buffer.from(planOffice(docx, 'docx').texts.join('\n\n'));

/** A multipart `/translate_file` upload of `bytes` as `filename`. */
function upload(filename: string, bytes: Uint8Array, units: number) {
  const boundary = `----mt-bench-office-${units}-${filename.length}`;
  const field = (name: string, value: string) =>
    `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`;
  const body = Buffer.concat([
    Buffer.from(
      field('source', SOURCE) +
        field('target', TARGET) +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="${filename}"\r\n` +
        'Content-Type: application/octet-stream\r\n\r\n',
    ),
    bytes,
    Buffer.from(`\r\n--${boundary}--\r\n`),
  ]);
  return {
    path: '/translate_file',
    body,
    headers: { 'content-type': `multipart/form-data; boundary=${boundary}` },
    units,
  };
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'office',
    '14. Office files: a 20-page .docx against the same text as .txt',
    `${CONCURRENCY} clients each uploading a ${PAGES}-page document (${BODY_SENTENCES + FIXED_UNITS} sentences) to /translate_file through the front at once, ` +
      'as a .docx and as the same text in a .txt, in A B B A order (the ratio of the means); sentences/s: every sentence over first upload to last answer; every document new text. One language.',
  );
  const model = settings.mode === 'smoke' ? 'tiny' : 'bench-mid';
  const stack = await startRunStack(ctx, {
    name: 'office',
    modelDir: await ctx.model(model),
    languages: [TARGET, SOURCE],
  });
  const units = BODY_SENTENCES + FIXED_UNITS;
  const arms: { label: string; load: LoadResult }[] = [];
  try {
    // Not measured: what a fresh stack's first Office files pay once — each router's office thread starting, the
    // worker opening its alignment sessions (the decoder read and rewritten, a session made, seconds in which its
    // step loop waits) — fell on whichever arm came first: the same .docx round ran at 54–57 sentences/s first and
    // 66–70 next (bench-mid, 8 documents at concurrency 8; docs/performance.md, figure 14). Both kinds, 2-page
    // documents, at a concurrency that reaches every router instance.
    const warmUp = await runClosedLoop({
      origin: stack.frontUrl!,
      concurrency: 8,
      requests: 16,
      request: (seq) => {
        const docx = document(seq, WARM_UP_OFFSET, 2);
        return seq % 2 === 0 ? upload('warm-up.docx', docx, 0) : upload('warm-up.txt', asText(docx), 0);
      },
      signal: ctx.signal,
    });
    if (warmUp.failed > 0) throw new Error(`office warm-up: ${JSON.stringify(warmUp.errorsByStatus)}`);
    // A B B A (twice in full mode): a drift of the shared host's speed weighs on both arms alike.
    const abba = ['docx', 'txt', 'txt', 'docx'] as const;
    const order = settings.mode === 'full' ? [...abba, ...abba] : abba;
    for (const [round, kind] of order.entries()) {
      if (ctx.signal.aborted) break;
      const offset = (kind === 'txt' ? TXT_OFFSET : 0) + round * 1_000_000;
      const load = await runClosedLoop({
        origin: stack.frontUrl!,
        concurrency: CONCURRENCY,
        requests: CONCURRENCY,
        request: (seq) => {
          const docx = document(seq, offset);
          if (kind === 'docx') return upload('report.docx', docx, units);
          return upload('report.txt', asText(docx), units);
        },
        signal: ctx.signal,
      });
      const label = kind === 'docx' ? '.docx' : '.txt (the same text)';
      arms.push({ label, load });
      ctx.log(
        `office ${label}: ${load.unitsPerS.toFixed(1)} sentences/s, p50 ${load.latency.p50.toFixed(0)} ms, failed ${JSON.stringify(load.errorsByStatus)}`,
      );
    }
  } finally {
    await stack.stop();
  }
  const mean = (label: string) => {
    const values = arms.filter((a) => a.label.startsWith(label)).map((a) => a.load.unitsPerS);
    return values.length === 0 ? Number.NaN : values.reduce((sum, v) => sum + v, 0) / values.length;
  };
  const ratio = mean('.docx') / mean('.txt');
  s.tables.push({
    title: `A ${PAGES}-page document at concurrency ${CONCURRENCY}: .docx against .txt`,
    columns: ['File', 'sentences/s', 'documents', 'p50 ms', 'p90 ms', 'failed'],
    rows: arms.map((a) => [
      a.label,
      a.load.unitsPerS,
      a.load.ok,
      a.load.latency.p50,
      a.load.latency.p90,
      a.load.failed,
    ]),
    note: 'p50/p90: one document, upload to answer. Sentences: the units of the .docx (its paragraphs of four sentences count four).',
  });
  s.targets.push(checkTarget('.docx sentences/s ÷ .txt sentences/s', ratio, '>=', 0.8, '×'));
  s.notes.push(`The .docx gave ${formatRatio(ratio)} the sentences/s of the same text as .txt.`);
  s.data = {
    arms: arms.map((a) => ({ label: a.label, unitsPerS: a.load.unitsPerS, latency: a.load.latency })),
    ratio,
    model,
  };
  return s;
}

export const officeScenario: Scenario = {
  id: 'office',
  title: '14. Office files: a 20-page .docx against the same text as .txt',
  run,
};
