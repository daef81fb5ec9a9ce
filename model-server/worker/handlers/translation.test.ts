import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../../common/logger.js';
import { makeDemoModel } from '../../tools/demo-model/index.js';
import { TranslationEngine } from '../../engine/engine.js';
import type { BatchItem, ItemOutcome, SentenceItem } from '../../protocol.js';
import { ServeError } from '../../../common/errors.js';
import { until } from '../../../harness/polling.js';
import { runBatch } from './base.js';
import { TranslationHandler } from './translation.js';

const log = createLogger('test', 'silent');
let dir: string;
let handler: TranslationHandler;
let reference: TranslationEngine;
const options = { intraOpThreads: 1, numBeams: 2, maxNewTokens: 24 };

beforeAll(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'translation-handler-'));
  makeDemoModel('tiny-joinable', dir);
  handler = new TranslationHandler();
  const device = await handler.initialize({ modelDir: dir, device: { kind: 'cpu' }, options, log });
  expect(device).toEqual({ kind: 'cpu', id: null, provider: 'cpu' });
  reference = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1 });
});
afterAll(async () => {
  await handler.close();
  await reference.close();
  rmSync(dir, { recursive: true, force: true });
});

async function run(items: BatchItem<SentenceItem>[]): Promise<Map<string, ItemOutcome>> {
  const replies = new Map<string, ItemOutcome>();
  await runBatch(
    handler,
    items,
    (id, outcome) => {
      expect(replies.has(id)).toBe(false);
      replies.set(id, outcome);
    },
    log,
  );
  return replies;
}

const item = (id: string, model: string, body: SentenceItem): BatchItem<SentenceItem> => ({ id, model, body });

