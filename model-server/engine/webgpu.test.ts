/**
 * The engine on onnxruntime's WebGPU provider, through a software Vulkan adapter (Mesa's lavapipe: the same
 * provider code path a GPU takes, on any machine): its tokens are the CPU provider's. On CI (CI=true) lavapipe
 * is installed by .ci/run and these tests must run; elsewhere, without it, they are skipped saying why.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { Hypothesis } from './decoding.js';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { TranslationEngine, type TranslateOptions, type TranslateRow } from './engine.js';
import { seededRows } from '../test/engine-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'webgpu-'));
const tinyDir = path.join(root, 'tiny');
makeDemoModel('tiny', tinyDir);

const load = (device: Parameters<typeof TranslationEngine.load>[0]['device'], deviceState?: boolean) =>
  TranslationEngine.load({
    modelDir: tinyDir,
    intraOpThreads: 1,
    dtype: 'fp32',
    device,
    ...(deviceState === undefined ? {} : { deviceState }),
  });
const cpu = await load({ kind: 'cpu' });
const gpu = await load({ kind: 'webgpu', id: 0, software: true });
/** The WebGPU provider with every tensor through the host at every step (the state-on-device path's baseline). */
const throughHost = await load({ kind: 'webgpu', id: 0, software: true }, false);
const unavailable = gpu.device.kind === 'webgpu' ? undefined : gpu.device.fallbackReason;
if (unavailable !== undefined && process.env.CI !== 'true') {
  console.warn(`webgpu.test.ts skipped: no WebGPU adapter through lavapipe here (${unavailable}); .ci/run installs it`);
}

afterAll(async () => {
  await Promise.all([cpu.close(), gpu.close(), throughHost.close()]);
  rmSync(root, { recursive: true, force: true });
});

const WORDS = 'the of and to in is hello world good morning thank you please translate quick brown fox 42 , .'.split(
  ' ',
);

/** `count` rows of 1–20 words, mixed languages, from a fixed seed. */
const rows = (count: number, seed: number): TranslateRow[] => seededRows(count, seed, WORDS, 20);

const GREEDY: TranslateOptions = { numBeams: 1, maxNewTokens: 16 };
const BEAM: TranslateOptions = { numBeams: 2, maxNewTokens: 16 };
const ids = async (engine: TranslationEngine, list: TranslateRow[], options: TranslateOptions) =>
  (await engine.translate(list, options)).map((t) => t.tokenIds);

