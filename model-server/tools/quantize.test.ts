import { execFile } from 'node:child_process';
import {
  cpSync,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import onnxProto from 'onnx-proto';
import '../engine/ort-env.js';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { resolveEntry } from '../../common/entry.js';
import '../../harness/compiled.js';
import { makeDemoModel, PRESETS } from './demo-model/index.js';
import { ElemType, encodeModel, GraphBuilder, WeightSink } from './demo-model/onnx-builder.js';
import { type TranslateRow, TranslationEngine } from '../engine/engine.js';
import { quantizeModelDir, quantizeModelFile } from './quantize.js';
import { chooseDtype, dtypeOfFile } from '../engine/session.js';
import { seededRows, transformersReference } from '../test/engine-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'quantize-'));
const tinyDir = path.join(root, 'tiny');
/** The CLI as a user runs it: from dist/ when the build is current (harness/compiled.ts), else through tsx. */
const CLI = resolveEntry(import.meta.url, '../cli');
const engines: TranslationEngine[] = [];

async function load(modelDir: string, extra: Partial<Parameters<typeof TranslationEngine.load>[0]> = {}) {
  const engine = await TranslationEngine.load({ modelDir, intraOpThreads: 1, ...extra });
  engines.push(engine);
  return engine;
}

beforeAll(() => {
  makeDemoModel('tiny', tinyDir);
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  rmSync(root, { recursive: true, force: true });
});

const WORDS =
  'the of and to in is hello world good morning thank you please translate quick brown fox 42 , . ! ?'.split(' ');

const rows = (count: number, seed: number): TranslateRow[] => seededRows(count, seed, WORDS, 40);

const GREEDY = { numBeams: 1, maxNewTokens: 40 };

describe('quantize', () => {
  it('replaces every constant-weight MatMul, the Gemm LM head and the embedding Gathers, with 7-bit per-column weights', () => {
    const out = path.join(root, 'decoder_q8.onnx');
    const report = quantizeModelFile(path.join(tinyDir, 'onnx/decoder_model_merged.onnx'), out);
    const p = PRESETS.tiny!;
    // Per decoder layer: q, k, v, out of self-attention, q and out of cross-attention, fc1, fc2 at top level, and
    // cross-attention k, v inside the If's compute branch.
    expect(report.quantized).toEqual({ MatMul: p.decoderLayers * 10, Gemm: 1, Gather: 2 });
    const model = onnxProto.onnx.ModelProto.decode(readFileSync(out));
    const ops = new Map<string, number>();
    const walk = (g: onnxProto.onnx.IGraphProto) => {
      for (const node of g.node ?? []) {
        ops.set(node.opType!, (ops.get(node.opType!) ?? 0) + 1);
        for (const a of node.attribute ?? []) if (a.g) walk(a.g);
      }
    };
    walk(model.graph!);
    expect(ops.get('MatMulInteger')).toBe(p.decoderLayers * 10 + 1);
    expect(ops.get('Gemm')).toBeUndefined();
    // What stays float MatMul is attention's activation × activation products (2 per attention).
    expect(ops.get('MatMul')).toBe(p.decoderLayers * 4);
    const int8 = model.graph!.initializer!.filter((t) => t.dataType === 3 && t.dims!.length === 2);
    const absMax = (tensors: typeof int8) =>
      tensors.reduce(
        (m, t) =>
          new Int8Array(t.rawData!.buffer, t.rawData!.byteOffset, t.rawData!.length).reduce(
            (a, v) => Math.max(a, Math.abs(v)),
            m,
          ),
        0,
      );
    // Embeddings use the full range (GatherQuant); MatMul weights the published 7 bits (reduce_range).
    expect(absMax(int8.filter((t) => t.name!.endsWith('_gather_quantized')))).toBe(127);
    expect(absMax(int8.filter((t) => !t.name!.endsWith('_gather_quantized')))).toBe(64);
    // No float weight left but the ones nothing quantizes (biases, layer norms, the eos bias).
    expect(model.graph!.initializer!.filter((t) => t.dataType === 1 && t.dims!.length === 2)).toEqual([]);
  });

  it('reads inline and external weights alike: the int8 models translate the same', async () => {
    const externalDir = path.join(root, 'tiny-external');
    makeDemoModel({ ...PRESETS.tiny!, externalData: true }, externalDir);
    expect(existsSync(path.join(externalDir, 'onnx/decoder_model_merged.onnx_data'))).toBe(true);
    const inline = await load(tinyDir, { dtype: 'q8' });
    const external = await load(externalDir, { dtype: 'q8' });
    const list = rows(12, 5);
    expect((await external.translate(list, GREEDY)).map((t) => t.tokenIds)).toEqual(
      (await inline.translate(list, GREEDY)).map((t) => t.tokenIds),
    );
  });

  it('`model-server quantize` writes both int8 pairs beside the fp32 files', async () => {
    const dir = path.join(root, 'cli');
    cpSync(tinyDir, dir, { recursive: true });
    for (const suffix of ['_quantized', '_quantized_rows']) {
      for (const name of ['encoder_model', 'decoder_model_merged'])
        rmSync(path.join(dir, `onnx/${name}${suffix}.onnx`));
    }
    const { stdout } = await promisify(execFile)(process.execPath, [
      ...CLI.execArgv,
      CLI.file,
      'quantize',
      '--model-dir',
      dir,
      '--dtype',
      'all',
    ]);
    expect(stdout).toMatch(/quantized .*decoder_model_merged_quantized\.onnx: 2 Gather, 20 MatMul, 1 Gemm; /);
    for (const suffix of ['_quantized', '_quantized_rows']) {
      for (const name of ['encoder_model', 'decoder_model_merged']) {
        const file = `onnx/${name}${suffix}.onnx`;
        expect(readFileSync(path.join(dir, file))).toEqual(readFileSync(path.join(tinyDir, file)));
      }
    }
  });
});

describe('quantize: files it reads and writes', () => {
  const copyOf = (name: string, from = tinyDir) => {
    const dir = path.join(root, name);
    cpSync(from, dir, { recursive: true });
    return dir;
  };
  const onnxFiles = (dir: string) => readdirSync(path.join(dir, 'onnx')).sort();

  it('refuses an output that is a symlink, and writes nothing through it', () => {
    const dir = copyOf('symlinked-output');
    const victim = path.join(root, 'victim.txt');
    writeFileSync(victim, 'not a model');
    const output = path.join(dir, 'onnx/encoder_model_quantized.onnx');
    rmSync(output);
    symlinkSync(victim, output);
    expect(() => quantizeModelDir(dir)).toThrow(/encoder_model_quantized\.onnx is a symlink/);
    expect(() => quantizeModelFile(path.join(dir, 'onnx/encoder_model.onnx'), output)).toThrow(/is a symlink/);
    expect(readFileSync(victim, 'utf8')).toBe('not a model');
  });

  it('refuses an external-data location that leaves the model folder', () => {
    const dir = path.join(root, 'escaping');
    makeDemoModel({ ...PRESETS.tiny!, externalData: true }, dir);
    const graph = path.join(dir, 'onnx/decoder_model_merged.onnx');
    const location = 'decoder_model_merged.onnx_data';
    const escape = '../../../../outside/secret.bin'; // the same length: the protobuf stays valid
    expect(escape).toHaveLength(location.length);
    const bytes = readFileSync(graph);
    writeFileSync(graph, Buffer.from(bytes.toString('latin1').replaceAll(location, escape), 'latin1'));
    expect(() => quantizeModelDir(dir)).toThrow(
      /external data location "\.\.\/\.\.\/\.\.\/\.\.\/outside\/secret\.bin" is outside/,
    );
  });

  it('a failed run leaves the old pair whole and no temporary file; a good run replaces both', () => {
    const dir = copyOf('failing');
    const before = onnxFiles(dir);
    const oldEncoder = readFileSync(path.join(dir, 'onnx/encoder_model_quantized.onnx'));
    const decoder = path.join(dir, 'onnx/decoder_model_merged.onnx');
    const good = readFileSync(decoder);
    writeFileSync(decoder, good.subarray(0, 100));
    expect(() => quantizeModelDir(dir)).toThrow();
    expect(onnxFiles(dir)).toEqual(before);
    expect(readFileSync(path.join(dir, 'onnx/encoder_model_quantized.onnx'))).toEqual(oldEncoder);
    writeFileSync(decoder, good);
    quantizeModelDir(dir);
    expect(onnxFiles(dir)).toEqual(before);
    for (const name of ['encoder_model', 'decoder_model_merged']) {
      const file = `onnx/${name}_quantized.onnx`;
      expect(readFileSync(path.join(dir, file))).toEqual(readFileSync(path.join(tinyDir, file)));
    }
  });

  it('an unknown --dtype is the usage error (exit 2), names included that objects inherit', async () => {
    for (const dtype of ['toString', 'q4']) {
      const failed = await promisify(execFile)(process.execPath, [
        ...CLI.execArgv,
        CLI.file,
        'quantize',
        '--dtype',
        dtype,
      ])
        .then(() => undefined)
        .catch((err: { code: number; stderr: string }) => err);
      expect(failed?.code).toBe(2);
      expect(failed?.stderr).toContain(`--dtype must be q8, q8-rows or all (got ${dtype})`);
      expect(failed?.stderr).toContain('usage: model-server');
    }
  });
});

describe('MODEL_DTYPE', () => {
  it('auto picks q8-rows on the CPU when its files are there, then q8, then fp32, and says why', () => {
    expect(chooseDtype(tinyDir, 'auto', 'cpu')).toEqual({
      dtype: 'q8-rows',
      requested: 'auto',
      reason: 'auto on CPU: q8-rows',
    });
    const dir = path.join(root, 'fp32-only');
    cpSync(tinyDir, dir, { recursive: true });
    for (const name of ['encoder_model', 'decoder_model_merged'])
      rmSync(path.join(dir, `onnx/${name}_quantized_rows.onnx`));
    expect(chooseDtype(dir, 'auto', 'cpu').reason).toBe('auto on CPU: q8 (no q8-rows files)');
    for (const name of ['encoder_model', 'decoder_model_merged']) rmSync(path.join(dir, `onnx/${name}_quantized.onnx`));
    expect(chooseDtype(dir, 'auto', 'cpu')).toEqual({
      dtype: 'fp32',
      requested: 'auto',
      reason: 'auto on CPU: fp32 (no q8-rows, q8 files)',
    });
    expect(chooseDtype(dir, 'auto', 'cuda')).toEqual({
      dtype: 'fp32',
      requested: 'auto',
      reason: 'auto on CUDA: fp32 (no fp16 files)',
    });
    expect(dtypeOfFile('onnx/decoder_model_merged_quantized_rows.onnx')).toBe('q8-rows');
    expect(dtypeOfFile('onnx/decoder_model_merged_quantized.onnx')).toBe('q8');
    expect(dtypeOfFile('onnx/decoder_model_merged.onnx')).toBe('fp32');
  });

  it('a dtype whose files are missing is refused at load, naming them and how to make them', async () => {
    const dir = path.join(root, 'no-q8');
    cpSync(tinyDir, dir, { recursive: true });
    rmSync(path.join(dir, 'onnx/decoder_model_merged_quantized.onnx'));
    const refused = (dtype: 'q8' | 'fp16') => TranslationEngine.load({ modelDir: dir, dtype }).catch((e: unknown) => e);
    const q8 = await refused('q8');
    expect(q8).toBeInstanceOf(ServeError);
    expect((q8 as ServeError).code).toBe('WORKER_START_FAILED');
    expect((q8 as Error).message).toBe(
      `MODEL_DTYPE=q8: ${dir} has no onnx/decoder_model_merged_quantized.onnx; write them with \`node dist/model-server/cli.js quantize --model-dir ${dir}\`.`,
    );
    expect(((await refused('fp16')) as Error).message).toBe(
      `MODEL_DTYPE=fp16: ${dir} has no onnx/encoder_model_fp16.onnx or onnx/decoder_model_merged_fp16.onnx; download them with DTYPE=fp16 scripts/download-model.sh.`,
    );
  });

  it('q8 and q8-rows take the fast path (appended cache, top-2) and give the tokens of their graphs as exported', async () => {
    const list = rows(16, 23);
    for (const dtype of ['q8', 'q8-rows'] as const) {
      const fast = await load(tinyDir, { dtype });
      expect(fast.dtype).toBe(dtype);
      expect(fast.decoderOutputs.appendedCache).toHaveLength(2 * fast.config.decoderLayers);
      expect(fast.decoderOutputs.greedyTop2).not.toBeNull();
      const slow = await load(tinyDir, { dtype, decoderGraph: 'as-exported' });
      // q8 quantizes an activation with one scale over the tensor, so its numbers depend on the rows run together,
      // and the fast path runs the cross-attention projections over the batch's real tokens packed into one sequence
      // (encode.ts), the graph as exported over the padded batch: q8 is compared one string at a time,
      // batch-invariant q8-rows batched.
      const batches = dtype === 'q8' ? list.map((row) => [row]) : [list];
      for (const options of [GREEDY, { numBeams: 3, maxNewTokens: 30 }]) {
        for (const batch of batches) {
          expect((await fast.translate(batch, options)).map((t) => t.tokenIds)).toEqual(
            (await slow.translate(batch, options)).map((t) => t.tokenIds),
          );
        }
      }
    }
  });

  it('q8 equals transformers.js with dtype q8 on the same files, text for text (one string at a time)', async () => {
    const transformers = await transformersReference(root, 'tiny', 'q8');
    const ours = await load(tinyDir, { dtype: 'q8' });
    const fp32 = await load(tinyDir, { dtype: 'fp32' });
    let differsFromFp32 = 0;
    for (const row of rows(16, 29)) {
      const reference = await transformers.translate(row, 40);
      const [served] = await ours.translate([row], GREEDY);
      expect([2, ...served!.tokenIds]).toEqual(reference.tokenIds);
      expect(served!.text).toBe(reference.text);
      const [float] = await fp32.translate([row], GREEDY);
      if (float!.text !== served!.text) differsFromFp32++;
    }
    // The q8 files really are another model: some answers differ from fp32's (random weights amplify it).
    expect(differsFromFp32).toBeGreaterThan(0);
    await transformers.dispose();
  });

  it('q8-rows: a row in a batch of 64 gives exactly what it gives alone', async () => {
    const engine = await load(tinyDir, { dtype: 'q8-rows' });
    const list = rows(64, 41);
    const batched = (await engine.translate(list, GREEDY)).map((t) => t.tokenIds);
    for (const [i, row] of list.entries()) {
      expect((await engine.translate([row], GREEDY))[0]!.tokenIds).toEqual(batched[i]);
    }
  });
});

describe('quantizeModelFile on the Hugging Face merged layout', () => {
  it('quantizes products inside both If branches against one outer weight, once, and computes what fp32 does', async () => {
    // optimum's merged decoder: If(use_cache_branch) holding a whole decoder in each branch, the weights outside.
    const g = new GraphBuilder(new WeightSink(7));
    const x = g.input('x', ElemType.FLOAT, ['batch_size', 3, 16]);
    const useCache = g.input('use_cache_branch', ElemType.BOOL, [1]);
    const w = g.weight('model.decoder.layers.0.fc1.weight', [16, 8], { kind: 'uniform', std: 0.5 });
    const branches = [2, 3].map((scale) => {
      const b = g.branch();
      const y = b.op('Mul', [b.op('MatMul', [x, w]), b.float(scale)]);
      b.output(y, `y_${scale}`, ElemType.FLOAT, ['batch_size', 3, 8]);
      return b.graph(`branch_${scale}`);
    });
    g.opN('If', [useCache], { then_branch: { g: branches[0]! }, else_branch: { g: branches[1]! } }, ['y']);
    g.outputs.push({ name: 'y', type: { tensorType: { elemType: ElemType.FLOAT } } });
    const source = path.join(root, 'merged-layout.onnx');
    const output = path.join(root, 'merged-layout_quantized.onnx');
    writeFileSync(source, encodeModel(g.graph('merged_layout'), 'test'));
    const report = quantizeModelFile(source, output);
    expect(report.quantized).toEqual({ MatMul: 2 });
    expect(report.int8Weights).toBe(1);
    const model = onnxProto.onnx.ModelProto.decode(readFileSync(output));
    expect(model.graph!.initializer!.map((t) => t.name)).not.toContain('model.decoder.layers.0.fc1.weight');
    const fp32 = await ort.InferenceSession.create(source);
    const q8 = await ort.InferenceSession.create(output);
    const input = Float32Array.from({ length: 2 * 3 * 16 }, (_, i) => Math.sin(i));
    for (const cache of [0, 1]) {
      const feeds = {
        x: new ort.Tensor('float32', input, [2, 3, 16]),
        use_cache_branch: new ort.Tensor('bool', Uint8Array.of(cache), [1]),
      };
      const [a, b] = [await fp32.run(feeds), await q8.run(feeds)].map((o) => o.y!.data as Float32Array);
      const scale = a!.reduce((m, v) => Math.max(m, Math.abs(v)), 0);
      expect(a!.every((v, i) => Math.abs(v - b![i]!) < 0.05 * scale)).toBe(true);
      expect(a!.some((v, i) => v !== b![i])).toBe(true);
    }
    await fp32.release();
    await q8.release();
  });
});

describe('quantizeModelDir', () => {
  it('names its outputs as transformers.js does (q8) and q8-rows beside them', () => {
    const dir = path.join(root, 'names');
    cpSync(tinyDir, dir, { recursive: true });
    const reports = quantizeModelDir(dir, { activations: 'row' });
    expect(reports.map((r) => path.relative(dir, r.output))).toEqual([
      'onnx/encoder_model_quantized_rows.onnx',
      'onnx/decoder_model_merged_quantized_rows.onnx',
    ]);
  });
});
