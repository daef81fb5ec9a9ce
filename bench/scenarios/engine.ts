/**
 * @module bench/scenarios/engine — figure 1, the engine limit: the translation engine alone, in-process, on
 * pre-formed batches (1, 8, 32, 64 sentences of the mixed-length workload, fixed output length), against the
 * machine's own ceiling measured in the same run: onnxruntime MatMul GFLOP/s on the model's layer shapes at those
 * row counts, turned into tokens/s by the model's GEMM FLOPs per generated token (bench/lib/model-flops).
 *
 * Each repeat is a pair of fresh processes run one right after the other — the engine (warmed at the largest batch,
 * then every batch size on sentences no earlier run used) and the ceiling (every shape at every row count) — with
 * the pair's order and the order of batch sizes alternating on every repeat; medians over repeats are reported.
 * The engine's tokens/s per batch are left in `ctx.shared` for the serving figure's quick mode, and the all-work
 * ceiling for the batching-gain figure's bound.
 *
 * The int8 arms: the same engine on the model folder's q8 files (transformers.js' recipe, tools/quantize.ts) and
 * q8-rows files (activations quantized per row), each a fresh process in the same rotation, against fp32 (the arm
 * above) and against the int8 ceiling: the same layer shapes as DynamicQuantizeMatMul, what onnxruntime fuses the
 * q8 files' products into.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { TranslationTokenizer } from '../../model-server/engine/tokens/tokenizer.js';
import type { BenchContext, Scenario } from '../lib/context.js';
import type { MatmulMeasurement, MatmulProbeRequest, MatmulWeights } from '../lib/matmul-ceiling.js';
import type { ModelDtype } from '../../model-server/engine/session.js';
import {
  ceilingTokensPerS,
  decoderStepGemms,
  distinctShapes,
  flopsPerRow,
  shapeFromConfig,
  sourceTokenGemms,
  type Seq2SeqShape,
} from '../lib/model-flops.js';
import { runProbe } from '../lib/probe-runner.js';
import { checkTarget, formatNumber, section, type Section } from '../lib/report.js';
import { median, ratio } from '../lib/stats.js';
import { job, SEED_LANGUAGES } from '../lib/workload.js';
import { engineBatchRequest, engineRows, type EngineProbeRequest, type EngineProbeResult } from './engine-probe.js';

/** Mean source length in tokens (special tokens included) of the first `count` workload sentences. */
export function meanSourceTokens(modelDir: string, count: number): number {
  const config = JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as { eos_token_id?: number };
  const tokenizer = TranslationTokenizer.load(modelDir, { eosTokenId: config.eos_token_id ?? 2, maxInputTokens: 1024 });
  let total = 0;
  for (let i = 0; i < count; i++)
    total += tokenizer.encode(job(i, ['en']).src_text, job(i, ['en']).src_lang).ids.length;
  return total / count;
}

/** The int8 arms beside the fp32 engine. */
const INT8_DTYPES: ModelDtype[] = ['q8', 'q8-rows'];

/** `ctx.shared` key of the engine's tokens/s by batch size (a Map), measured on one target language. */
export const ENGINE_TOKENS_KEY = 'engine tokens/s by batch';
/** `ctx.shared` key of the all-work ceiling tokens/s by batch size (a Map): what any engine could do here. */
export const CEILING_TOKENS_KEY = 'all-work ceiling tokens/s by batch';

