/**
 * @module bench/lib/models — the model folders the benchmark runs on, built on first use and reused after.
 *
 * - `m2m100-418m`: M2M100-418M's real shapes with random weights (tools/demo-model preset), ~2.5 GB of fp32
 *   files plus ~1.5 GB of int8 ones under `models/m2m100-418m` — every speed figure runs on it, so the compute is
 *   the real model's.
 * - `tiny`: the test model, for the serving-overhead figures where compute must not matter.
 * - `opus-mt-en-de`: Marian opus-mt-en-de's real shapes (~74M parameters), beside `m2m100-418m` on the same pair in
 *   the families figure; `tiny-opus-mt-en-de` stands in for it in smoke runs.
 * - `bench-mid`: a bench-only preset small enough that 14 copies fit this machine's memory (the one-engine-per-
 *   language side of the memory figure), with M2M100's vocabulary so its embedding dominates as in the real one.
 * - `m2m100-418m-external`, `tiny-external`: the same preset and seed with the weights in `*.onnx_data` files
 *   (the weight-layout figure): every tensor is drawn from a stream seeded by the model seed and its name, so the
 *   weights are the same bytes as the inline model's. Only the fp32 files are kept.
 *
 * A model is built into a temporary sibling folder and renamed into place when complete, so an interrupted
 * build is never mistaken for a model; a stamp records the generator version it was built by.
 */
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { PRESETS, type DemoPreset } from '../../model-server/tools/demo-model/index.js';
import { QUANTIZED_GRAPHS, QUANTIZED_SUFFIX } from '../../model-server/tools/quantize.js';
import { startProcess } from '../../harness/process-registry.js';
import { tsExecArgv } from './probe-runner.js';

export type BenchModel =
  | 'm2m100-418m'
  | 'tiny'
  | 'bench-mid'
  | 'm2m100-418m-external'
  | 'tiny-external'
  | 'opus-mt-en-de'
  | 'tiny-opus-mt-en-de';

/** The models that have an external-data twin, and its name. */
export const EXTERNAL_TWIN = {
  'm2m100-418m': 'm2m100-418m-external',
  tiny: 'tiny-external',
} as const satisfies Partial<Record<BenchModel, BenchModel>>;

/**
 * `bench-mid`: d_model 256, 6+6 layers, FFN 1024, M2M100's 128 112-token vocabulary (tied), ~45 M parameters
 * (~180 MB of fp32 weights): 14 copies take ~2.5 GB where 14 copies of the 418M model (~27 GB) would not fit.
 */
export const BENCH_MID_PRESET: DemoPreset = {
  ...PRESETS['m2m100-418m']!, // every other setting (tied embedding, HF-exact graphs) as the benchmark model
  name: 'bench-mid',
  dModel: 256,
  encoderLayers: 6,
  decoderLayers: 6,
  heads: 4,
  ffnDim: 1024,
  externalData: false,
  seed: 4545,
};

const buildEntry = fileURLToPath(
  new URL(`../build-model.${import.meta.url.endsWith('.ts') ? 'ts' : 'js'}`, import.meta.url),
);

const demoModelSources = fileURLToPath(new URL('../../model-server/tools/demo-model/', import.meta.url));
/** Sources the generator also runs: the int8 files are made by the quantizer, which writes ONNX with onnx-wire. */
const generatorDependencies = ['tools/quantize.ts', 'engine/graphs/onnx-wire.ts'].map((f) =>
  fileURLToPath(new URL(`../../model-server/${f}`, import.meta.url)),
);
const STAMP = '.bench-build.json';

/**
 * What a build depends on: the preset and the generator's source. A model folder whose stamp differs was built
 * by another version of the generator and is rebuilt (seconds for the small ones, ~a minute for the 418M).
 */
function fingerprint(preset: string): string {
  const hash = createHash('sha256').update(preset);
  for (const file of readdirSync(demoModelSources)
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .sort()) {
    hash.update(file).update(readFileSync(path.join(demoModelSources, file)));
  }
  for (const file of generatorDependencies) hash.update(path.basename(file)).update(readFileSync(file));
  return hash.digest('hex').slice(0, 16);
}

function isComplete(dir: string, stamp?: string): boolean {
  const files = ['config.json', 'tokenizer.json', 'onnx/encoder_model.onnx', 'onnx/decoder_model_merged.onnx'];
  if (!files.every((f) => existsSync(path.join(dir, f)))) return false;
  if (stamp === undefined) return true;
  try {
    return (JSON.parse(readFileSync(path.join(dir, STAMP), 'utf8')) as { fingerprint?: string }).fingerprint === stamp;
  } catch {
    return false;
  }
}

/** What the generator is given for `model` (a preset name or a preset's JSON), and whether its int8 files stay. */
function buildSpec(model: BenchModel): { preset: string; fp32Only: boolean } {
  switch (model) {
    case 'bench-mid':
      return { preset: JSON.stringify(BENCH_MID_PRESET), fp32Only: false };
    case 'm2m100-418m-external':
    case 'tiny-external': {
      const base = model === 'tiny-external' ? 'tiny' : 'm2m100-418m';
      // Name and seed unchanged: config.json and every weight stream are the inline model's.
      return { preset: JSON.stringify({ ...PRESETS[base]!, externalData: true }), fp32Only: true };
    }
    default:
      return { preset: model, fp32Only: false };
  }
}

/**
 * The folder of `model` under `modelsDir`, building it first when absent (minutes for the 418M model).
 * `log` receives a line when a build starts and ends.
 */
export async function ensureModel(model: BenchModel, modelsDir: string, log: (line: string) => void): Promise<string> {
  const dir = path.join(modelsDir, model);
  const { preset, fp32Only } = buildSpec(model);
  const stamp = fingerprint(preset);
  if (isComplete(dir, stamp)) return dir;
  mkdirSync(modelsDir, { recursive: true });
  const partial = `${dir}.partial-${process.pid}`;
  rmSync(partial, { recursive: true, force: true });
  log(`building model ${model} into ${dir} (once; reused by later runs)…`);
  const started = Date.now();
  const proc = startProcess({
    name: `build ${model}`,
    file: buildEntry,
    args: [preset, partial],
    execArgv: tsExecArgv(),
    env: process.env,
    logFile: `${partial}.log`,
  });
  const { code, signal } = await proc.exited;
  await proc.stop();
  if (code !== 0 || !isComplete(partial)) {
    rmSync(partial, { recursive: true, force: true });
    throw new Error(`building ${model} failed (exit ${code ?? signal}):\n${proc.log()}`);
  }
  rmSync(`${partial}.log`, { force: true });
  // The generator always quantizes; a twin kept for an fp32 comparison drops those files (~1.5 GB at 418M).
  if (fp32Only) {
    for (const graph of QUANTIZED_GRAPHS)
      for (const suffix of Object.values(QUANTIZED_SUFFIX))
        rmSync(path.join(partial, 'onnx', `${graph}${suffix}.onnx`));
  }
  writeFileSync(
    path.join(partial, STAMP),
    `${JSON.stringify({ preset: model, fingerprint: stamp, builtAt: new Date().toISOString() })}\n`,
  );
  if (isComplete(dir, stamp)) {
    rmSync(partial, { recursive: true, force: true }); // someone else finished first
  } else {
    rmSync(dir, { recursive: true, force: true });
    renameSync(partial, dir);
  }
  log(`model ${model} built in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return dir;
}
