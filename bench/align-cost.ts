/**
 * What word alignment costs a batch: 64 sentences generated as the translation handler generates an Office
 * document's paragraphs (each row, once generated, asks `engine.align`), against the same 64 without alignment, on
 * one engine, the two arms alternating within each round; medians over the rounds and their ratio.
 * Run: `node --import tsx bench/align-cost.ts [modelDir] [rounds] [intraOpThreads]` (default `models/bench-mid`, 7,
 * 1). Each row's output length is its source's (`minNewTokens = maxNewTokens`), so rows finish at different steps as
 * a document's do, whatever a generated model's weights make of `</s>`.
 */
import { TranslationEngine } from '../model-server/engine/engine.js';
import { median } from './lib/stats.js';
import { sentences } from './lib/workload.js';

const [modelDir = 'models/bench-mid', roundsArg = '7', threadsArg = '1'] = process.argv.slice(2);
const ROWS = 64;

const engine = await TranslationEngine.load({ modelDir, intraOpThreads: Number(threadsArg) });
const texts = sentences(ROWS);
const prepared = texts.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));

/**
 * Milliseconds until every row is answered (and aligned, with `align`), and the process's CPU milliseconds meanwhile
 * (with one onnxruntime thread, what other tenants of the machine change least).
 */
async function batch(align: boolean): Promise<{ wall: number; cpu: number }> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    prepared.map(async (row, i) => {
      const tokens = row.inputIds.length;
      const options = { bulk: true, numBeams: 1, maxNewTokens: tokens, minNewTokens: tokens, align };
      const translation = await engine.generate(row, options);
      if (align) await engine.align(texts[i]!, row, translation);
    }),
  );
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - started, cpu: (used.user + used.system) / 1000 };
}

await batch(true); // warm-up: opens the alignment sessions, fills the pools
const times = { on: { wall: [] as number[], cpu: [] as number[] }, off: { wall: [] as number[], cpu: [] as number[] } };
for (let round = 0; round < Number(roundsArg); round++) {
  for (const arm of round % 2 === 0 ? (['off', 'on'] as const) : (['on', 'off'] as const)) {
    const { wall, cpu } = await batch(arm === 'on');
    times[arm].wall.push(wall);
    times[arm].cpu.push(cpu);
  }
}
const show = (values: number[]) => values.map((v) => v.toFixed(0)).join(', ');
console.log(`${modelDir}: ${ROWS} sentences, ${roundsArg} rounds, ${threadsArg} thread(s)`);
for (const kind of ['wall', 'cpu'] as const) {
  const on = median(times.on[kind]);
  const off = median(times.off[kind]);
  console.log(`  ${kind} align off: median ${off.toFixed(0)} ms (${show(times.off[kind])})`);
  console.log(`  ${kind} align on:  median ${on.toFixed(0)} ms (${show(times.on[kind])})`);
  console.log(`  ${kind} on ÷ off: ${(on / off).toFixed(3)}`);
}
await engine.close();
