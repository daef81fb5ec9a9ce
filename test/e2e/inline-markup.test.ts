/**
 * Sentences whole across inline markup (issue 38 item 1), from a client's seat: the router's ways in (native
 * `format: "html"`, DeepL `tag_handling=html`, LibreTranslate `format: html`, and DeepL `tag_handling=xml` with its
 * `non_splitting_tags` or its outline detection) against a real model server running the copy model
 * (tools/demo-model/copy-weights.ts), whose translation is its source token for token and whose cross-attention says
 * which source token each target token copies. So every inline element must land on exactly the words it wrapped.
 * The copy model writes no `<unk>` back, so a sentence with characters outside its vocabulary comes back shorter than
 * it went in: there only the alignment, not the elements' places in proportion, puts a tag back on its words.
 */
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRouterApp } from '../../router/app.js';
import { Upstream } from '../../router/upstream/upstream.js';
import { startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';

let server: TestServer;
let upstream: Upstream;
let app: ReturnType<typeof createRouterApp>;

beforeAll(async () => {
  server = await startTinyTranslationServer(['de'], { preset: 'tiny-copy', config: { maxNewTokens: 120 } });
  upstream = new Upstream({ url: server.inference, connections: 4, timeoutMs: 30_000 });
  app = createRouterApp(
    { maxBodyBytes: 1 << 20, languages: ['en', 'de'], logBodies: false, maxRequestChars: 50_000 },
    { upstream, logger: pino({ level: 'silent' }) },
  );
});
afterAll(async () => {
  await upstream.close();
  await server?.close();
});

const post = async (path: string, body: Record<string, unknown>) => {
  const res = await app.request(path, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  expect(res.status, text).toBe(200);
  return JSON.parse(text) as Record<string, unknown>;
};

const native = async (html: string) =>
  (await post('/', { src_lang: 'en', tgt_lang: 'de', src_text: html, format: 'html' })).translated as string;
const deepl = async (html: string) =>
  (
    (await post('/v2/translate', { text: [html], source_lang: 'EN', target_lang: 'DE', tag_handling: 'html' }))
      .translations as { text: string }[]
  )[0]!.text;
const libre = async (html: string) =>
  (await post('/translate', { q: html, source: 'en', target: 'de', format: 'html' })).translatedText as string;
const plain = async (text: string) =>
  (await post('/', { src_lang: 'en', tgt_lang: 'de', src_text: text })).translated as string;

/** Documents whose copy must come back byte for byte: every tag on the words it wrapped. */
const DOCUMENTS = [
  '<p>Click <b>here</b> to continue.</p>',
  '<ul><li>Open the <a href="/door?a=1&amp;b=2" class="k">front <i>door</i></a> now. Then <em>close</em> it.</li></ul>',
  '<h1>The <span lang="en" data-x="1">quick <b>brown</b> fox</span> jumps</h1><p>Run <code>npm ci</code> twice.</p>',
  '<table><tr><td>A <sup>2</sup> and <sub>x</sub> here</td></tr></table>',
  '<p>Keep <span translate="no">this name</span> as <b>it</b> is.</p>',
];

describe('inline markup carried by the word alignment (copy model)', () => {
  for (const [api, translate] of [
    ['native format html', native],
    ['DeepL tag_handling=html', deepl],
    ['LibreTranslate format html', libre],
  ] as const) {
    it(`${api}: every inline element lands on the words it wrapped`, async () => {
      for (const html of DOCUMENTS) expect(await translate(html)).toBe(html);
    });
  }

  it('DeepL tag_handling=xml and native format xml: each inline element lands on the words it wrapped', async () => {
    const xml = async (text: string, more: Record<string, unknown>) =>
      (
        (
          await post('/v2/translate', {
            text: [text],
            source_lang: 'EN',
            target_lang: 'DE',
            tag_handling: 'xml',
            ...more,
          })
        ).translations as { text: string }[]
      )[0]!.text;
    const listed = { non_splitting_tags: 'b', outline_detection: '0' };
    for (const text of [
      'Press <b>Continue</b> to advance.',
      '<par>Open the <b>front door</b> now, then <b>close</b> it.</par>',
      '<doc><par>The <b id="k" x:t="a&amp;b">quick <x:i>brown</x:i> fox</b> jumps.</par><par>Keep <raw>a b</raw> as <b>it</b> is.</par></doc>',
    ]) {
      expect(await xml(text, { ...listed, non_splitting_tags: 'b,x:i', ignore_tags: 'raw' })).toBe(text);
    }
    // One unit, translated whole: its inner whitespace comes back collapsed, where text nodes apart keep theirs.
    expect(await xml('Press\n  <b>Continue</b>\n  to advance.', listed)).toBe('Press <b>Continue</b> to advance.');
    // Inferred by outline detection, with nothing listed.
    const inferred = '<doc>\n  <par>Click <link ref="/a">here</link> to <em>continue</em>.</par>\n</doc>';
    expect(await xml(inferred, {})).toBe(inferred);
    // The native API takes the same choices as fields of its own.
    const native = await post('/', {
      src_lang: 'en',
      tgt_lang: 'de',
      src_text: 'Press\n  <b>Continue</b>\n  to advance.',
      format: 'xml',
      fragment: true,
      non_splitting_tags: ['b'],
      outline_detection: false,
    });
    expect(native.translated).toBe('Press <b>Continue</b> to advance.');
    // A copy shorter than its source: only the alignment, not places in proportion, puts the tag on its word.
    const text = 'Ωμέγα Ωμέγα Ωμέγα Ωμέγα, click here to go on.';
    const copied = await plain(text);
    expect(await xml(text.replace('here', '<b>here</b>'), listed)).toBe(copied.replace('here', '<b>here</b>'));
  });

  it('a translation shorter than its source still gets each tag on its own words', async () => {
    const text = 'Ωμέγα Ωμέγα Ωμέγα Ωμέγα, click here to go on.';
    const copied = await plain(text);
    // The copy drops what it cannot write, so places in proportion would be off by that many characters.
    expect(copied.length).toBeLessThan(text.length - 10);
    expect(copied).toContain('click here to go on.');
    const html = `<p>${text.replace('here', '<b>here</b>').replace('go on', '<a href="#">go <i>on</i></a>')}</p>`;
    const expected = `<p>${copied.replace('here', '<b>here</b>').replace('go on', '<a href="#">go <i>on</i></a>')}</p>`;
    expect(await native(html)).toBe(expected);
    expect(await deepl(html)).toBe(expected);
    expect(await libre(html)).toBe(expected);
  });
});
