/**
 * @module bench/scenarios/engine-int8 — what int8 costs in answers and buys in speed, in one process:
 *
 *     node --import tsx bench/scenarios/engine-int8.ts [modelDir = models/m2m100-418m] [--pairs 3] [--tokens 16]
 *
 * 1. Agreement under teacher forcing: fp32's greedy output for workload sentences is fed to the fp32 and the int8
 *    decoders in one full pass (no cache); per position, do their top-1 tokens agree, and how far apart are the
 *    logits (largest absolute difference).
 * 2. Load dependence: each sentence batched with 63 others (all submitted at once, as 64 concurrent requests)
 *    vs the same sentence alone; the share whose answer differs, per dtype.
 * 3. Speed: fp32, q8 and q8-rows engines loaded side by side, their `translate` calls interleaved in rotating
 *    order (a load swing on this shared host hits every arm alike), tokens/s medians and ratios at batch 64 and 1.
 *
 * Prints a JSON summary on its last line. Random-weight models: the agreement has no target, it shows the size of
 * the change.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import '../../model-server/engine/ort-env.js';
import * as ort from 'onnxruntime-node';
import { TranslationEngine } from '../../model-server/engine/engine.js';
import { ENGINE_MALLOC_ENV } from '../../model-server/engine/malloc-env.js';
import { DTYPE_SUFFIX, type ModelDtype } from '../../model-server/engine/session.js';
import { median } from '../lib/stats.js';
import { engineRows } from './engine-probe.js';

const INT8: ModelDtype[] = ['q8', 'q8-rows'];

interface Args {
  modelDir: string;
  pairs: number;
  tokens: number;
}

function parseArgs(argv: string[]): Args {
  const flag = (name: string, fallback: number) => {
    const i = argv.indexOf(name);
    return i >= 0 ? Number(argv[i + 1]) : fallback;
  };
  const positional = argv.filter((a, i) => !a.startsWith('--') && !argv[i - 1]?.startsWith('--'));
  return { modelDir: positional[0] ?? 'models/m2m100-418m', pairs: flag('--pairs', 3), tokens: flag('--tokens', 16) };
}

async function load(modelDir: string, dtype: ModelDtype): Promise<TranslationEngine> {
  return TranslationEngine.load({ modelDir, dtype, intraOpThreads: 2, device: { kind: 'cpu' } });
}

/** Logits of every position of `prefix` after encoding `source`, in one decoder pass without cache. */
async function fullPassLogits(
  modelDir: string,
  dtype: ModelDtype,
  cases: { source: number[]; prefix: number[] }[],
  shape: { layers: number; heads: number; headDim: number; vocab: number },
): Promise<Float32Array[]> {
  const options: ort.InferenceSession.SessionOptions = { intraOpNumThreads: 2, graphOptimizationLevel: 'all' };
  const suffix = DTYPE_SUFFIX[dtype];
  const encoder = await ort.InferenceSession.create(
    path.join(modelDir, 'onnx', `encoder_model${suffix}.onnx`),
    options,
  );
  const decoder = await ort.InferenceSession.create(
    path.join(modelDir, 'onnx', `decoder_model_merged${suffix}.onnx`),
    options,
  );
  const out: Float32Array[] = [];
  try {
    for (const c of cases) {
      const ids = (xs: number[]) => new ort.Tensor('int64', BigInt64Array.from(xs, BigInt), [1, xs.length]);
      const mask = ids(c.source.map(() => 1));
      const encoded = await encoder.run({ input_ids: ids(c.source), attention_mask: mask });
      const feeds: Record<string, ort.Tensor> = {
        input_ids: ids(c.prefix),
        encoder_attention_mask: mask,
        encoder_hidden_states: encoded.last_hidden_state!,
        use_cache_branch: new ort.Tensor('bool', Uint8Array.of(0), [1]),
      };
      const empty = new ort.Tensor('float32', new Float32Array(0), [1, shape.heads, 0, shape.headDim]);
      for (let i = 0; i < shape.layers; i++) {
        for (const side of ['decoder', 'encoder'])
          for (const part of ['key', 'value']) feeds[`past_key_values.${i}.${side}.${part}`] = empty;
      }
      const result = await decoder.run(feeds, ['logits']);
      out.push(result.logits!.data as Float32Array);
    }
  } finally {
    await encoder.release();
    await decoder.release();
  }
  return out;
}