describe('TranslationHandler', () => {
  it('serves the tokenizer languages', () => {
    expect(handler.languages()).toEqual([
      'ar',
      'de',
      'en',
      'es',
      'fr',
      'hi',
      'id',
      'it',
      'ja',
      'ko',
      'pt',
      'ru',
      'vi',
      'zh',
    ]);
  });

  it('answers {"translated"} with tgt_lang = the model name, using the worker options (beams, max tokens)', async () => {
    const replies = await run([
      item('a', 'en', { srcLang: 'ko', text: 'good morning' }),
      item('b', 'ja', { srcLang: 'en', text: 'hello world' }),
    ]);
    const expected = await reference.translate(
      [
        { srcLang: 'ko', text: 'good morning', tgtLang: 'en' },
        { srcLang: 'en', text: 'hello world', tgtLang: 'ja' },
      ],
      { numBeams: 2, maxNewTokens: 24, capBySourceLength: true },
    );
    expect(replies.get('a')).toEqual({ ok: true, value: { translated: expected[0]!.text } });
    expect(replies.get('b')).toEqual({ ok: true, value: { translated: expected[1]!.text } });
  });

  it('fails items the engine refuses alone (the frontend checked their shape), with messages naming the field', async () => {
    const replies = await run([
      item('ok', 'de', { srcLang: 'en', text: 'hello' }),
      item('bad-src', 'de', { srcLang: 'xx', text: 'hello' }),
      item('bad-tgt', 'tlh', { srcLang: 'en', text: 'hello' }),
    ]);
    expect(replies.get('ok')).toMatchObject({ ok: true });
    const supported = 'ar, de, en, es, fr, hi, id, it, ja, ko, pt, ru, vi, zh';
    expect(replies.get('bad-src')).toEqual({
      ok: false,
      error: { code: 'UNKNOWN_LANGUAGE', message: `Unknown src_lang "xx". Supported languages: ${supported}.` },
    });
    expect(replies.get('bad-tgt')).toEqual({
      ok: false,
      error: { code: 'UNKNOWN_LANGUAGE', message: `Unknown tgt_lang "tlh". Supported languages: ${supported}.` },
    });
  });

  it('batches in flight together share the generation and each item gets its own answer', async () => {
    const texts = ['the lazy dog', 'quick brown fox jumps', 'thank you', 'model server batch token please', 'a'];
    const batches = [0, 1, 2].map((b) =>
      texts.map((text, i) => item(`${b}-${i}`, ['en', 'fr', 'zh'][b]!, { srcLang: 'de', text })),
    );
    const results = await Promise.all(batches.map((batch) => run(batch)));
    for (const [b, batch] of batches.entries()) {
      const expected = await reference.translate(
        batch.map((it) => ({ srcLang: 'de', text: it.body.text, tgtLang: it.model })),
        { numBeams: 2, maxNewTokens: 24, capBySourceLength: true },
      );
      for (const [i, it] of batch.entries()) {
        expect(results[b]!.get(it.id)).toEqual({ ok: true, value: { translated: expected[i]!.text } });
      }
    }
  });

  it('capacity is the sequences the engine steps at once (its rows ÷ beams); a round starts as ONE cohort', async () => {
    expect(handler.capacity()).toBe(Math.floor(256 / options.numBeams));
    const tinyDir = mkdtempSync(path.join(tmpdir(), 'translation-handler-tiny-'));
    const tiny = new TranslationHandler();
    try {
      makeDemoModel('tiny', tinyDir);
      await tiny.initialize({ modelDir: tinyDir, device: { kind: 'cpu' }, options: { ...options, numBeams: 1 }, log });
      expect(tiny.capacity()).toBe(256);
      // What a `round` relies on (worker/run-worker.ts): batches handed to the handler in one synchronous pass start
      // as ONE cohort (one encoder run), even on an engine whose decoder takes no self-attention mask.
      const engine = await TranslationEngine.load({ modelDir: tinyDir, intraOpThreads: 1 });
      try {
        const rows = ['ko', 'fr', 'de'].map((tgtLang) =>
          engine.prepare({ srcLang: 'en', text: 'Hello there.', tgtLang }),
        );
        await Promise.all(rows.map((row) => engine.generate(row, { numBeams: 1, maxNewTokens: 8 })));
        expect(engine.stats().encoderRuns).toBe(1);
      } finally {
        await engine.close();
      }
    } finally {
      await tiny.close();
      rmSync(tinyDir, { recursive: true, force: true });
    }
  });

  it('caps each row by its source length and logs a row stopped at its cap at warn, with its lengths', async () => {
    const lines: Record<string, unknown>[] = [];
    const capturing = pino(
      { level: 'warn' },
      { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) },
    );
    const capped = new TranslationHandler();
    await capped.initialize({
      modelDir: dir,
      device: { kind: 'cpu' },
      options: { ...options, numBeams: 1, maxNewTokens: 64 },
      log: capturing,
    });
    try {
      const short = { srcLang: 'en', text: 'hello world', tgtLang: 'de' };
      const long = {
        srcLang: 'en',
        text: 'model server batch token please translate language '.repeat(4),
        tgtLang: 'de',
      };
      const expected = await reference.translate([short, long], {
        numBeams: 1,
        maxNewTokens: 64,
        capBySourceLength: true,
      });
      // The short row would run past 2 × 4 source tokens + 10 on this model; the long one ends well before its cap.
      expect(expected.map((t) => [t.capped, t.maxNewTokens])).toEqual([
        [true, 18],
        [false, 64],
      ]);
      expect(expected[0]!.generatedTokens).toBe(18);
      const replies = new Map<string, ItemOutcome>();
      await runBatch(
        capped,
        [item('s', 'de', { srcLang: 'en', text: short.text }), item('l', 'de', { srcLang: 'en', text: long.text })],
        (id, outcome) => replies.set(id, outcome),
        log,
      );
      expect(replies.get('s')).toEqual({ ok: true, value: { translated: expected[0]!.text } });
      expect(replies.get('l')).toEqual({ ok: true, value: { translated: expected[1]!.text } });
      expect(lines).toEqual([
        expect.objectContaining({
          level: 40,
          msg: 'translation stopped at its token cap before </s>',
          id: 's',
          inputTokens: 4,
          generatedTokens: 18,
          maxNewTokens: 18,
        }),
      ]);
    } finally {
      await capped.close();
    }
  });

  it('a long text is prepared a slice at a time, and a cancel meanwhile stops it with the cancel reason', async () => {
    const text = Array.from({ length: 20_000 }, (_, i) => `w${i % 10}`).join(' ');
    let turns = 0;
    const timer = setInterval(() => turns++, 0);
    const outcome = run([item('long', 'de', { srcLang: 'en', text })]);
    // Cancelled once the loop has turned, so during the preparation: it takes many slices.
    await until('a turn of the event loop during the preparation', () => turns > 0);
    handler.cancel(['long'], new ServeError('REQUEST_TIMEOUT', 'gave up'));
    const replies = await outcome;
    clearInterval(timer);
    expect(replies.get('long')).toEqual({ ok: false, error: { code: 'REQUEST_TIMEOUT', message: 'gave up' } });
  });

  it('a cancel in the turn its batch arrives (IPC delivers a read back to back) stops its jobs before they generate', async () => {
    const kept = item('kept', 'fr', { srcLang: 'en', text: 'good morning' });
    const rowsOf = async (batch: () => Promise<Map<string, ItemOutcome>>) => {
      const before = handler.steps();
      const replies = await batch();
      const after = handler.steps();
      return {
        replies,
        rows: after.rows - before.rows,
        cancelledRows: (after.cancelledRows ?? 0) - (before.cancelledRows ?? 0),
      };
    };
    const alone = await rowsOf(() => run([kept]));
    const both = await rowsOf(() => {
      const outcome = run([item('early', 'de', { srcLang: 'en', text: 'hello world' }), kept]);
      handler.cancel(['early'], new ServeError('CLIENT_CLOSED'));
      return outcome;
    });
    expect(both.replies.get('early')).toEqual({
      ok: false,
      error: { code: 'CLIENT_CLOSED', message: 'Client closed the request.' },
    });
    expect(both.replies.get('kept')).toEqual(alone.replies.get('kept'));
    // None of 'early's rows was stepped, so none had to be cancelled.
    expect(both).toMatchObject({ rows: alone.rows, cancelledRows: 0 });
  });
});