describe('WebGPU through lavapipe', () => {
  it.runIf(unavailable !== undefined && process.env.CI === 'true')('is available on CI', () => {
    expect.fail(`CI must run the WebGPU tests: ${unavailable}`);
  });

  describe.skipIf(unavailable !== undefined)('the engine on WebGPU', () => {
    it('says where it runs: WebGPU, a software adapter', () => {
      expect(gpu.device).toEqual({ kind: 'webgpu', id: 0, provider: 'webgpu', software: true });
      expect(gpu.dtype).toBe('fp32');
    });

    it.each<[string, TranslateOptions, TranslateRow[]]>([
      ['greedy', GREEDY, rows(6, 3)],
      ['beam 2', BEAM, rows(4, 5)],
    ])(
      '%s: a batch gives the CPU provider tokens, row for row, with its state on the device or through the host',
      async (_mode, options, list) => {
        const expected = await ids(cpu, list, options);
        expect(await ids(gpu, list, options)).toEqual(expected);
        expect(await ids(throughHost, list, options)).toEqual(expected);
      },
    );

    it('rows encoded in several groups (similar source lengths together) give the CPU provider tokens', async () => {
      // Sorted by length into groups, each padded to the longest source and put back in admission order on the device.
      const list = seededRows(40, 31, WORDS, 40);
      const before = gpu.stats();
      expect(await ids(gpu, list, GREEDY)).toEqual(await ids(cpu, list, GREEDY));
      const after = gpu.stats();
      expect(after.encoderCalls - before.encoderCalls).toBeGreaterThanOrEqual(2);
      expect(after.encoderRuns - before.encoderRuns).toBe(1);
    });

    it('state on the device: a greedy step moves at most 64 bytes per row between host and device (the host path: the caches)', async () => {
      const list = rows(6, 3);
      /** Host bytes per row-step beyond the first steps: two generations of fixed lengths, differenced. */
      const perRowStep = async (engine: TranslationEngine, options: TranslateOptions) => {
        const run = async (steps: number) => {
          const before = engine.stats();
          const out = await ids(engine, list, { ...options, maxNewTokens: steps, minNewTokens: steps });
          const after = engine.stats();
          return {
            out,
            bytes: after.decoderHostBytes - before.decoderHostBytes,
            rows: after.decoderRows - before.decoderRows,
          };
        };
        const short = await run(6);
        const long = await run(16);
        return {
          out: long.out,
          bytes: (long.bytes - short.bytes) / (long.rows - short.rows),
          whole: long.bytes / long.rows,
        };
      };
      const onDevice = await perRowStep(gpu, GREEDY);
      const viaHost = await perRowStep(throughHost, GREEDY);
      expect(onDevice.out).toEqual((await perRowStep(cpu, GREEDY)).out);
      expect(viaHost.out).toEqual(onDevice.out);
      // What the engine moves (docs/engine.md: onnxruntime's own copies for nodes it puts on the CPU are not seen).
      // A greedy row's step: its last token (8 bytes) in, its top-2 values, ids and normaliser (20 bytes) out; per
      // step k (8 bytes) and the decoder graph's beam switch left off (9 bytes), shared by the rows.
      expect(onDevice.bytes).toBeLessThanOrEqual(64);
      // The first steps too: the encoder's states go to the cross graph on the device (encode-device.ts); what
      // crosses once per row is its encoder mask (4 bytes a source token) and its group's mask for the cross graph.
      expect(onDevice.whole).toBeLessThanOrEqual(64);
      // Beam 2 (12 rows): per row its token in and its top-5 out (8 + 5·8 + 4), the parents to reorder by (8); per
      // step k, the switch and the re-layout's lengths (8 + 9 + 88), shared by the rows.
      const beam = await perRowStep(gpu, BEAM);
      expect(beam.out).toEqual((await perRowStep(cpu, BEAM)).out);
      expect(beam.bytes).toBeLessThanOrEqual(60 + 105 / 12);
      // Through the host, at least the self-attention cache (2 per layer) crosses every step.
      expect(viaHost.bytes).toBeGreaterThan(2 * gpu.config.decoderLayers * gpu.config.dModel * 4);
    });

    it('rows joining mid-generation give the CPU provider tokens', async () => {
      const run = async (engine: TranslationEngine) => {
        const long: TranslateRow = { srcLang: 'en', tgtLang: 'fr', text: 'the quick brown fox jumps over the dog' };
        const fixed: TranslateOptions = { numBeams: 1, maxNewTokens: 20, minNewTokens: 20 };
        let joined: Promise<number[][][]> | null = null;
        const before = engine.stats();
        const longRun = ids(engine, [long], fixed);
        // When the short row finishes (step 3 of the long one's 20), more rows arrive: they start at the next step.
        await engine.translate([{ ...long, text: 'hello' }], { ...fixed, maxNewTokens: 3, minNewTokens: 3 }, () => {
          joined = Promise.all([ids(engine, rows(3, 11), GREEDY), ids(engine, rows(1, 13), BEAM)]);
        });
        const out = { long: await longRun, joined: await joined! };
        const after = engine.stats();
        return { out, encoderRuns: after.encoderRuns - before.encoderRuns, merges: after.merges - before.merges };
      };
      const onGpu = await run(gpu);
      const onCpu = await run(cpu);
      expect(onGpu.out).toEqual(onCpu.out);
      expect(onGpu.encoderRuns).toBe(2);
      expect(onGpu.merges).toBe(onCpu.merges);
    });

    it('a row with a token outside the vocabulary fails alone (checked on the host: a GPU Gather does not check); the others are the CPU provider tokens', async () => {
      const outside = 9999;
      const gather = (engine: TranslationEngine) => {
        const good = rows(5, 23).map((row) => engine.prepare(row));
        return Promise.allSettled<Hypothesis>([
          ...good.map((p) => engine.generateIds(p.inputIds, p.forcedTokenId, GREEDY)),
          engine.generateIds(good[0]!.inputIds, outside, GREEDY),
          engine.generateIds([...good[1]!.inputIds.slice(0, 2), outside, 2], good[1]!.forcedTokenId, GREEDY),
        ]);
      };
      const tokens = (settled: PromiseSettledResult<Hypothesis>[]) =>
        settled.map((r) => (r.status === 'fulfilled' ? r.value.tokens : 'failed'));
      const onGpu = await gather(gpu);
      for (const bad of onGpu.slice(5)) {
        expect(bad).toMatchObject({
          status: 'rejected',
          reason: { message: expect.stringContaining('token id 9999 is outside the vocabulary') },
        });
      }
      // The CPU provider fails those rows in its runs instead (engine.test.ts); the other rows are unaffected.
      expect(tokens(onGpu)).toEqual(tokens(await gather(cpu)));
    });
  });
});
