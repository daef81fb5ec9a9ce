import { cpSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import './ort-env.js';
import * as ort from 'onnxruntime-node';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { DEMO_LANGUAGES, makeDemoModel } from '../tools/demo-model/index.js';
import type { Hypothesis } from './decoding.js';
import { sourceLengthCap, type TranslateOptions, type TranslateRow, TranslationEngine } from './engine.js';
import { MAX_PACKED_TOKENS } from './loop/encode.js';
import { seededRows, transformersReference } from '../test/engine-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'engine-'));
const tinyDir = path.join(root, 'tiny');
const joinableDir = path.join(root, 'tiny-joinable');
const engines: TranslationEngine[] = [];
let tiny: TranslationEngine;
let joinable: TranslationEngine;

async function load(modelDir: string, extra: Partial<Parameters<typeof TranslationEngine.load>[0]> = {}) {
  const engine = await TranslationEngine.load({ modelDir, intraOpThreads: 1, dtype: 'fp32', ...extra });
  engines.push(engine);
  return engine;
}

beforeAll(async () => {
  makeDemoModel('tiny', tinyDir);
  makeDemoModel('tiny-joinable', joinableDir);
  tiny = await load(tinyDir);
  joinable = await load(joinableDir);
});
afterAll(async () => {
  await Promise.all(engines.map((e) => e.close()));
  rmSync(root, { recursive: true, force: true });
});

const WORDS =
  'the of and to in is hello world good morning thank you please translate language model server batch token quick brown fox jumps over lazy dog 42 , . ! ?'.split(
    ' ',
  );

/** `count` rows of 1–40 words, mixed source and target languages, from a fixed seed. */
const rows = (count: number, seed = 7): TranslateRow[] => seededRows(count, seed, WORDS, 40);

async function oneByOne(engine: TranslationEngine, list: TranslateRow[], options: TranslateOptions) {
  const out: number[][] = [];
  for (const row of list) out.push((await engine.translate([row], options))[0]!.tokenIds);
  return out;
}

const GREEDY: TranslateOptions = { numBeams: 1, maxNewTokens: 48 };

describe('TranslationEngine', () => {
  it('loads on the CPU with the merged decoder; a CUDA request runs on CUDA or says why not', async () => {
    expect(tiny.device).toEqual({ kind: 'cpu', id: null, provider: 'cpu' });
    expect(tiny.decoderKind).toBe('merged');
    expect(tiny.joinable).toBe(false);
    expect(joinable.joinable).toBe(true);
    expect(tiny.languages()).toEqual([...DEMO_LANGUAGES].sort());
    const cuda = await load(tinyDir, { device: { kind: 'cuda', id: 0 } });
    if (cuda.device.kind === 'cpu') {
      expect(cuda.device.fallbackReason).toMatch(/^CUDA device 0 unavailable: /);
    } else {
      expect(cuda.device).toMatchObject({ kind: 'cuda', id: 0, provider: 'cuda' });
    }
  });

  it('greedy output equals transformers.js token for token (one string at a time)', async () => {
    const transformers = await transformersReference(root, 'tiny', 'fp32');
    const cases = rows(10, 11);
    let nontrivial = 0;
    for (const row of cases) {
      const reference = await transformers.translate(row, 40);
      const [ours] = await tiny.translate([row], { numBeams: 1, maxNewTokens: 40 });
      expect(reference.inputIds).toEqual(tiny.prepare(row).inputIds);
      expect([2, ...ours!.tokenIds]).toEqual(reference.tokenIds);
      expect(ours!.text).toBe(reference.text);
      if (ours!.tokenIds.length > 3) nontrivial++;
    }
    expect(nontrivial).toBeGreaterThan(5);
    await transformers.dispose();
  });

  it('a row in a batch of 64 mixed-length texts gives exactly the tokens it gives alone; finished rows leave at once', async () => {
    const list = rows(64);
    const alone = await oneByOne(tiny, list, GREEDY);
    const before = tiny.stats();
    const order: number[] = [];
    const batched = await tiny.translate(list, GREEDY, (index) => order.push(index));
    const after = tiny.stats();
    expect(batched.map((t) => t.tokenIds)).toEqual(alone);
    // Lengths differ, so rows finish apart, and each is reported as it finishes (shortest first).
    const lengths = batched.map((t) => t.generatedTokens);
    expect(new Set(lengths).size).toBeGreaterThan(5);
    expect(order.map((i) => lengths[i]!)).toEqual([...lengths].sort((a, b) => a - b));
    // A row is stepped once per token it generates: no finished row rides along.
    expect(after.decoderRows - before.decoderRows).toBe(lengths.reduce((a, b) => a + b, 0));
    expect(after.encoderRuns - before.encoderRuns).toBe(1);
    // One admission, encoded in groups of similar length (less padding), same tokens as alone.
    expect(after.encoderCalls - before.encoderCalls).toBeGreaterThan(1);
  });

  it('beam search: batched equals one by one, and differs from greedy somewhere', async () => {
    const list = rows(16, 3);
    const beam: TranslateOptions = { numBeams: 3, maxNewTokens: 40 };
    const alone = await oneByOne(tiny, list, beam);
    const batched = await tiny.translate(list, beam);
    expect(batched.map((t) => t.tokenIds)).toEqual(alone);
    const greedy = await tiny.translate(list, { numBeams: 1, maxNewTokens: 40 });
    expect(greedy.map((t) => t.tokenIds)).not.toEqual(alone);
  });

  it('beam search with num_beams=1 equals greedy', async () => {
    const list = rows(24, 5);
    const greedy = await tiny.translate(list, { numBeams: 1, maxNewTokens: 40 });
    const beam = await tiny.translate(list, { numBeams: 1, strategy: 'beam', maxNewTokens: 40 });
    expect(beam.map((t) => t.tokenIds)).toEqual(greedy.map((t) => t.tokenIds));
  });

  it('decoding with the KV cache equals full recompute without it (greedy and beam)', async () => {
    const noCache = await load(tinyDir, { decoder: 'no-cache' });
    expect(noCache.decoderKind).toBe('no-cache');
    const list = rows(12, 9);
    for (const options of [GREEDY, { numBeams: 2, maxNewTokens: 32 }]) {
      const cached = await tiny.translate(list, options);
      const recomputed = await noCache.translate(list, options);
      expect(recomputed.map((t) => t.tokenIds)).toEqual(cached.map((t) => t.tokenIds));
    }
  });

  it('the rewritten decoder (appended cache entries, greedy top-2, cross-attention) and the beam head give the tokens of the graph as exported, scanned on the host', async () => {
    for (const engine of [tiny, joinable]) {
      expect(engine.decoderOutputs.appendedCache).toHaveLength(2 * engine.config.decoderLayers);
      expect(engine.decoderOutputs.greedyTop2).not.toBeNull();
      expect(engine.decoderOutputs.crossAttention).not.toBeNull();
      expect(engine.decoderOutputs.notes).toEqual([]);
    }
    const exported = await load(tinyDir, { decoderGraph: 'as-exported' });
    expect(exported.decoderOutputs).toEqual({
      appendedCache: null,
      greedyTop2: null,
      beamTopK: false,
      crossAttention: null,
      notes: ['decoder graph not rewritten: asked for (as-exported)'],
    });
    // Mixed lengths (rows leave: the cache is gathered out of reused buffers), a suppressed </s> (the
    // runner-up of the top-2 stands in), beams (reordered by parent; the beam head's top 2·numBeams + 1 against
    // the host's scan of every logit; a suppressed </s> among them), greedy and beam rows together.
    const list = rows(24, 37);
    const suppressed: TranslateOptions = { numBeams: 1, maxNewTokens: 30, minNewTokens: 20 };
    const beamSuppressed: TranslateOptions = { numBeams: 2, maxNewTokens: 30, minNewTokens: 20 };
    for (const options of [GREEDY, suppressed, { numBeams: 3, maxNewTokens: 40 }, beamSuppressed]) {
      expect((await tiny.translate(list, options)).map((t) => t.tokenIds)).toEqual(
        (await exported.translate(list, options)).map((t) => t.tokenIds),
      );
    }
    const mixed = async (e: TranslationEngine) =>
      (
        await Promise.all([
          e.translate(list.slice(0, 12), GREEDY),
          e.translate(list.slice(12), { numBeams: 2, maxNewTokens: 30 }),
        ])
      ).flat();
    const [ours, theirs] = [await mixed(tiny), await mixed(exported)];
    // Beam scores are sums of log-probs: the head's and the host's normalisers may differ in their last bits.
    expect(ours.map(({ score: _, ...rest }) => rest)).toEqual(theirs.map(({ score: _, ...rest }) => rest));
    ours.forEach((t, i) => expect(t.score).toBeCloseTo(theirs[i]!.score, 5));
  });

  it('falls back to decoder_model.onnx only when the merged decoder is absent', async () => {
    const dir = path.join(root, 'no-merged');
    cpSync(tinyDir, dir, { recursive: true });
    rmSync(path.join(dir, 'onnx', 'decoder_model_merged.onnx'));
    const fallback = await load(dir);
    expect(fallback.decoderKind).toBe('no-cache');
    const list = rows(6, 13);
    expect((await fallback.translate(list, GREEDY)).map((t) => t.tokenIds)).toEqual(
      (await tiny.translate(list, GREEDY)).map((t) => t.tokenIds),
    );
  });

  it('minNewTokens = maxNewTokens gives every row exactly that many tokens (benchmark mode)', async () => {
    const out = await tiny.translate(rows(8, 21), { numBeams: 1, maxNewTokens: 20, minNewTokens: 20 });
    for (const t of out) {
      expect(t.generatedTokens).toBe(20);
      expect(t.tokenIds).not.toContain(2);
    }
  });

  it('truncates an over-long input and still translates it', async () => {
    const [out] = await tiny.translate([{ srcLang: 'en', tgtLang: 'de', text: 'hello world '.repeat(200) }], GREEDY);
    expect(out!.truncated).toBe(true);
    expect(out!.inputTokens).toBe(tiny.config.maxInputTokens);
  });

  it('rejects unknown languages before generating anything', async () => {
    const before = tiny.stats().encoderRuns;
    await expect(tiny.translate([...rows(2), { srcLang: 'en', tgtLang: 'xx', text: 'hi' }])).rejects.toMatchObject({
      code: 'UNKNOWN_LANGUAGE',
      message: expect.stringContaining('Unknown tgt_lang "xx"'),
    });
    expect(tiny.stats().encoderRuns).toBe(before);
  });

  /** What the joining scenario below must show for one way of scheduling rows that arrive mid-generation. */
  interface Joining {
    engine: () => Promise<TranslationEngine>;
    /** Cohorts merged, and cohort-steps paused for a younger cohort to catch up. */
    merges: boolean;
    pauses: boolean;
    /** Who answers first: newcomers run beside the long row, or wait for it (a cohort limit of 1). */
    finished: string[];
  }

  const noCacheDir = path.join(root, 'no-cache');
  describe.each<[string, Joining]>([
    [
      'tiny-joinable: newcomers merge into the running batch at once',
      { engine: async () => joinable, merges: true, pauses: false, finished: ['joiners', 'long'] },
    ],
    [
      'tiny (export layout): newcomers catch up while the long row pauses, then merge',
      { engine: async () => tiny, merges: true, pauses: true, finished: ['joiners', 'long'] },
    ],
    [
      'tiny, no KV cache: catching up works on step counts alone',
      {
        engine: async () => {
          cpSync(tinyDir, noCacheDir, { recursive: true });
          return load(noCacheDir, { decoder: 'no-cache' });
        },
        merges: true,
        pauses: true,
        finished: ['joiners', 'long'],
      },
    ],
    [
      'tiny, catch-up off: newcomers step as their own cohort beside the long row',
      { engine: () => load(tinyDir, { catchUpSteps: 0 }), merges: false, pauses: false, finished: ['joiners', 'long'] },
    ],
    [
      'tiny, a gap wider than the pause budget: no pause, no merge',
      { engine: () => load(tinyDir, { catchUpSteps: 2 }), merges: false, pauses: false, finished: ['joiners', 'long'] },
    ],
    [
      'tiny, catch-up off and one cohort at a time: newcomers wait for the long row',
      {
        engine: () => load(tinyDir, { catchUpSteps: 0, maxCohorts: 1 }),
        merges: false,
        pauses: false,
        finished: ['long', 'joiners'],
      },
    ],
  ])('rows joining mid-generation: %s', (_name, expected) => {
    it('give the same tokens as run alone, and are scheduled as this mode says', async () => {
      const e = await expected.engine();
      const long: TranslateRow = { srcLang: 'en', tgtLang: 'fr', text: 'the quick brown fox jumps over the lazy dog' };
      const fixed = (n: number): TranslateOptions => ({ numBeams: 1, maxNewTokens: n, minNewTokens: n });
      const joiners = rows(12, 17);
      const beamJoiner = rows(1, 19)[0]!;
      const before = e.stats();
      const finished: string[] = [];
      let joined: Promise<unknown[]> | null = null;
      const longRun = e.translate([long], fixed(40)).then((r) => {
        finished.push('long');
        return r;
      });
      // When the short row finishes (step 3 of the long one's 40), more rows arrive: they start at the next step.
      await e.translate([{ ...long, text: 'hello' }], fixed(3), () => {
        joined = Promise.all([
          e.translate(joiners, GREEDY).then((r) => (finished.push('joiners'), r)),
          e.translate([beamJoiner], { numBeams: 3, maxNewTokens: 30 }),
        ]);
      });
      const [[joinedGreedy, [joinedBeam]], [longOut]] = (await Promise.all([joined!, longRun])) as unknown as [
        [Awaited<ReturnType<TranslationEngine['translate']>>, Awaited<ReturnType<TranslationEngine['translate']>>],
        Awaited<ReturnType<TranslationEngine['translate']>>,
      ];
      const after = e.stats();
      expect(after.merges - before.merges > 0).toBe(expected.merges);
      expect(after.pauses - before.pauses > 0).toBe(expected.pauses);
      // A row pauses at most catchUpSteps (8 by default) steps: the long row waited for 3 only.
      expect(after.pauses - before.pauses).toBeLessThanOrEqual(8);
      expect(after.encoderRuns - before.encoderRuns).toBe(2); // the long+short pair, then the joiners together
      expect(finished).toEqual(expected.finished);
      expect(longOut!.tokenIds).toEqual((await tiny.translate([long], fixed(40)))[0]!.tokenIds);
      expect(joinedGreedy.map((t) => t.tokenIds)).toEqual(await oneByOne(tiny, joiners, GREEDY));
      expect(joinedBeam!.tokenIds).toEqual(
        (await tiny.translate([beamJoiner], { numBeams: 3, maxNewTokens: 30 }))[0]!.tokenIds,
      );
    });
  });

  it('a row pauses at most catchUpSteps steps in all, however many newcomers keep arriving', async () => {
    const e = await load(tinyDir, { catchUpSteps: 4 });
    const long: TranslateRow = { srcLang: 'en', tgtLang: 'fr', text: 'the quick brown fox jumps over the lazy dog' };
    const fixed = (n: number): TranslateOptions => ({ numBeams: 1, maxNewTokens: n, minNewTokens: n });
    // A chain of 21 two-token rows: each one's answer submits the next, so a newcomer the long row could wait for
    // arrives every other boundary. Waiting for each (2 pauses apiece) would hold the long row back 42 steps and
    // it would finish after the chain; with a budget of 4 it takes at most 30 + 4 boundaries, the chain ≥ 42.
    let left = 20;
    let leftWhenLongDone = -1;
    let chainDone!: () => void;
    const chainFinished = new Promise<void>((resolve) => (chainDone = resolve));
    const next = (): void => {
      void e.translate([{ ...long, text: `hello ${left}` }], fixed(2)).then(() => {
        if (left-- > 0) next();
        else chainDone();
      });
    };
    const before = e.stats();
    const longRun = e.translate([long], fixed(30)).then((out) => ((leftWhenLongDone = left), out));
    next();
    const [[longOut]] = await Promise.all([longRun, chainFinished]);
    expect(e.stats().pauses - before.pauses).toBeGreaterThan(0);
    expect(leftWhenLongDone).toBeGreaterThan(0);
    expect(longOut!.tokenIds).toEqual((await tiny.translate([long], fixed(30)))[0]!.tokenIds);
  });

  it('caps the rows stepped together at maxBatchRows; the rest start at later boundaries with the same result', async () => {
    const capped = await load(joinableDir, { maxBatchRows: 4 });
    const list = rows(10, 29);
    const out = await capped.translate(list, GREEDY);
    expect(out.map((t) => t.tokenIds)).toEqual((await joinable.translate(list, GREEDY)).map((t) => t.tokenIds));
    const stats = capped.stats();
    expect(stats.encoderRuns).toBeGreaterThanOrEqual(3);
    expect(stats.decoderRows / stats.decoderRuns).toBeLessThanOrEqual(4);
  });

  it('a cancelled row leaves its running batch within one step: the others give the tokens of an uncancelled run, fewer rows per step', async () => {
    const fixed = (n: number): TranslateOptions => ({ numBeams: 1, maxNewTokens: n, minNewTokens: n });
    const [a, b, c] = rows(3, 41).map((row) => tiny.prepare(row));
    const short = tiny.prepare({ srcLang: 'en', tgtLang: 'de', text: 'hello' });
    // c is a beam sequence: its 3 beams must leave together.
    const beams: TranslateOptions = { numBeams: 3, maxNewTokens: 30, minNewTokens: 30 };
    const batch = async (signal?: AbortSignal, onShortDone?: () => void) => {
      const before = tiny.stats();
      const settled = await Promise.allSettled([
        tiny.generate(a!, fixed(30)),
        tiny.generate(b!, fixed(30)),
        tiny.generate(c!, beams, signal),
        tiny.generate(short, fixed(3)).then((out) => (onShortDone?.(), out)),
      ]);
      const after = tiny.stats();
      return {
        settled,
        runs: after.decoderRuns - before.decoderRuns,
        rows: after.decoderRows - before.decoderRows,
        cancelledRows: after.cancelledRows - before.cancelledRows,
        cancelled: after.cancelled - before.cancelled,
      };
    };
    const whole = await batch();

    const controller = new AbortController();
    const reason = new ServeError('REQUEST_TIMEOUT');
    let runsAtAbort = -1;
    let runsAtReject = -1;
    let liveAtReject = -1;
    const cut = await batch(controller.signal, () => {
      runsAtAbort = tiny.stats().decoderRuns;
      controller.abort(reason);
    });
    // The cancelled sequence's promise rejected by the time its rows were out: record when, from its rejection.
    const [, , cancelled] = cut.settled;
    expect(cancelled).toEqual({ status: 'rejected', reason });
    expect(cut.settled[0]).toEqual(whole.settled[0]);
    expect(cut.settled[1]).toEqual(whole.settled[1]);
    expect(cut.settled[3]).toEqual(whole.settled[3]);
    expect(cut.cancelled).toBe(1);
    expect(cut.cancelledRows).toBe(3);
    // Same 30 steps (a and b set the length), but the beams stopped riding along after step 3 or 4.
    expect(cut.runs).toBe(whole.runs);
    expect(whole.rows - cut.rows).toBeGreaterThanOrEqual(3 * (30 - 4));
    expect(cut.rows / cut.runs).toBeLessThan(whole.rows / whole.runs);

    // Within one step: the rejection comes at the first boundary after the abort.
    const again = new AbortController();
    const watched = Promise.all([
      tiny.generate(a!, fixed(30)),
      tiny
        .generate(c!, beams, again.signal)
        .catch((err: unknown) => ((runsAtReject = tiny.stats().decoderRuns), (liveAtReject = tiny.liveRows), err)),
      tiny.generate(short, fixed(3)).then(() => {
        runsAtAbort = tiny.stats().decoderRuns;
        again.abort(reason);
      }),
    ]);
    expect((await watched)[1]).toBe(reason);
    expect(runsAtReject - runsAtAbort).toBeLessThanOrEqual(1);
    expect(liveAtReject).toBe(1);
  });

  it('a cancelled sequence still waiting for room leaves at once, never encoded; an aborted signal is refused', async () => {
    const one = await load(tinyDir, { maxBatchRows: 1 });
    const [a, b] = rows(2, 43).map((row) => one.prepare(row));
    const controller = new AbortController();
    const running = one.generate(a!, GREEDY);
    const waiting = one.generate(b!, GREEDY, controller.signal);
    const reason = new ServeError('CLIENT_CLOSED');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect((await running).tokenIds).toEqual((await tiny.generate(a!, GREEDY)).tokenIds);
    expect(one.stats()).toMatchObject({ encodedRows: 1, cancelled: 1, cancelledRows: 0 });
    await expect(one.generate(b!, GREEDY, controller.signal)).rejects.toBe(reason);
    expect(one.stats().encodedRows).toBe(1);
  });

  it('makes the cross-attention cache at encoding, over the real tokens packed into runs of at most MAX_PACKED_TOKENS; when that fails, the first step makes it', async () => {
    // Whole-batch tokens of the graph as exported: its first decoder step makes the cache over the padded batch.
    const exported = await load(tinyDir, { decoderGraph: 'as-exported' });
    const list = rows(120, 23);
    const expected = (await exported.translate(list, GREEDY)).map((t) => t.tokenIds);
    const isCross = (session: ort.InferenceSession) =>
      session.outputNames.length > 0 && session.outputNames.every((name) => /^present\.\d+\.encoder\./.test(name));
    // Every session is an instance of this class at run time (its type declares a factory).
    const proto = (ort.InferenceSession as unknown as { prototype: ort.InferenceSession }).prototype;
    const run = proto.run;
    const crossRuns: number[][] = [];
    let failures = 0;
    const spy = vi.spyOn(proto, 'run').mockImplementation(function (
      this: ort.InferenceSession,
      ...args: Parameters<typeof run>
    ) {
      if (isCross(this)) {
        crossRuns.push([...(args[0]['encoder_hidden_states'] as ort.Tensor).dims]);
        if (failures > 0) {
          failures--;
          return Promise.reject(new Error('injected cross-attention failure'));
        }
      }
      return run.apply(this, args);
    });
    try {
      const before = tiny.stats();
      expect((await tiny.translate(list, GREEDY)).map((t) => t.tokenIds)).toEqual(expected);
      // The encoder ran in several length groups; the cross graph on the rows' real tokens packed into sequences
      // (no padding) of at most MAX_PACKED_TOKENS, rows whole, and not at the first step.
      expect(tiny.stats().encoderCalls - before.encoderCalls).toBeGreaterThan(1);
      const lengths = list.map((row) => tiny.prepare(row).inputIds.length);
      const sourceTokens = lengths.reduce((a, b) => a + b, 0);
      expect(Math.min(...lengths)).toBeLessThan(Math.max(...lengths));
      expect(sourceTokens).toBeGreaterThan(MAX_PACKED_TOKENS);
      expect(crossRuns.length).toBeGreaterThan(1);
      for (const [batch, tokens, d] of crossRuns) {
        expect([batch, d]).toEqual([1, tiny.config.dModel]);
        expect(tokens).toBeLessThanOrEqual(MAX_PACKED_TOKENS);
      }
      // In admission order: each run ends where the next row would not fit.
      let row = 0;
      for (const [, tokens] of crossRuns) {
        let taken = 0;
        while (row < lengths.length && taken + lengths[row]! <= MAX_PACKED_TOKENS) taken += lengths[row++]!;
        expect(tokens).toBe(taken);
      }
      expect(row).toBe(list.length);

      const first = crossRuns[0]!;
      crossRuns.length = 0;
      failures = 1;
      expect((await tiny.translate(list, GREEDY)).map((t) => t.tokenIds)).toEqual(expected);
      // The failed run at encoding (no later one), then one over the whole padded batch at its first step.
      expect(crossRuns).toEqual([first, [list.length, Math.max(...lengths), tiny.config.dModel]]);
      expect(tiny.stats().failed).toBe(before.failed);
    } finally {
      spy.mockRestore();
    }
  });

  describe.each([
    ['tiny', () => tiny],
    ['tiny-joinable', () => joinable],
  ])('a row a model run fails on fails alone (%s)', (_name, engine) => {
    const outOfVocabulary = 9999;
    const beam: TranslateOptions = { numBeams: 2, maxNewTokens: 30 };
    const settle = (runs: Promise<Hypothesis>[]) => Promise.allSettled(runs);
    /** Beam log-probabilities differ in the last float bits between batch sizes; the tokens may not. */
    const tokensOf = (settled: PromiseSettledResult<Hypothesis>[]) =>
      settled.map((r) => (r.status === 'fulfilled' ? r.value.tokens : r.reason));
    const gather = (e: TranslationEngine, bad: { inputIds?: number[]; forced?: number }) => {
      const good = rows(8, 47).map((row) => e.prepare(row));
      const badRow = good[3]!;
      return settle([
        ...good.slice(0, 6).map((p) => e.generateIds(p.inputIds, p.forcedTokenId, GREEDY)),
        e.generateIds(bad.inputIds ?? badRow.inputIds, bad.forced ?? badRow.forcedTokenId, GREEDY),
        // A beam sequence beside it: its two beams stay together and finish as alone.
        e.generateIds(good[6]!.inputIds, good[6]!.forcedTokenId, beam),
        e.generateIds(good[7]!.inputIds, good[7]!.forcedTokenId, GREEDY),
      ]);
    };
    const alone = async (e: TranslationEngine) => {
      const good = rows(8, 47).map((row) => e.prepare(row));
      const out = [];
      for (const [i, p] of good.entries()) {
        if (i === 6) out.push(await e.generateIds(p.inputIds, p.forcedTokenId, beam));
        else out.push(await e.generateIds(p.inputIds, p.forcedTokenId, GREEDY));
      }
      return out;
    };

    it('in the encoder (an input id outside the vocabulary): the others answer as alone', async () => {
      const e = engine();
      const expected = await alone(e);
      const before = e.stats();
      const ids = [...rows(1, 47).map((row) => e.prepare(row))[0]!.inputIds];
      ids.splice(1, 0, outOfVocabulary);
      const settled = await gather(e, { inputIds: ids });
      expect(settled[6]).toMatchObject({
        status: 'rejected',
        reason: { message: expect.stringContaining('out of data bounds') },
      });
      expect(tokensOf(settled.filter((_, i) => i !== 6))).toEqual(expected.map((h) => h.tokens));
      expect(e.stats().failed - before.failed).toBe(1);
      expect(e.stats().encoderRuns - before.encoderRuns).toBe(1);
    });

    it('in the decoder (a forced token outside the vocabulary, fed at step 2): the others answer as alone', async () => {
      const e = engine();
      const expected = await alone(e);
      const before = e.stats();
      const settled = await gather(e, { forced: outOfVocabulary });
      expect(settled[6]).toMatchObject({
        status: 'rejected',
        reason: { message: expect.stringContaining('out of data bounds') },
      });
      expect(tokensOf(settled.filter((_, i) => i !== 6))).toEqual(expected.map((h) => h.tokens));
      const after = e.stats();
      expect(after.failed - before.failed).toBe(1);
      // After the failed step the bad row no longer rides along: the rows stepped are the good rows' own.
      const greedyTokens = expected.filter((_, i) => i !== 6).reduce((sum, h) => sum + h.tokens.length, 0);
      expect(after.decoderRows - before.decoderRows).toBeLessThan(greedyTokens + 2 * 30 + 2);
    });
  });

  it('capBySourceLength: a row stops at 2 × its source tokens + 10 under the absolute cap, reported and counted', async () => {
    const short = tiny.prepare({ srcLang: 'en', tgtLang: 'de', text: 'hello' });
    const long = tiny.prepare({
      srcLang: 'en',
      tgtLang: 'de',
      text: 'the quick brown fox jumps over the lazy dog '.repeat(5),
    });
    const natural = tiny.prepare({
      srcLang: 'en',
      tgtLang: 'de',
      text: 'model server batch token please translate language '.repeat(4),
    });
    expect(sourceLengthCap(short.inputIds.length)).toBe(2 * short.inputIds.length + 10);
    expect(sourceLengthCap(long.inputIds.length)).toBeGreaterThan(100);
    const forced: TranslateOptions = { numBeams: 1, maxNewTokens: 100, minNewTokens: 100 };
    const uncapped = await tiny.generate(short, forced);
    expect(uncapped).toMatchObject({ generatedTokens: 100, capped: true, maxNewTokens: 100 });

    const before = tiny.stats();
    const capped = { ...forced, capBySourceLength: true };
    const cap = sourceLengthCap(short.inputIds.length);
    const [s, l, n, m] = await Promise.all([
      // </s> suppressed up to the cap, as in the uncapped run, so the two agree token for token up to there.
      tiny.generate(short, { ...capped, minNewTokens: cap }),
      tiny.generate(long, capped),
      tiny.generate(natural, { numBeams: 1, maxNewTokens: 100, capBySourceLength: true }),
      tiny.generate(short, capped),
    ]);
    // Cut at its own cap, with the tokens it had uncapped up to there.
    expect(s).toMatchObject({ generatedTokens: cap, capped: true, maxNewTokens: cap });
    expect(s.tokenIds).toEqual(uncapped.tokenIds.slice(0, cap));
    // The long source leaves the absolute cap in charge.
    expect(l).toMatchObject({ generatedTokens: 100, capped: true, maxNewTokens: 100 });
    expect(n.capped).toBe(false);
    expect(n.tokenIds.at(-1)).toBe(tiny.config.eosTokenId);
    expect(n.maxNewTokens).toBe(sourceLengthCap(natural.inputIds.length));
    // An explicit minimum (a benchmark's fixed length) is never undercut by the source-length cap.
    expect(m).toMatchObject({ generatedTokens: 100, maxNewTokens: 100 });
    expect(tiny.stats().cappedRows - before.cappedRows).toBe(3);
  });

  it('close() lets running rows finish, then refuses new work with SHUTTING_DOWN', async () => {
    const closing = await load(tinyDir);
    const running = closing.translate(rows(4, 31), GREEDY);
    const closed = closing.close();
    expect((await running).length).toBe(4);
    await closed;
    await expect(closing.translate(rows(1), GREEDY)).rejects.toMatchObject({ code: 'SHUTTING_DOWN' });
  });

  it('the joinable decoder computes what the export layout computes (same weights)', async () => {
    const list = rows(16, 23);
    expect((await joinable.translate(list, GREEDY)).map((t) => t.tokenIds)).toEqual(
      (await tiny.translate(list, GREEDY)).map((t) => t.tokenIds),
    );
  });
});