async function agreement(args: Args, sentences: number) {
  const config = JSON.parse(readFileSync(path.join(args.modelDir, 'config.json'), 'utf8')) as Record<string, number>;
  const shape = {
    layers: config.decoder_layers!,
    heads: config.decoder_attention_heads!,
    headDim: config.d_model! / config.decoder_attention_heads!,
    vocab: config.vocab_size!,
  };
  const fp32 = await load(args.modelDir, 'fp32');
  const rows = engineRows(sentences, ['en'], 5_000);
  const cases: { source: number[]; prefix: number[] }[] = [];
  for (const row of rows) {
    const prepared = fp32.prepare(row);
    const hyp = await fp32.generateIds(prepared.inputIds, prepared.forcedTokenId, {
      numBeams: 1,
      maxNewTokens: args.tokens,
      minNewTokens: args.tokens,
    });
    // Positions after the forced language token: the ones the model chooses.
    cases.push({ source: prepared.inputIds, prefix: [fp32.config.decoderStartTokenId, ...hyp.tokens.slice(0, -1)] });
  }
  await fp32.close();
  const reference = await fullPassLogits(args.modelDir, 'fp32', cases, shape);
  const result: Record<string, { positions: number; top1Agreement: number; maxLogitDiff: number }> = {};
  for (const dtype of INT8) {
    const logits = await fullPassLogits(args.modelDir, dtype, cases, shape);
    let positions = 0;
    let agree = 0;
    let maxDiff = 0;
    for (const [c, ref] of reference.entries()) {
      const q = logits[c]!;
      for (let t = 1; t < cases[c]!.prefix.length; t++) {
        const base = t * shape.vocab;
        let best = 0;
        let bestQ = 0;
        for (let v = 0; v < shape.vocab; v++) {
          if (ref[base + v]! > ref[base + best]!) best = v;
          if (q[base + v]! > q[base + bestQ]!) bestQ = v;
          maxDiff = Math.max(maxDiff, Math.abs(ref[base + v]! - q[base + v]!));
        }
        positions++;
        if (best === bestQ) agree++;
      }
    }
    result[dtype] = { positions, top1Agreement: agree / positions, maxLogitDiff: maxDiff };
    console.error(`agreement ${dtype}: ${agree}/${positions} top-1, largest logit difference ${maxDiff.toFixed(4)}`);
  }
  return result;
}

async function loadDependence(args: Args, batch: number) {
  const result: Record<string, { sentences: number; differing: number; share: number }> = {};
  const rows = engineRows(batch, ['en', 'ko', 'de', 'ja'], 7_000);
  const options = { numBeams: 1, maxNewTokens: args.tokens };
  for (const dtype of ['fp32', ...INT8] as ModelDtype[]) {
    const engine = await load(args.modelDir, dtype);
    const together = await Promise.all(rows.map((row) => engine.translate([row], options).then((t) => t[0]!.text)));
    let differing = 0;
    for (const [i, row] of rows.entries())
      if ((await engine.translate([row], options))[0]!.text !== together[i]) differing++;
    await engine.close();
    result[dtype] = { sentences: rows.length, differing, share: differing / rows.length };
    console.error(`load dependence ${dtype}: ${differing}/${rows.length} sentences differ batched vs alone`);
  }
  return result;
}

async function speed(args: Args) {
  const dtypes: ModelDtype[] = ['fp32', ...INT8];
  const engines = new Map<ModelDtype, TranslationEngine>();
  for (const dtype of dtypes) engines.set(dtype, await load(args.modelDir, dtype));
  const options = { numBeams: 1, minNewTokens: args.tokens, maxNewTokens: args.tokens };
  let next = 0;
  const result: Record<string, Record<string, number[]>> = {};
  for (const batch of [64, 1]) {
    // Warm every engine at this batch size once, untimed.
    for (const engine of engines.values()) await engine.translate(engineRows(batch, ['en'], 900_000 + batch), options);
    const runs = batch === 1 ? 4 * args.pairs : args.pairs;
    for (let r = 0; r < runs; r++) {
      const order = dtypes.map((_, i) => dtypes[(i + r) % dtypes.length]!);
      const rows = engineRows(batch, ['en'], next);
      next += batch;
      for (const dtype of order) {
        const start = performance.now();
        const out = await engines.get(dtype)!.translate(rows, options);
        const tokens = out.reduce((sum, t) => sum + t.generatedTokens, 0);
        ((result[batch] ??= {})[dtype] ??= []).push(tokens / ((performance.now() - start) / 1000));
      }
    }
    const m = (d: ModelDtype) => median(result[batch]![d]!);
    console.error(
      `speed batch ${batch}: ${dtypes.map((d) => `${d} ${m(d).toFixed(1)}`).join(', ')} tokens/s; ` +
        `q8 ÷ fp32 ${(m('q8') / m('fp32')).toFixed(2)}, q8-rows ÷ fp32 ${(m('q8-rows') / m('fp32')).toFixed(2)}`,
    );
  }
  for (const engine of engines.values()) await engine.close();
  return result;
}

async function main(): Promise<void> {
  // Engines run here as in a worker: glibc reads its settings at process start, so run again under them.
  if (Object.keys(ENGINE_MALLOC_ENV).some((name) => process.env[name] === undefined)) {
    const again = spawnSync(process.execPath, [...process.execArgv, ...process.argv.slice(1)], {
      stdio: 'inherit',
      env: { ...ENGINE_MALLOC_ENV, ...process.env },
    });
    process.exit(again.status ?? 1);
  }
  const args = parseArgs(process.argv.slice(2));
  const only = process.argv.includes('--only') ? process.argv[process.argv.indexOf('--only') + 1]!.split(',') : null;
  const want = (part: string) => only === null || only.includes(part);
  const summary: Record<string, unknown> = { modelDir: args.modelDir, tokens: args.tokens };
  if (want('agreement')) summary.agreement = await agreement(args, 16);
  if (want('load')) summary.loadDependence = await loadDependence(args, 64);
  if (want('speed')) summary.speed = await speed(args);
  console.log(JSON.stringify(summary));
}

await main();
