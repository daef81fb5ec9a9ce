import { afterEach, describe, expect, it } from 'vitest';
import { TextPool } from './text-pool.js';

const limits = { maxChars: 100_000_000, maxSentences: 100_000_000 };
const context = { tgtLang: 'de', readable: undefined, limits, timeoutMs: 120_000 };
/** Legitimate but huge: parse5 and the segmenter take about a second per 1.2 million characters of it here. */
const hugeHtml = (copies: number) => '<p>Hello world.</p>'.repeat(copies);

const pools: TextPool[] = [];
function pool(threads: number, timeoutMs: number): TextPool {
  const p = new TextPool({ threads, timeoutMs });
  pools.push(p);
  return p;
}
afterEach(async () => {
  await Promise.all(pools.splice(0).map((p) => p.close()));
});

describe('the text pool: a request’s text work in a thread, with a deadline (issue 40)', () => {
  it('plans and answers as translation-plan.ts does, and a ServeError from the thread keeps its code', async () => {
    const p = pool(1, 60_000);
    const plan = await p.plan(
      { src_lang: 'en', src_text: '<p>Hello there. How are you?</p>', format: 'html' },
      context,
    );
    expect(plan.sentences).toEqual([
      { id: '0.0.0', item: { srcLang: 'en', text: 'Hello there.' } },
      { id: '0.0.1', item: { srcLang: 'en', text: 'How are you?' } },
    ]);
    const answers = new Map(plan.sentences.map(({ id, item }) => [id, { translated: item.text.toUpperCase() }]));
    expect(await plan.answer(answers)).toEqual({ translated: '<p>HELLO THERE. HOW ARE YOU?</p>' });
    await expect(p.plan({ src_lang: 'en', src_text: '<a>', format: 'xml' }, context)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/^The XML is not well-formed/),
    });
  }, 60_000);

  it('a text past its budget fails alone with 504, and the thread running it is stopped, not waited for', async () => {
    // The model's response timeout is the shorter budget here: the next request must not pay for the thread that
    // replaces the stopped one.
    const p = pool(1, 60_000);
    await p.warm();
    const started = performance.now();
    // About 10 s of work for the one thread (three copies of 4.75 million characters).
    const texts = Array.from({ length: 3 }, () => hugeHtml(250_000));
    const hostile = p.plan({ src_lang: 'en', src_text: texts, format: 'html' }, { ...context, timeoutMs: 300 });
    await expect(hostile).rejects.toMatchObject({
      code: 'REQUEST_TIMEOUT',
      status: 504,
      message:
        "Request timed out: its text was not prepared within 300 ms (the model's response timeout): markup, subtitles, language detection, sentence segmentation and glossary terms; send it in smaller parts.",
    });
    const timedOutMs = performance.now() - started;
    // The next request is planned by a fresh thread (loading the text modules from source takes a second or two
    // here); had the runaway thread been left to finish, it would wait the rest of those ~10 s.
    const next = await p.plan({ src_lang: 'en', src_text: 'Hello.' }, context);
    const nextMs = performance.now() - started - timedOutMs;
    expect(next.sentences).toEqual([{ id: '0.0.0', item: { srcLang: 'en', text: 'Hello.' } }]);
    expect(timedOutMs).toBeLessThan(2_000);
    expect(nextMs).toBeLessThan(6_000);
  }, 60_000);

  it('TEXT_TIMEOUT_MS bounds a text under a longer model timeout', async () => {
    const p = pool(1, 200);
    await p.warm();
    await expect(
      p.plan({ src_lang: 'en', src_text: hugeHtml(250_000), format: 'html' }, context),
    ).rejects.toMatchObject({
      code: 'REQUEST_TIMEOUT',
      message: expect.stringContaining('within 200 ms (TEXT_TIMEOUT_MS)'),
    });
  }, 60_000);
});