async function runEngineScenario(ctx: BenchContext): Promise<Section> {
  const s = section(
    'engine',
    '1. Engine limit vs the machine ceiling',
    'The translation engine alone, in-process, on pre-formed batches of the mixed-length workload with a fixed ' +
      `output length (${ctx.settings.newTokens} generated tokens per sentence, greedy), against onnxruntime MatMul ` +
      "GFLOP/s on the model's own layer shapes at the same row counts, measured in the same run.",
  );
  const { settings } = ctx;
  const modelDir = await ctx.model(ctx.settings.speedModel);
  const shape = shapeFromConfig(
    JSON.parse(readFileSync(path.join(modelDir, 'config.json'), 'utf8')) as Record<string, unknown>,
  );
  const batches = settings.engineBatches;
  const maxBatch = Math.max(...batches);
  // Encoder rows of the ceiling: a batch of b encodes b × the workload's mean source length (the engine's own
  // figure, from the sentences it really ran, is what the all-work ceiling uses below).
  const meanSource = meanSourceTokens(modelDir, 48);
  const step = decoderStepGemms(shape);
  const source = sourceTokenGemms(shape);
  const shapes = distinctShapes(step, source);
  const encoderRows = batches.map((b) => Math.round(b * meanSource));
  const decoderShapes = distinctShapes(step);
  const encoderShapes = distinctShapes(source);

  const engineRuns: EngineProbeResult[] = [];
  const ceilingRuns: MatmulMeasurement[][] = [];
  const int8Runs = new Map<ModelDtype, EngineProbeResult[]>(INT8_DTYPES.map((d) => [d, []]));
  const int8CeilingRuns: MatmulMeasurement[][] = [];
  type Arm = 'engine' | 'ceiling' | ModelDtype | 'int8 ceiling';
  const allArms: Arm[] = ['engine', 'ceiling', ...INT8_DTYPES, 'int8 ceiling'];
  for (let r = 0; r < settings.engineRepeats; r++) {
    const order = r % 2 === 0 ? [...batches].reverse() : batches;
    const arms = r % 2 === 0 ? allArms : [...allArms].reverse();
    for (const arm of arms) {
      if (ctx.signal.aborted) break;
      if (arm === 'engine' || arm === 'q8' || arm === 'q8-rows') {
        const dtype: ModelDtype = arm === 'engine' ? 'fp32' : arm;
        const request: EngineProbeRequest = {
          ...engineBatchRequest(settings, modelDir, order, ['en']),
          dtype,
          // Once per run: does the served path (MAX_NEW_TOKENS only) generate the same fixed length?
          ...(r === 0 && arm === 'engine' ? { verifyCount: 2 * SEED_LANGUAGES.length } : {}),
        };
        const result = await runProbe<EngineProbeResult>(request, {
          workDir: ctx.workDir,
          label: `engine-${dtype}-${r}`,
          timeoutMs: 20 * 60_000,
        });
        (arm === 'engine' ? engineRuns : int8Runs.get(arm)!).push(result);
        ctx.log(
          `engine alone, ${dtype} (repeat ${r + 1}/${settings.engineRepeats}): ${result.batches.map((b) => `batch ${b.batch} ${b.tokensPerS.toFixed(1)}`).join(', ')} tokens/s`,
        );
      } else {
        const weights: MatmulWeights = arm === 'ceiling' ? 'fp32' : 'int8';
        const request: MatmulProbeRequest = {
          kind: 'matmul',
          groups: [
            { cases: decoderShapes, rows: batches },
            { cases: encoderShapes, rows: encoderRows },
          ],
          intraOpThreads: settings.intraOpThreads,
          minTimeMs: settings.ceilingMinTimeMs,
          weights,
        };
        const result = await runProbe<MatmulMeasurement[]>(request, {
          workDir: ctx.workDir,
          label: `ceiling-${weights}-${r}`,
          timeoutMs: 15 * 60_000,
        });
        (weights === 'fp32' ? ceilingRuns : int8CeilingRuns).push(result);
        ctx.log(
          `${weights} ceiling (repeat ${r + 1}/${settings.engineRepeats}) measured: ${result.length} shape × rows cases`,
        );
      }
    }
  }
  if (engineRuns.length === 0 || ceilingRuns.length === 0)
    throw new Error('aborted before both the engine and the ceiling were measured');

  // Medians over repeats.
  const gflops = (key: string, rows: number) =>
    median(
      ceilingRuns
        .map((run) => run.find((m) => m.key === key && m.rows === rows)?.gflops ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const engineTokens = (batch: number) =>
    median(
      engineRuns
        .map((run) => run.batches.find((b) => b.batch === batch)?.tokensPerS ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const engineField = (batch: number, field: 'rowsPerDecoderRun' | 'decoderRunsPerStep' | 'sourceTokens') =>
    median(
      engineRuns
        .map((run) => run.batches.find((b) => b.batch === batch)?.[field] ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const phase = (batch: number, key: 'encoder' | 'decoder' | 'search' | 'layout') =>
    median(
      engineRuns
        .map((run) => run.batches.find((b) => b.batch === batch)?.phases?.[key] ?? Number.NaN)
        .filter(Number.isFinite),
    );
  // The all-work ceiling counts the encoder work of the sentences the engine really ran.
  const srcTokensOf = (batch: number) => engineField(batch, 'sourceTokens');
  const srcTokens = srcTokensOf(maxBatch);
  const engineSentences = (batch: number) =>
    median(
      engineRuns
        .map((run) => run.batches.find((b) => b.batch === batch)?.sentencesPerS ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const generatedPerSentence = engineRuns.flatMap((run) => run.batches.map((b) => b.tokensPerSentence));
  if (generatedPerSentence.some((n) => n !== settings.newTokens)) {
    s.notes.push(
      `WARNING: the engine generated ${[...new Set(generatedPerSentence)].join('/')} tokens per sentence, not the fixed ${settings.newTokens}.`,
    );
  }
  const lengths = engineRuns.find((run) => run.maxOnlyLengths)?.maxOnlyLengths;
  if (lengths) {
    const total = Object.values(lengths).reduce((a, b) => a + b, 0);
    const exact = lengths[String(settings.newTokens)] ?? 0;
    s.notes.push(
      exact === total
        ? `Served path check: with MAX_NEW_TOKENS=${settings.newTokens} alone (no minimum, as the model server runs), ${exact}/${total} workload sentences over ${SEED_LANGUAGES.length} target languages generated exactly ${settings.newTokens} tokens, so served tokens/s = sentences/s × ${settings.newTokens}.`
        : `WARNING: with MAX_NEW_TOKENS=${settings.newTokens} alone only ${exact}/${total} sentences generated ${settings.newTokens} tokens (${JSON.stringify(lengths)}): served tokens/s is overstated by up to ${(100 * (1 - exact / total)).toFixed(0)}%.`,
    );
  }

  // GEMM rates table.
  ctx.shared.set(ENGINE_TOKENS_KEY, new Map(batches.map((b) => [b, engineTokens(b)])));
  s.tables.push({
    title: 'Machine ceiling: onnxruntime MatMul GFLOP/s on the layer shapes',
    columns: ['Weight [K×N]', 'used per', ...batches.map((b) => `rows ${b}`), ...encoderRows.map((r) => `rows ${r}`)],
    rows: shapes.map((sh) => [
      `${sh.k}×${sh.n}`,
      [
        step.some((u) => u.key === sh.key) ? 'generated token' : '',
        source.some((u) => u.key === sh.key) ? 'source token' : '',
      ]
        .filter(Boolean)
        .join(', '),
      ...batches.map((b) => (step.some((u) => u.key === sh.key) ? gflops(sh.key, b) : '')),
      ...encoderRows.map((r) => (source.some((u) => u.key === sh.key) ? gflops(sh.key, r) : '')),
    ]),
    note: `Median of ${settings.engineRepeats} fresh-process repeat(s), each right beside an engine probe. Decoder shapes at rows = batch; encoder shapes at rows = batch × the workload's mean source tokens (${formatNumber(meanSource)}).`,
  });

  const rows: (string | number)[][] = [];
  const data: Record<string, unknown>[] = [];
  const allWork = new Map<number, number>();
  ctx.shared.set(CEILING_TOKENS_KEY, allWork);
  for (const [i, batch] of batches.entries()) {
    const ceiling = ceilingTokensPerS(
      shape,
      batch,
      settings.newTokens,
      srcTokensOf(batch),
      (key) => gflops(key, batch),
      (key) => gflops(key, encoderRows[i]!),
    );
    const tokens = engineTokens(batch);
    allWork.set(batch, ceiling.allWork);
    const effectiveGflops = ceiling.decoderOnly * ceiling.decoderGflopPerToken;
    const rowsPerRun = engineField(batch, 'rowsPerDecoderRun');
    const runsPerStep = engineField(batch, 'decoderRunsPerStep');
    rows.push([
      batch,
      tokens,
      engineSentences(batch),
      rowsPerRun,
      runsPerStep,
      effectiveGflops,
      ceiling.decoderOnly,
      ratio(tokens, ceiling.decoderOnly),
      ceiling.allWork,
      ratio(tokens, ceiling.allWork),
    ]);
    data.push({
      batch,
      engineTokensPerS: tokens,
      engineSentencesPerS: engineSentences(batch),
      rowsPerDecoderRun: rowsPerRun,
      decoderRunsPerStep: runsPerStep,
      decoderGflops: effectiveGflops,
      ...ceiling,
      ratioDecoderOnly: ratio(tokens, ceiling.decoderOnly),
      ratioAllWork: ratio(tokens, ceiling.allWork),
    });
  }
  s.tables.push({
    title: 'Engine tokens/s vs ceiling tokens/s',
    columns: [
      'Batch',
      'engine tokens/s',
      'engine sentences/s',
      'rows per decoder run',
      'decoder runs per token',
      'decoder GEMM GFLOP/s',
      'ceiling tokens/s (decoder step)',
      'engine ÷ ceiling',
      'ceiling tokens/s (all work)',
      'engine ÷ ceiling (all work)',
    ],
    rows,
    note:
      `Ceiling (decoder step) = batch ÷ time of one decoder step's GEMMs at the measured rates (${formatNumber(flopsPerRow(step) / 1e9)} GFLOP per generated token); ` +
      `ceiling (all work) also spreads each sentence's encoder and cross-attention k/v GEMMs (${formatNumber((flopsPerRow(source) * srcTokens) / 1e9)} GFLOP for the ${formatNumber(srcTokens)} source tokens of a mean sentence) over its ${settings.newTokens} tokens. ` +
      "Rows per decoder run and decoder runs per generated token come from the engine's own counters: a pre-formed batch that the engine steps as more than one cohort shows more than one run per token.",
  });
  s.tables.push({
    title: 'Where the engine spends its time (share of wall time, engine counters)',
    columns: [
      'Batch',
      'encoder runs',
      'decoder runs',
      'greedy search',
      'cache re-layout',
      'other (JS, tensors, tokenizer)',
    ],
    rows: batches.map((b) => {
      const parts = (['encoder', 'decoder', 'search', 'layout'] as const).map((k) => phase(b, k));
      const pct = (v: number) => (Number.isFinite(v) ? `${(100 * v).toFixed(1)}%` : 'n/a');
      return [b, ...parts.map(pct), pct(1 - parts.reduce((a, v) => a + v, 0))];
    }),
    note: 'Decoder and encoder runs are onnxruntime session.run calls: the GEMMs the ceiling counts, plus attention, layer norms and the KV-cache concatenation inside the graph.',
  });
  const at = batches.indexOf(64) >= 0 ? 64 : maxBatch;
  const d = data[batches.indexOf(at)]!;

  // int8: tokens/s of each int8 arm, ÷ fp32 and ÷ the all-work int8 ceiling.
  const int8Gflops = (key: string, rowCount: number) =>
    median(
      int8CeilingRuns
        .map((run) => run.find((m) => m.key === key && m.rows === rowCount)?.gflops ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const dtypeTokens = (dtype: ModelDtype, batch: number) =>
    median(
      (int8Runs.get(dtype) ?? [])
        .map((run) => run.batches.find((b) => b.batch === batch)?.tokensPerS ?? Number.NaN)
        .filter(Number.isFinite),
    );
  const int8Data = batches.map((batch, i) => {
    const ceiling = ceilingTokensPerS(
      shape,
      batch,
      settings.newTokens,
      srcTokensOf(batch),
      (key) => int8Gflops(key, batch),
      (key) => int8Gflops(key, encoderRows[i]!),
    );
    const fp32 = engineTokens(batch);
    const q8 = dtypeTokens('q8', batch);
    const rowsQ8 = dtypeTokens('q8-rows', batch);
    return {
      batch,
      fp32TokensPerS: fp32,
      q8TokensPerS: q8,
      q8RowsTokensPerS: rowsQ8,
      q8VsFp32: ratio(q8, fp32),
      q8RowsVsFp32: ratio(rowsQ8, fp32),
      int8CeilingAllWork: ceiling.allWork,
      q8VsInt8Ceiling: ratio(q8, ceiling.allWork),
      q8RowsVsInt8Ceiling: ratio(rowsQ8, ceiling.allWork),
    };
  });
  s.tables.push({
    title: 'int8 engines (q8, q8-rows) vs fp32 and vs the int8 ceiling',
    columns: [
      'Batch',
      'fp32 tokens/s',
      'q8 tokens/s',
      'q8 ÷ fp32',
      'q8-rows tokens/s',
      'q8-rows ÷ fp32',
      'int8 ceiling tokens/s (all work)',
      'q8 ÷ int8 ceiling',
      'q8-rows ÷ int8 ceiling',
    ],
    rows: int8Data.map((x) => [
      x.batch,
      x.fp32TokensPerS,
      x.q8TokensPerS,
      x.q8VsFp32,
      x.q8RowsTokensPerS,
      x.q8RowsVsFp32,
      x.int8CeilingAllWork,
      x.q8VsInt8Ceiling,
      x.q8RowsVsInt8Ceiling,
    ]),
    note:
      "q8: the model folder's *_quantized.onnx (transformers.js' recipe: activations quantized per tensor, so a row's " +
      'answer depends on its batch); q8-rows: *_quantized_rows.onnx (per-row activation scales, batch-invariant). ' +
      'Int8 ceiling: the same layer shapes as DynamicQuantizeMatMul (int8 weights, per-column scales), all work counted as for fp32. ' +
      'Each arm a fresh process in the same rotation as the fp32 engine and ceilings; medians over repeats.',
  });
  const int8At = (batch: number) => int8Data[batches.indexOf(batch)];
  if (int8At(1)) s.targets.push(checkTarget('q8 ÷ fp32 tokens/s at batch 1', int8At(1)!.q8VsFp32, '>=', 2.0, '×'));
  const int8Big = int8At(at)!;
  s.targets.push(checkTarget(`q8 ÷ fp32 tokens/s at batch ${at}`, int8Big.q8VsFp32, '>=', 2.5, '×'));
  s.targets.push(
    checkTarget(`q8 engine ÷ int8 ceiling (all work) at batch ${at}`, int8Big.q8VsInt8Ceiling, '>=', 0.75),
  );
  s.notes.push(
    `q8-rows (auto's choice on the CPU when it reaches 2× fp32 at batch 64; README "Choosing a dtype") at batch ${at}: ${formatNumber(int8Big.q8RowsVsFp32)}× fp32, ${formatNumber(int8Big.q8RowsVsInt8Ceiling)} of the int8 ceiling.`,
  );
  s.targets.push(checkTarget(`engine ÷ ceiling (all work) at batch ${at}`, d.ratioAllWork as number, '>=', 0.75));
  s.notes.push(
    describeCount(shape),
    'The target is read on the all-work ceiling: its numerator and denominator count the same work (a sentence cannot be generated without encoding its source). The decoder-step-only ratio is shown beside it; the gap between the two is the encoder share of this workload.',
  );
  s.data = {
    model: modelDir,
    shape,
    meanSourceTokens: Object.fromEntries(batches.map((b) => [b, srcTokensOf(b)])),
    newTokens: settings.newTokens,
    batches: data,
    engineRuns,
    ceilingRuns,
    int8: int8Data,
    int8Runs: Object.fromEntries(int8Runs),
    int8CeilingRuns,
  };
  return s;
}

function describeCount(shape: Seq2SeqShape): string {
  return (
    `Counted per generated token: ${shape.decoderLayers} decoder layers × (self-attention q,k,v,o + cross-attention q,o: 6 × ${shape.dModel}×${shape.dModel}; ` +
    `FFN ${shape.dModel}×${shape.decoderFfnDim} + ${shape.decoderFfnDim}×${shape.dModel}) + LM head ${shape.dModel}×${shape.vocabSize}. ` +
    `Per source token: ${shape.encoderLayers} encoder layers × (q,k,v,o + FFN) + ${shape.decoderLayers} × cross-attention k,v. ` +
    'Not counted: attention scores/context (<1% at these lengths), layer norms, softmax, KV-cache copies.'
  );
}

export const engineScenario: Scenario = {
  id: 'engine',
  title: '1. Engine limit vs the machine ceiling',
  run: runEngineScenario,
};
