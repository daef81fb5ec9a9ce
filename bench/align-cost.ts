/**
 * What word alignment costs a batch: 64 rows generated as the translation handler generates an Office document's
 * paragraphs (each row, once generated, asks `engine.align`), against the same 64 without alignment, on one engine.
 * Three arms, their order rotating from round to round: `off` (no alignment), `steps` (generated with `align`: each
 * row reads its own steps' cross-attention, docs/engine.md "Word alignment"; on a tree before that, the pass reads the
 * encoder states generation kept) and `pass` (generated without: a teacher-forced pass that runs the encoder on every
 * row again). Medians over the rounds, and each aligned arm's ratio
 * to `off`, wall time and the process's CPU time (with one onnxruntime thread, what the machine's other tenants
 * change least).
 * Run: `node --import tsx bench/align-cost.ts [modelDir] [rounds] [intraOpThreads] [sentencesPerRow]` (default
 * `models/bench-mid`, 9, 1, 1; 4 makes rows of an Office paragraph's length, as figure 14's units). Each row's output
 * length is its source's (`minNewTokens = maxNewTokens`), so rows finish at different steps as a document's do,
 * whatever a generated model's weights make of `</s>`.
 */
import { TranslationEngine } from '../model-server/engine/engine.js';
import { median } from './lib/stats.js';
import { sentences } from './lib/workload.js';

const [modelDir = 'models/bench-mid', roundsArg = '9', threadsArg = '1', perRowArg = '1'] = process.argv.slice(2);
const ROWS = 64;
const ARMS = ['off', 'steps', 'pass'] as const;
type Arm = (typeof ARMS)[number];

const engine = await TranslationEngine.load({ modelDir, intraOpThreads: Number(threadsArg) });
const perRow = Number(perRowArg);
const texts = Array.from({ length: ROWS }, (_, i) => sentences(perRow, i * perRow).join(' '));
const prepared = texts.map((text) => engine.prepare({ text, srcLang: 'en', tgtLang: 'de' }));

/** Milliseconds until every row is answered (and aligned, but for `off`), and the process's CPU milliseconds. */
async function batch(arm: Arm): Promise<{ wall: number; cpu: number }> {
  const started = performance.now();
  const cpu = process.cpuUsage();
  await Promise.all(
    prepared.map(async (row, i) => {
      const tokens = row.inputIds.length;
      const align = arm === 'steps';
      const translation = await engine.generate(row, {
        bulk: true,
        numBeams: 1,
        maxNewTokens: tokens,
        minNewTokens: tokens,
        align,
      });
      if (arm !== 'off') await engine.align(texts[i]!, row, translation);
    }),
  );
  const used = process.cpuUsage(cpu);
  return { wall: performance.now() - started, cpu: (used.user + used.system) / 1000 };
}

for (const arm of ARMS) await batch(arm); // warm-up: opens the alignment sessions, fills the pools
const times = Object.fromEntries(ARMS.map((arm) => [arm, { wall: [] as number[], cpu: [] as number[] }])) as Record<
  Arm,
  { wall: number[]; cpu: number[] }
>;
const rounds = Number(roundsArg);
for (let round = 0; round < rounds; round++) {
  for (let k = 0; k < ARMS.length; k++) {
    const arm = ARMS[(round + k) % ARMS.length]!;
    const { wall, cpu } = await batch(arm);
    times[arm].wall.push(wall);
    times[arm].cpu.push(cpu);
  }
}
const tokens = prepared.reduce((sum, row) => sum + row.inputIds.length, 0);
console.log(
  `${modelDir}: ${ROWS} rows of ${perRow} sentence(s) (${tokens} source tokens), ${rounds} rounds, ` +
    `${threadsArg} thread(s)`,
);
for (const kind of ['wall', 'cpu'] as const) {
  const off = median(times.off[kind]);
  for (const arm of ARMS) {
    const ms = median(times[arm][kind]);
    // Per round too: an arm against the `off` batch beside it, which saw the same load.
    const paired = times[arm][kind].map((v, r) => v / times.off[kind][r]!);
    const ratio = arm === 'off' ? '' : `, ÷ off ${(ms / off).toFixed(3)} (per round: ${median(paired).toFixed(3)})`;
    console.log(`  ${kind} ${arm.padEnd(7)} median ${ms.toFixed(0)} ms${ratio}`);
  }
}
const { stepRows, runs, rows, encodedRows, ms } = engine.alignmentStats();
const passes = `${runs} runs, ${rows} rows (${encodedRows} encoded again), ${ms.toFixed(0)} ms`;
console.log(`  ${stepRows} rows from their steps; passes: ${passes}`);
await engine.close();
