import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parseFragment } from 'parse5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../engine/demo-model/index.js';
import { call, startTestServer, type TestServer } from './helpers.js';

/** `format` on the translation API: markup and subtitle files, translated by the generated tiny M2M100. */
describe('formats behind the model server (generated tiny M2M100)', () => {
  let t: TestServer;
  let modelRoot: string;
  beforeAll(async () => {
    modelRoot = mkdtempSync(path.join(tmpdir(), 'mt-serve-tiny-'));
    makeDemoModel('tiny', modelRoot);
    t = await startTestServer({
      entries: ['de'],
      handler: 'translation',
      modelDir: modelRoot,
      config: { numBeams: 1, maxNewTokens: 16, intraOpThreads: 1 },
    });
    const res = await call(`${t.management}/models?url=de&batch_size=8&max_batch_delay=5`, { method: 'POST' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
    rmSync(modelRoot, { recursive: true, force: true });
  });

  const translate = (body: Record<string, unknown>) =>
    call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', ...body } });
  /** What a plain request answers for each text: the reference a format's pieces must match. */
  const plain = async (texts: string[]) => (await translate({ src_text: texts })).body.translated as string[];
  const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

  it('html: each text node is translated in place; tags, attributes, code and comments are the input’s own', async () => {
    const source =
      '<h1 id="t">Good morning</h1>\n<p class="x">Open the <a href="/door?a=1&amp;b=2">front door</a> now.</p>' +
      '<!-- note --><p><code>npm start</code> <img alt="A red house" src="h.png"></p>';
    const res = await translate({ src_text: source, format: 'html' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [morning, open, door, now, house] = await plain([
      'Good morning',
      'Open the',
      'front door',
      'now.',
      'A red house',
    ]);
    const attribute = (s: string) => s!.trim().replace(/&/g, '&amp;').replace(/"/g, '&quot;');
    expect(res.body.translated).toBe(
      `<h1 id="t">${escape(morning!.trim())}</h1>\n<p class="x">${escape(open!.trim())} ` +
        `<a href="/door?a=1&amp;b=2">${escape(door!.trim())}</a> ${escape(now!.trim())}</p>` +
        `<!-- note --><p><code>npm start</code> <img alt="${attribute(house!)}" src="h.png"></p>`,
    );
    expect(parseFragment(res.body.translated).childNodes.map((n) => n.nodeName)).toEqual([
      'h1',
      '#text',
      'p',
      '#comment',
      'p',
    ]);
  });

  it('srt: cue text translated, numbering and timing untouched; an array mixes with the batch', async () => {
    const srt = '1\n00:00:01,000 --> 00:00:02,000\nGood morning.\n\n2\n00:00:03,000 --> 00:00:04,000\nSee you.\n';
    const res = await translate({ src_text: [srt, srt], format: 'srt' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [morning, see] = await plain(['Good morning.', 'See you.']);
    const expected = srt.replace('Good morning.', morning!.trim()).replace('See you.', see!.trim());
    expect(res.body.translated).toEqual([expected, expected]);
  });

  it('malformed files, unknown formats and bad ignore_tags are 400s naming the problem', async () => {
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ src_text: '<doc><a>x</doc>', format: 'xml' }, /not well-formed at line 1, column 15/],
      [{ src_text: '1\nnot a timing\nHello\n', format: 'srt' }, /cue 1 \(line 1\) has no timing line/],
      [{ src_text: 'Hello', format: 'docx' }, /format must be one of text, html, xml, srt, vtt/],
      [{ src_text: '<p>Hi</p>', format: 'html', ignore_tags: 'code' }, /ignore_tags must be an array/],
    ];
    for (const [body, message] of cases) {
      const res = await translate(body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
  });
});
