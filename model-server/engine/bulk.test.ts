/**
 * Interactive and bulk work share the engine (generate.ts): a single sentence that arrives while a document's
 * rows generate steps apart from them and is not held up by them, the document keeps a bounded share, and
 * neither changes the other's tokens.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import type { TranslateOptions } from './engine.js';
import { TranslationEngine } from './engine.js';
import { BULK_SHARE } from './loop/generate.js';

const root = mkdtempSync(path.join(tmpdir(), 'engine-bulk-'));
let engine: TranslationEngine;

beforeAll(async () => {
  makeDemoModel('tiny', root);
  engine = await TranslationEngine.load({ modelDir: root, intraOpThreads: 1 });
});
afterAll(async () => {
  await engine.close();
  rmSync(root, { recursive: true, force: true });
});

const fixed = (n: number, bulk = false): TranslateOptions => ({ numBeams: 1, maxNewTokens: n, minNewTokens: n, bulk });
const row = (i: number) =>
  engine.prepare({ srcLang: 'en', tgtLang: 'de', text: `document sentence number ${i} with a few more words` });

describe('bulk and interactive work on one engine', () => {
  it('a sentence arriving mid-document finishes long before the document, with the tokens it has alone', async () => {
    // The sentence's 100 steps take tens of milliseconds: the share is of time, and over one of 20 steps (~3.5 ms) a
    // single stall of the process in an interactive step could hand the document most of the turns.
    const SINGLE = 100;
    const alone = await engine.generate(row(999), fixed(SINGLE));
    const stepsBefore = engine.stats().decoderRuns;
    const finished: string[] = [];
    const document = Array.from({ length: 48 }, (_, i) =>
      engine.generate(row(i), fixed(400, true)).then((t) => {
        finished.push(`doc${i}`);
        return t;
      }),
    );
    // Let the document get going, then the interactive sentence arrives.
    while (engine.stats().decoderRuns < stepsBefore + 5) await new Promise((resolve) => setImmediate(resolve));
    const before = engine.stats();
    const single = await engine.generate(row(999), fixed(SINGLE));
    finished.push('single');
    const after = engine.stats();
    await Promise.all(document);

    expect(finished[0]).toBe('single');
    expect(single.tokenIds).toEqual(alone.tokenIds);
    // While the single sentence generated: its steps were runs of its own (had it ridden in the document's batch, a
    // run would average ~49 rows), and the document ran only in its bounded share of the time between them (a
    // document step takes about twice a single one: ~a quarter of the runs; stepped in turn, it would have run as
    // often as the single sentence did).
    const runs = after.decoderRuns - before.decoderRuns;
    const rows = after.decoderRows - before.decoderRows;
    const documentRuns = runs - SINGLE;
    expect(documentRuns).toBeGreaterThanOrEqual(0);
    expect(documentRuns).toBeLessThan(0.75 * SINGLE);
    expect(rows / runs).toBeLessThan(30);
    // The document's tokens are what it gets without the interruption.
    const again = await Promise.all(Array.from({ length: 48 }, (_, i) => engine.generate(row(i), fixed(400, true))));
    expect((await Promise.all(document)).map((t) => t.tokenIds)).toEqual(again.map((t) => t.tokenIds));
  });

  it('a stream of interactive sentences does not starve a document: it keeps stepping meanwhile', async () => {
    const before = engine.stats();
    let documentDoneAt: number | undefined;
    // 64 rows of 120 steps: contended for ~0.5 s, so that a scheduling hiccup in the last interactive steps, which
    // the finished document has no turn left to repay, moves the share by hundredths rather than tenths.
    const document = Promise.all(Array.from({ length: 64 }, (_, i) => engine.generate(row(i), fixed(120, true)))).then(
      () => (documentDoneAt = singles),
    );
    let singles = 0;
    // Two interactive clients, each back to back and out of step (so that one always generates), until the
    // document is done (bounded: a starved document never is).
    const client = async (offset: number) => {
      if (offset > 0) await engine.generate(row(2000), fixed(offset));
      while (documentDoneAt === undefined && singles < 2_000) {
        singles += 1;
        await engine.generate(row(1000 + singles), fixed(10));
      }
    };
    await Promise.all([client(0), client(5)]);
    await document;
    // The document finished while interactive work never stopped arriving, and while both had rows it got its
    // share of the decoder time (BULK_SHARE, a third; the scheduler gives it a turn whenever it is below): stepped
    // only when no interactive row is left, it gets none of that time. The share is a ratio of two times taken by
    // one clock, so a loaded machine slows both sides alike (a count of sentences did not hold under load).
    expect(documentDoneAt).toBeDefined();
    const after = engine.stats();
    const bulkMs = after.contendedBulkMs - before.contendedBulkMs;
    const interactiveMs = after.contendedInteractiveMs - before.contendedInteractiveMs;
    expect(interactiveMs).toBeGreaterThan(0);
    expect(bulkMs / (bulkMs + interactiveMs)).toBeGreaterThan(0.8 * BULK_SHARE);
  });
});
