/**
 * Worst event-loop stall of text preparation on hostile inputs (issue 24, item 2): each input goes through the
 * model server's planning (segmentation and request limits, on a text thread's loop) and the translation handler's
 * preprocess (the over-long sentence split, on the worker's loop, which the engine's step loop shares), while a
 * 1 ms timer records the longest gap between its turns. Run: `node --import tsx bench/text-stall.ts [preset]`
 * (default preset `tiny`, the generated demo model: its tokenizer is smaller than M2M100's).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createLogger } from '../common/logger.js';
import { makeDemoModel } from '../model-server/tools/demo-model/index.js';
import { planSentences } from '../model-server/translation/translation-plan.js';
import { TranslationHandler } from '../model-server/worker/handlers/translation.js';

const INPUTS: [string, string][] = [
  [
    '100k words, no punctuation',
    Array.from({ length: 100_000 }, (_, i) => `w${i % 10}`)
      .join(' ')
      .slice(0, 100_000),
  ],
  ['100k characters of one word', 'a'.repeat(100_000)],
  ['100k characters of "a\\n"', 'a\n'.repeat(50_000)],
  ['100k characters of unspaced CJK', '我们明天早上一起去北京大学图书馆看书学习'.repeat(5_000)],
];

async function worstStall(work: () => unknown): Promise<{ stallMs: number; totalMs: number; outcome: string }> {
  let last = performance.now();
  let worst = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }, 1);
  await new Promise((resolve) => setTimeout(resolve, 5));
  const started = performance.now();
  last = started;
  let outcome: string;
  try {
    const value = await work();
    outcome =
      'ok' +
      (value && typeof value === 'object' && 'rows' in value
        ? ` (${(value as { rows: unknown[] }).rows.length} rows)`
        : '');
  } catch (err) {
    outcome = `${(err as { code?: string }).code ?? 'error'}`;
  }
  const totalMs = performance.now() - started;
  worst = Math.max(worst, performance.now() - last);
  clearInterval(timer);
  return { stallMs: worst, totalMs, outcome };
}

const dir = mkdtempSync(path.join(tmpdir(), 'mt-text-stall-'));
try {
  makeDemoModel(process.argv[2] ?? 'tiny', dir);
  const handler = new TranslationHandler();
  await handler.initialize({
    modelDir: dir,
    device: { kind: 'cpu' },
    options: { intraOpThreads: 1, numBeams: 1, maxNewTokens: 8 },
    log: createLogger('bench', 'silent'),
  });
  const limits = { maxChars: 100_000, maxSentences: 1_000 };
  for (const [name, text] of INPUTS) {
    const plan = await worstStall(() =>
      planSentences({ src_lang: 'en', src_text: text }, { tgtLang: 'ko', readable: undefined, limits }),
    );
    const prep = await worstStall(() => handler.preprocess({ id: 'x', model: 'ko', body: { srcLang: 'en', text } }));
    console.log(
      `${name}: plan ${plan.outcome}, worst stall ${plan.stallMs.toFixed(1)} ms of ${plan.totalMs.toFixed(0)} ms | ` +
        `worker preprocess ${prep.outcome}, worst stall ${prep.stallMs.toFixed(1)} ms of ${prep.totalMs.toFixed(0)} ms`,
    );
  }
  await handler.close();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
