/**
 * @module bench/gpu/driver — the engine side of the GPU benchmarks (bench/gpu/run.sh, run-cuda.sh), bundled with esbuild
 * into one file that runs on a GPU machine with only the kit's node and onnxruntime-node (scripts/gpu-bench-kit).
 *
 *   driver prep    --model DIR [--preset m2m100-418m] [--rows 256] --out prep.json
 *       the model folder's JSON files, and the fixed rows' encoder ids (torch-m2m100.py's TORCH_INPUTS)
 *   driver graph   --model DIR [--preset …] --part encoder|decoder     one fp32 graph (the project's own builder)
 *   driver fp16    --model DIR                                          the two graphs' `_fp16` files (float16.ts)
 *   driver bench   --model DIR --ep webgpu|cuda|cpu --prep prep.json --out FILE [--parts 1x1,64x1,64x2,256x1]
 *                  [--dtype fp32|fp16] [--search steps|in-graph] [--in-flight 1] [--new-tokens 16] [--runs 3]
 *                  [--threads 0] [--software] [--deadline-s 600] [--profile]
 *       per part (BATCHxBEAMS): one warm-up and `runs` timed calls of every row at once, exactly `new-tokens` tokens
 *       per row; tokens/s and the last run's token ids, rewritten after every part (a deadline keeps the parts done).
 *       `steps`: TranslationEngine's step loop, with its counters per step (host bytes per row per step); --profile:
 *       onnxruntime's per-node profile of every session, summarised into the JSON and the raw files deleted.
 *       `in-graph`: the search graph (engine/search/), one run per call, `in-flight` runs at once on its session.
 *   driver summary --arm NAME=FILE … [--reference NAME] [--torch T.json] [--served V.json --served-vs NAME] --out S.json
 *       per part every arm's tokens/s ÷ torch fp16 / fp32 and its rows with the reference's tokens; served tokens/s
 *       per worker count and concurrency ÷ the `served-vs` arm at that batch
 */
import { readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { TranslationEngine } from '../../model-server/engine/engine.js';
import { makeDemoModel, presetNamed } from '../../model-server/tools/demo-model/index.js';
import { loadModelConfig } from '../../model-server/engine/model-config.js';
import { TranslationTokenizer } from '../../model-server/engine/tokens/tokenizer.js';
import { sentence } from '../lib/workload.js';
import type { DeviceRequest } from '../../model-server/protocol.js';
import { convertModelToFloat16 } from '../../model-server/engine/float16.js';
import { searchGraph } from '../../model-server/engine/search/graph.js';
import { SearchSession } from '../../model-server/engine/search/session.js';

interface PrepRow {
  inputIds: number[];
  forcedTokenId: number;
}

interface Prep {
  batch: PrepRow[];
  single: PrepRow[];
  config: Record<string, unknown>;
  special: Record<string, number>;
}

interface PartResult {
  batch: number;
  beams: number;
  runs: number;
  tokensPerS: number;
  /** Wall seconds of each timed call. */
  seconds: number[];
  generatedTokens: number;
  /** The step loop's counters over the timed calls, per decoder step and per row-step (absent for the search graph). */
  decoderSteps?: number;
  decoderMsPerStep?: number;
  encoderMsPerCall?: number;
  searchMsPerStep?: number;
  layoutMsPerStep?: number;
  hostBytesPerStep?: number;
  hostBytesPerRowStep?: number;
  /** The last timed call's token ids, row by row. */
  ids: number[][];
}

const SOURCE_LANG = 'en';
const TARGET_LANG = 'fr';

function prep(modelDir: string, preset: string, count: number): Prep {
  const p = presetNamed(preset);
  makeDemoModel(p, modelDir, { graphs: [], quantize: false });
  const config = loadModelConfig(modelDir);
  const tokenizer = TranslationTokenizer.load(modelDir, {
    eosTokenId: config.eosTokenId,
    maxInputTokens: config.maxInputTokens,
  });
  const forcedTokenId = tokenizer.forcedTokenId(TARGET_LANG);
  const row = (i: number): PrepRow => ({ inputIds: tokenizer.encode(sentence(i), SOURCE_LANG).ids, forcedTokenId });
  return {
    batch: Array.from({ length: count }, (_, i) => row(i)),
    single: [row(0)],
    config: {
      d_model: p.dModel,
      layers: [p.encoderLayers, p.decoderLayers],
      heads: p.heads,
      ffn: p.ffnDim,
      vocab: p.vocabSize,
      max_positions: p.maxPositions,
    },
    special: { pad: config.padTokenId, eos: config.eosTokenId, decoder_start: config.decoderStartTokenId },
  };
}

type Ep = 'webgpu' | 'cpu' | 'cuda';

function deviceFor(ep: Ep, software: boolean): DeviceRequest {
  if (ep === 'webgpu') return { kind: 'webgpu', id: 0, software };
  return ep === 'cuda' ? { kind: 'cuda', id: 0 } : { kind: 'cpu' };
}

async function bench(options: {
  modelDir: string;
  ep: Ep;
  dtype: 'fp32' | 'fp16';
  software: boolean;
  prep: Prep;
  parts: [number, number][];
  newTokens: number;
  runs: number;
  threads: number;
  deadlineS: number;
  out: string;
  profile: boolean;
}): Promise<void> {
  const started = performance.now();
  const elapsedS = () => (performance.now() - started) / 1000;
  const engine = await TranslationEngine.load({
    modelDir: options.modelDir,
    dtype: options.dtype,
    intraOpThreads: options.threads,
    device: deviceFor(options.ep, options.software),
    // This arm measures the step loop; the search graph is benchSearch's.
    search: 'step-loop',
    ...(options.profile ? { profilePrefix: profilePrefix(options.out) } : {}),
  });
  const result = {
    arm: `mt-serve engine, step loop, ${options.ep} ${options.dtype}`,
    device: engine.device,
    dtype: engine.dtype,
    decoderOutputs: engine.decoderOutputs,
    loadS: elapsedS(),
    newTokensPerRow: options.newTokens,
    parts: {} as Record<string, PartResult>,
    tokensPerS: {} as Record<string, number>,
    errors: [] as string[],
    finished: false,
    profile: null as ReturnType<typeof summariseProfiles> | null,
  };
  const save = () => writeFileSync(options.out, `${JSON.stringify(result, null, 1)}\n`);
  save();
  try {
    if (options.ep !== 'cpu' && engine.device.kind !== options.ep) {
      throw new Error(`not on ${options.ep}: ${engine.device.fallbackReason ?? 'unknown'}`);
    }
    await timeParts(options, result, `${options.ep}`, elapsedS, save, async (rows, batch, beams) => {
      const settings = { numBeams: beams, maxNewTokens: options.newTokens, minNewTokens: options.newTokens };
      const call = async () =>
        (await Promise.all(rows.map((r) => engine.generateIds(r.inputIds, r.forcedTokenId, settings)))).map(
          (h) => h.tokens,
        );
      let before = engine.stats();
      const timed = await timeCalls(call, options.runs, batch, () => (before = engine.stats()));
      const after = engine.stats();
      const steps = after.decoderRuns - before.decoderRuns;
      const hostBytes = after.decoderHostBytes - before.decoderHostBytes;
      return {
        ...timed,
        counters: {
          decoderSteps: steps,
          decoderMsPerStep: (after.decoderMs - before.decoderMs) / steps,
          encoderMsPerCall: (after.encoderMs - before.encoderMs) / options.runs,
          searchMsPerStep: (after.searchMs - before.searchMs) / steps,
          layoutMsPerStep: (after.layoutMs - before.layoutMs) / steps,
          hostBytesPerStep: hostBytes / steps,
          hostBytesPerRowStep: hostBytes / (after.decoderRows - before.decoderRows),
        },
      };
    });
    result.finished = true;
  } catch (err) {
    result.errors.push(String((err as Error).stack ?? err));
  } finally {
    save();
    await engine.close();
    if (options.profile) {
      result.profile = summariseProfiles(profilePrefix(options.out), process.env.KEEP_PROFILE === '1');
      save();
    }
  }
}

/**
 * The search graph (engine/search-graph.ts): each call is one onnxruntime run over every row of the part, on the
 * provider `ep`. `inFlight` runs of the part's rows at once per call (several runs on one session: what the serving
 * path does to keep the device busy while a run's last rows finish).
 */
async function benchSearch(options: {
  modelDir: string;
  ep: Ep;
  dtype: 'fp32' | 'fp16';
  prep: Prep;
  parts: [number, number][];
  newTokens: number;
  runs: number;
  threads: number;
  inFlight: number;
  deadlineS: number;
  out: string;
}): Promise<void> {
  const started = performance.now();
  const elapsedS = () => (performance.now() - started) / 1000;
  const suffix = options.dtype === 'fp16' ? '_fp16' : '';
  const config = loadModelConfig(options.modelDir);
  const result = {
    arm: `mt-serve engine, search graph, ${options.ep} ${options.dtype}${options.inFlight > 1 ? `, ${options.inFlight} runs in flight` : ''}`,
    loadS: 0,
    newTokensPerRow: options.newTokens,
    parts: {} as Record<string, PartResult>,
    tokensPerS: {} as Record<string, number>,
    errors: [] as string[],
    finished: false,
  };
  const save = () => writeFileSync(options.out, `${JSON.stringify(result, null, 1)}\n`);
  let session: SearchSession | undefined;
  try {
    const graph = searchGraph(
      path.join(options.modelDir, `onnx/encoder_model${suffix}.onnx`),
      path.join(options.modelDir, `onnx/decoder_model_merged${suffix}.onnx`),
      config,
      { earlyStopping: config.generation.earlyStopping },
      { scratchDir: path.join(options.modelDir, 'search-scratch') },
    );
    if (!graph.ok) throw new Error(graph.reason);
    const provider = options.ep === 'cuda' ? { name: 'cuda', deviceId: 0 } : options.ep;
    session = await SearchSession.create(graph, config, {
      executionProviders: [provider as 'cpu'],
      intraOpNumThreads: options.threads,
      graphOptimizationLevel: 'all',
      logSeverityLevel: 3,
    });
    result.loadS = elapsedS();
    save();
    const label = `search ${options.ep} ${options.dtype}`;
    await timeParts(options, result, label, elapsedS, save, async (rows, batch, beams) => {
      const settings = {
        numBeams: beams,
        maxNewTokens: options.newTokens,
        minNewTokens: options.newTokens,
        lengthPenalty: config.generation.lengthPenalty,
      };
      const call = async () =>
        (await Promise.all(Array.from({ length: options.inFlight }, () => session!.run(rows, settings))))
          .flat()
          .map((r) => r.tokenIds);
      return timeCalls(call, options.runs, batch);
    });
    result.finished = true;
  } catch (err) {
    result.errors.push(String((err as Error).stack ?? err));
  } finally {
    save();
    await session?.release();
  }
}

/**
 * Each part (BATCHxBEAMS) of `options` measured by `measure` on its fixed rows and recorded in `result`, saved after
 * each; a part past the arm's deadline is skipped and named in `result.errors`.
 */
async function timeParts(
  options: { parts: [number, number][]; prep: Prep; runs: number; deadlineS: number },
  result: { parts: Record<string, PartResult>; tokensPerS: Record<string, number>; errors: string[] },
  label: string,
  elapsedS: () => number,
  save: () => void,
  measure: (
    rows: PrepRow[],
    batch: number,
    beams: number,
  ) => Promise<{ seconds: number[]; tokens: number; ids: number[][]; counters?: Partial<PartResult> }>,
): Promise<void> {
  for (const [batch, beams] of options.parts) {
    const key = `${batch}x${beams}`;
    if (elapsedS() > options.deadlineS) {
      result.errors.push(`${key}: skipped, past the ${options.deadlineS} s deadline`);
      continue;
    }
    const pool = batch === 1 ? options.prep.single : options.prep.batch;
    const rows = Array.from({ length: batch }, (_, i) => pool[i % pool.length]!);
    const { seconds, tokens, ids, counters } = await measure(rows, batch, beams);
    const tokensPerS = tokens / seconds.reduce((a, b) => a + b, 0);
    result.parts[key] = {
      batch,
      beams,
      runs: options.runs,
      tokensPerS,
      seconds,
      generatedTokens: tokens,
      ...counters,
      ids,
    };
    result.tokensPerS[key] = tokensPerS;
    console.error(`[${label} t=${elapsedS().toFixed(1)}s] ${key}: ${tokensPerS.toFixed(1)} tokens/s`);
    save();
  }
}

/**
 * One warm-up `call`, then `runs` timed ones: each call's seconds, the tokens of all, and the first `batch` rows' ids
 * of the last. `warm` runs between the warm-up and the timed calls (the step loop reads its counters there).
 */
async function timeCalls(
  call: () => Promise<number[][]>,
  runs: number,
  batch: number,
  warm?: () => void,
): Promise<{ seconds: number[]; tokens: number; ids: number[][] }> {
  await call();
  warm?.();
  const seconds: number[] = [];
  let ids: number[][] = [];
  let tokens = 0;
  for (let run = 0; run < runs; run++) {
    const t0 = performance.now();
    const out = await call();
    seconds.push((performance.now() - t0) / 1000);
    tokens += out.reduce((sum, row) => sum + row.length, 0);
    ids = out.slice(0, batch);
  }
  return { seconds, tokens, ids };
}

const profilePrefix = (out: string) => `${out}.ort-profile`;

interface ProfileEvent {
  cat?: string;
  name?: string;
  dur?: number;
  args?: { op_name?: string; provider?: string };
}

/**
 * Per profiled session (file order = session order: encoder, decoder, cross, head, …): its runs, and per run the
 * kernels by provider and by operator with their summed durations (µs, as onnxruntime times them: for the WebGPU
 * provider the time to record a kernel, not to execute it). Deletes the raw files (several MB each).
 */
function summariseProfiles(prefix: string, keep = false) {
  const dir = path.dirname(prefix);
  const files = readdirSync(dir)
    .filter((f) => f.startsWith(path.basename(prefix)) && f.endsWith('.json'))
    .sort();
  return files.map((file) => {
    const full = path.join(dir, file);
    const events = JSON.parse(readFileSync(full, 'utf8')) as ProfileEvent[];
    if (!keep) rmSync(full);
    const runs = events.filter((e) => e.cat === 'Session' && e.name === 'model_run');
    const kernels = events.filter((e) => e.cat === 'Node' && e.name?.endsWith('_kernel_time'));
    const perRun = (n: number) => (runs.length ? Math.round((n / runs.length) * 10) / 10 : 0);
    const group = (key: (e: ProfileEvent) => string) => {
      const out: Record<string, { count: number; us: number }> = {};
      for (const e of kernels) {
        const k = key(e);
        out[k] ??= { count: 0, us: 0 };
        out[k].count += 1;
        out[k].us += e.dur ?? 0;
      }
      return Object.fromEntries(
        Object.entries(out)
          .sort((a, b) => b[1].us - a[1].us)
          .map(([k, v]) => [k, { perRun: perRun(v.count), usPerRun: perRun(v.us) }]),
      );
    };
    // The WebGPU provider's own events ("Api"): one per GPU program dispatched, named `node&op&program`, timed on
    // the GPU by timestamp queries where the adapter has them.
    const programs = events.filter((e) => e.cat === 'Api');
    const byProgram: Record<string, { count: number; us: number }> = {};
    for (const e of programs) {
      const name = (e.name ?? '?').split('&').slice(1).join('&');
      byProgram[name] ??= { count: 0, us: 0 };
      byProgram[name].count += 1;
      byProgram[name].us += e.dur ?? 0;
    }
    const other: Record<string, number> = {};
    for (const e of events)
      if (e.cat !== 'Node' && e.cat !== 'Session') other[`${e.cat}`] = (other[`${e.cat}`] ?? 0) + 1;
    return {
      gpuProgramsPerRun: perRun(programs.length),
      gpuUsPerRun: perRun(programs.reduce((sum, e) => sum + (e.dur ?? 0), 0)),
      gpuByProgram: Object.fromEntries(
        Object.entries(byProgram)
          .sort((a, b) => b[1].us - a[1].us)
          .map(([k, v]) => [k, { perRun: perRun(v.count), usPerRun: perRun(v.us) }]),
      ),
      file,
      runs: runs.length,
      runUsMean: perRun(runs.reduce((sum, e) => sum + (e.dur ?? 0), 0)),
      kernelsPerRun: perRun(kernels.length),
      byProvider: group((e) => e.args?.provider ?? '?'),
      byOperator: group(
        (e) => `${e.args?.op_name ?? '?'} (${(e.args?.provider ?? '?').replace('ExecutionProvider', '')})`,
      ),
      otherEvents: other,
    };
  });
}

interface TorchResult {
  tokens_per_s?: Record<string, number>;
}

/**
 * Per part, every arm's tokens/s, its ratio to torch fp16 and fp32 at the same batch and beams, and its rows whose
 * tokens equal the reference arm's; with the served arm's JSON (bench/gpu/served.ts), served tokens/s per worker count
 * and concurrency ÷ the `servedVs` arm at that batch, and ÷ torch fp16 at batch 64 (the best-batch target).
 */
function summary(files: {
  arms: Record<string, string>;
  reference?: string;
  torch?: string;
  served?: string;
  servedVs?: string;
}) {
  const read = <T>(file: string) => JSON.parse(readFileSync(file, 'utf8')) as T;
  type Arm = { arm: string; tokensPerS: Record<string, number>; parts: Record<string, PartResult>; errors: string[] };
  const arms: Record<string, Arm> = {};
  for (const [name, file] of Object.entries(files.arms)) {
    try {
      arms[name] = read<Arm>(file);
    } catch (err) {
      arms[name] = { arm: name, tokensPerS: {}, parts: {}, errors: [`unreadable: ${(err as Error).message}`] };
    }
  }
  const torch = files.torch === undefined ? {} : (read<TorchResult>(files.torch).tokens_per_s ?? {});
  // torch-m2m100.py's keys: `fp16_b64_greedy`, `fp32_b64_beam2`.
  const torchAt = (dtype: string, part: string) => {
    const [batch, beams] = part.split('x');
    return torch[`${dtype}_b${batch}_${beams === '1' ? 'greedy' : `beam${beams}`}`];
  };
  const reference = files.reference === undefined ? undefined : arms[files.reference];
  const partNames = new Set(Object.values(arms).flatMap((a) => Object.keys(a.tokensPerS)));
  const parts: Record<string, unknown> = {};
  for (const part of partNames) {
    const row: Record<string, unknown> = {
      torchFp16TokensPerS: torchAt('fp16', part) ?? null,
      torchFp32TokensPerS: torchAt('fp32', part) ?? null,
    };
    for (const [name, arm] of Object.entries(arms)) {
      const got = arm.parts[part];
      if (got === undefined) continue;
      const ref = reference?.parts[part];
      const equal = ref ? got.ids.filter((ids, i) => JSON.stringify(ids) === JSON.stringify(ref.ids[i])).length : null;
      row[name] = {
        tokensPerS: got.tokensPerS,
        overTorchFp16: ratio(got.tokensPerS, torchAt('fp16', part)),
        overTorchFp32: ratio(got.tokensPerS, torchAt('fp32', part)),
        ...(equal === null ? {} : { rowsEqualReference: `${equal}/${got.ids.length}` }),
        ...(got.hostBytesPerRowStep === undefined ? {} : { hostBytesPerRowStep: got.hostBytesPerRowStep }),
        ...(got.decoderMsPerStep === undefined ? {} : { decoderMsPerStep: got.decoderMsPerStep }),
      };
    }
    parts[part] = row;
  }
  const served =
    files.served === undefined
      ? null
      : read<{
          devices: unknown[];
          levels: { workers: number; concurrency: number; tokensPerS: number }[];
          errors: string[];
        }>(files.served);
  const vs = files.servedVs === undefined ? undefined : arms[files.servedVs];
  const servedLevels = served?.levels.map(({ workers, concurrency, tokensPerS }) => ({
    workers,
    concurrency,
    tokensPerS,
    overEngine: ratio(tokensPerS, vs?.tokensPerS[`${concurrency}x1`]),
    // Beyond 64 against torch at 64, as the issue's best-batch target reads.
    overTorchFp16: ratio(tokensPerS, torchAt('fp16', `${Math.min(concurrency, 64)}x1`)),
  }));
  return {
    reference: files.reference ?? null,
    errors: Object.fromEntries(Object.entries(arms).map(([name, a]) => [name, a.errors])),
    parts,
    torch,
    ...(served === null
      ? {}
      : {
          served: { vs: files.servedVs ?? null, devices: served.devices, levels: servedLevels, errors: served.errors },
        }),
  };
}

const ratio = (a: number | undefined, b: number | undefined) => (a && b ? a / b : null);

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    model: { type: 'string' },
    preset: { type: 'string', default: 'm2m100-418m' },
    rows: { type: 'string', default: '256' },
    out: { type: 'string' },
    part: { type: 'string' },
    ep: { type: 'string' },
    prep: { type: 'string' },
    parts: { type: 'string', default: '1x1,64x1,64x2,256x1' },
    'new-tokens': { type: 'string', default: '16' },
    runs: { type: 'string', default: '3' },
    threads: { type: 'string', default: '0' },
    software: { type: 'boolean', default: false },
    profile: { type: 'boolean', default: false },
    'deadline-s': { type: 'string', default: '600' },
    dtype: { type: 'string', default: 'fp32' },
    search: { type: 'string', default: 'steps' },
    'in-flight': { type: 'string', default: '1' },
    arm: { type: 'string', multiple: true },
    reference: { type: 'string' },
    torch: { type: 'string' },
    served: { type: 'string' },
    'served-vs': { type: 'string' },
  },
});
const need = (name: keyof typeof values) => {
  const value = values[name];
  if (typeof value !== 'string') throw new Error(`--${name} is required`);
  return value;
};
const mode = positionals[0];
if (mode === 'prep') {
  writeFileSync(need('out'), JSON.stringify(prep(need('model'), need('preset'), Number(need('rows')))));
} else if (mode === 'graph') {
  const part = need('part');
  if (part !== 'encoder' && part !== 'decoder') throw new Error('--part is encoder or decoder');
  makeDemoModel(need('preset'), need('model'), { graphs: [part], quantize: false });
} else if (mode === 'fp16') {
  // The published `_fp16` layout of the model folder's fp32 files (engine/float16.ts).
  const dir = path.join(need('model'), 'onnx');
  for (const name of ['encoder_model', 'decoder_model_merged'])
    convertModelToFloat16(path.join(dir, `${name}.onnx`), path.join(dir, `${name}_fp16.onnx`));
} else if (mode === 'bench') {
  const ep = need('ep');
  if (ep !== 'webgpu' && ep !== 'cpu' && ep !== 'cuda') throw new Error('--ep is webgpu, cuda or cpu');
  const dtype = need('dtype');
  if (dtype !== 'fp32' && dtype !== 'fp16') throw new Error('--dtype is fp32 or fp16');
  const common = {
    modelDir: need('model'),
    ep,
    dtype,
    prep: JSON.parse(readFileSync(need('prep'), 'utf8')) as Prep,
    parts: need('parts')
      .split(',')
      .map((p) => p.split('x').map(Number) as [number, number]),
    newTokens: Number(need('new-tokens')),
    runs: Number(need('runs')),
    threads: Number(need('threads')),
    deadlineS: Number(need('deadline-s')),
    out: need('out'),
  } as const;
  if (need('search') === 'in-graph') await benchSearch({ ...common, inFlight: Number(need('in-flight')) });
  else await bench({ ...common, software: values.software === true, profile: values.profile === true });
} else if (mode === 'summary') {
  const arms = Object.fromEntries(
    (values.arm ?? []).map((a) => {
      const at = a.indexOf('=');
      return [a.slice(0, at), a.slice(at + 1)];
    }),
  );
  const result = summary({
    arms,
    ...(values.reference ? { reference: values.reference } : {}),
    ...(values.torch ? { torch: values.torch } : {}),
    ...(values.served ? { served: values.served } : {}),
    ...(values['served-vs'] ? { servedVs: values['served-vs'] } : {}),
  });
  writeFileSync(need('out'), `${JSON.stringify(result, null, 1)}\n`);
  console.log(JSON.stringify({ parts: result.parts, served: result.served ?? null }, null, 1));
} else {
  console.error('usage: driver prep|graph|bench|summary … (see bench/gpu/driver.ts)');
  process.exit(2);
}
