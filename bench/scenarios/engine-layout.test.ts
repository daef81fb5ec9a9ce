import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureModel } from '../lib/models.js';
import { tempDir } from '../../harness/process-registry.js';
import { layoutSection, runLayoutProbe, type LayoutProbeRequest, type LayoutProbeResult } from './engine-layout.js';

describe('engine-layout: inline weights vs external data, tiny model', () => {
  const work = tempDir('engine-layout-test');
  let request: LayoutProbeRequest;
  let result: LayoutProbeResult;
  beforeAll(async () => {
    request = {
      kind: 'layout',
      inlineDir: await ensureModel('tiny', work.dir, () => {}),
      externalDir: await ensureModel('tiny-external', work.dir, () => {}),
      batches: [16, 1],
      pairs: 2,
      newTokens: 8,
      intraOpThreads: 1,
    };
    result = await runLayoutProbe(request);
  });
  afterAll(() => work.remove());

  it('takes the fast path on both layouts', () => {
    for (const load of Object.values(result.loads)) {
      expect(load.decoderOutputs.notes).toEqual([]);
      expect(load.decoderOutputs.appendedCache).not.toBeNull();
      expect(load.decoderOutputs.greedyTop2).not.toBeNull();
      expect(load.fastPath).toBe(true);
      expect(load.loadMs).toBeGreaterThan(0);
    }
  });

  it('gives the same tokens for every sentence on both layouts, in interleaved rounds', () => {
    expect(result.batches.map((b) => [b.batch, b.rounds, b.sentences])).toEqual([
      [16, 2, 32],
      [1, 8, 8],
    ]);
    for (const b of result.batches) {
      expect(b.identical).toBe(b.sentences);
      expect(b.tokensPerS.inline).toHaveLength(b.rounds);
      expect(b.ratios.every((r) => Number.isFinite(r) && r > 0)).toBe(true);
    }
  });

  it('reports a ratio target per batch size and the fast path of both', () => {
    const s = layoutSection(result, request, 'tiny');
    expect(s.targets.map((t) => [t.name, t.comparison, t.threshold])).toEqual([
      ['inline ÷ external engine tokens/s, batch 16', '>=', 0.95],
      ['inline ÷ external engine tokens/s, batch 1', '>=', 0.95],
      ['layouts on the fast path (of 2)', '>=', 2],
    ]);
    expect(s.targets[2]!.met).toBe(true);
    expect(s.tables[0]!.rows.map((row) => row[6])).toEqual(['32/32', '8/8']);
  });
});
