/**
 * beam-head.ts: the GPU heads answer what the TopK head answers, as the step loop reads it — the rounds head the
 * same top k (values, ids, ties to the lower id), the greedy head the same best id and, where `</s>` is best, the same
 * runner-up — with the same log-sum-exp, also for logits large enough to overflow a naive exp-sum. On the CPU
 * provider and, where lavapipe offers an adapter, on the WebGPU provider they are built for.
 */
import * as ort from 'onnxruntime-node';
import { describe, expect, it } from 'vitest';
import { Mulberry32 } from '../tools/demo-model/prng.js';
import { BEAM_HEAD_OUTPUTS, beamHeadModel, greedyHeadModel, roundsHeadModel } from './beam-head.js';
import { restrictVulkanDrivers, webgpuDrivers } from './vulkan-drivers.js';

const VOCAB = 1000;
const EOS = 2;
const ROWS = 6;

const drivers = webgpuDrivers(true);
if (drivers.ok) restrictVulkanDrivers(drivers.manifests);
const providers: [string, ort.InferenceSession.ExecutionProviderConfig][] = [['cpu', 'cpu']];
if (drivers.ok) providers.push(['webgpu', { name: 'webgpu' } as ort.InferenceSession.ExecutionProviderConfig]);
else if (process.env.CI !== 'true') console.warn(`beam-head.test.ts: WebGPU part skipped: ${drivers.reason}`);

/** [ROWS, 2, VOCAB] logits (the head reads the last position): coarse values, so ties are common; `</s>` best in row 1. */
function logits(seed: number, scale: number): ort.Tensor {
  const rng = new Mulberry32(seed);
  const data = Float32Array.from({ length: ROWS * 2 * VOCAB }, () => Math.round(rng.next() * 40) * scale);
  const last = (row: number, id: number) => (row * 2 + 1) * VOCAB + id;
  data[last(1, EOS)] = 100 * scale;
  data[last(2, 7)] = data[last(2, 9)] = 100 * scale;
  return new ort.Tensor('float32', data, [ROWS, 2, VOCAB]);
}

const run = async (session: ort.InferenceSession, x: ort.Tensor, k: number) => {
  const out = await session.run({ logits: x, k: new ort.Tensor('int64', BigInt64Array.of(BigInt(k)), [1]) });
  return {
    values: Array.from(out[BEAM_HEAD_OUTPUTS.values]!.data as Float32Array),
    ids: Array.from(out[BEAM_HEAD_OUTPUTS.ids]!.data as Int32Array),
    lse: Array.from(out[BEAM_HEAD_OUTPUTS.logSumExp]!.data as Float32Array),
  };
};

describe('beam-head', () => {
  it.runIf(!drivers.ok && process.env.CI === 'true')('has its WebGPU part on CI', () => {
    expect.fail(`CI must run the WebGPU part: ${drivers.ok ? '' : drivers.reason}`);
  });

  for (const [label, provider] of providers) {
    it(`${label}: the rounds and greedy heads give the TopK head's answers`, async () => {
      const options = { executionProviders: [provider], logSeverityLevel: 3 as const };
      const reference = await ort.InferenceSession.create(beamHeadModel(), { logSeverityLevel: 3 });
      const rounds = await ort.InferenceSession.create(roundsHeadModel(VOCAB, 5), options);
      const greedy = await ort.InferenceSession.create(greedyHeadModel(VOCAB, EOS), options);
      try {
        // Scale 3: logits up to 300, where exp overflows float32 unless the max is taken out first.
        for (const [seed, scale] of [
          [1, 0.1],
          [2, 3],
        ] as const) {
          const x = logits(seed, scale);
          const want = await run(reference, x, 5);
          const got = await run(rounds, x, 5);
          expect(got.ids).toEqual(want.ids);
          expect(got.values).toEqual(want.values);
          const top2 = await run(reference, x, 2);
          const g = await run(greedy, x, 2);
          for (let r = 0; r < ROWS; r++) {
            expect(g.ids[2 * r], `row ${r} best`).toBe(top2.ids[2 * r]);
            expect(g.values[2 * r]).toBe(top2.values[2 * r]);
            // The runner-up is read only where </s> came first.
            if (top2.ids[2 * r] === EOS) expect(g.ids[2 * r + 1], `row ${r} runner-up`).toBe(top2.ids[2 * r + 1]);
          }
          for (const lse of [got.lse, g.lse]) {
            lse.forEach((v, r) => {
              expect(Number.isFinite(v)).toBe(true);
              expect(Math.abs(v - want.lse[r]!)).toBeLessThan(1e-3 * Math.max(1, Math.abs(want.lse[r]!)));
            });
          }
        }
      } finally {
        await Promise.all([reference.release(), rounds.release(), greedy.release()]);
      }
    });
  }
});
