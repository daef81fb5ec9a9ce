import { parseFragment } from 'parse5';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../../harness/http.js';
import { startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';

/** What users send beside plain text: markup, subtitle files, glossaries — through a real model server. */
describe('formats and glossaries behind the model server (generated tiny M2M100)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['de', 'fr'], { workers: 'in-process' });
  });
  afterAll(() => t?.close());

  const translate = (body: Record<string, unknown>) =>
    call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', ...body } });
  /** What a plain request answers for each text: the reference a format's pieces must match. */
  const plain = async (texts: string[]) => (await translate({ src_text: texts })).body.translated as string[];
  const escape = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

  it('html: a block is translated whole across its inline elements; tags, attributes, code and comments are the input’s own', async () => {
    const source =
      '<h1 id="t">Good morning</h1>\n<p class="x">Open the <a href="/door?a=1&amp;b=2">front door</a> now.</p>' +
      '<!-- note --><p><code>npm start</code> <img alt="A red house" src="h.png"></p>';
    const res = await translate({ src_text: source, format: 'html' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [morning, open, house] = await plain(['Good morning', 'Open the front door now.', 'A red house']);
    const attribute = (s: string) => s!.trim().replace(/&/g, '&amp;').replace(/"/g, '&quot;');
    const out = res.body.translated as string;
    // The sentence is one translation; the link is somewhere in it (where the random model's attention says), once.
    const [before, after] = out.split('<p><code>');
    expect(before!.replace('<a href="/door?a=1&amp;b=2">', '').replace('</a>', '')).toBe(
      `<h1 id="t">${escape(morning!.trim())}</h1>\n<p class="x">${escape(open!.trim())}</p><!-- note -->`,
    );
    expect(before!.split('<a href="/door?a=1&amp;b=2">').length).toBe(2);
    expect(after).toBe(`npm start</code> <img alt="${attribute(house!)}" src="h.png"></p>`);
    expect(parseFragment(out).childNodes.map((n) => n.nodeName)).toEqual(['h1', '#text', 'p', '#comment', 'p']);
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
      [{ src_text: 'Hello', format: 'docx' }, /Field "format" must be one of text, html, xml, srt, vtt/],
      [{ src_text: '<p>Hi</p>', format: 'html', ignore_tags: 'code' }, /Field "ignore_tags" must be an array/],
    ];
    for (const [body, message] of cases) {
      const res = await translate(body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
  });

  it('an inline glossary: each sentence holding a source term gets its target term; the others are unchanged', async () => {
    const texts = ['the quick brown fox jumps.', 'hello world.', 'The lazy dog and the fox.'];
    const res = await translate({ src_text: texts, glossary: { fox: 'Fuchs', 'lazy dog': 'fauler Hund' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [fox, hello, dog] = res.body.translated as string[];
    expect(fox).toContain('Fuchs');
    expect(dog).toContain('Fuchs');
    expect(dog).toContain('fauler Hund');
    expect(hello).toBe((await plain([texts[1]!]))[0]);
    // Without the glossary the generated model writes neither term: the glossary made them appear.
    for (const text of await plain(texts)) expect(text).not.toMatch(/Fuchs|fauler Hund/);
  });

  it('stored glossaries: created, listed, read back as TSV, used by id for their pair only, deleted', async () => {
    const created = await call(`${t.inference}/glossaries/g-1`, {
      method: 'PUT',
      body: { name: 'Animals', source_lang: 'EN', target_lang: 'de', entries: 'fox\tFuchs\ndog\tHund\n' },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    expect(created.body).toMatchObject({ glossary_id: 'g-1', name: 'Animals', ready: true, entry_count: 2 });
    expect(created.body).toMatchObject({ source_lang: 'en', target_lang: 'de' });
    expect((await call(`${t.inference}/glossaries`)).body.glossaries.map((g: any) => g.glossary_id)).toEqual(['g-1']);
    const entries = await fetch(`${t.inference}/glossaries/g-1/entries`);
    expect(entries.headers.get('content-type')).toMatch(/^text\/tab-separated-values/);
    expect(await entries.text()).toBe('fox\tFuchs\ndog\tHund');

    const used = await translate({ src_text: 'a fox and a dog', glossary_id: 'g-1' });
    expect(used.status, JSON.stringify(used.body)).toBe(200);
    expect(used.body.translated).toContain('Fuchs');
    expect(used.body.translated).toContain('Hund');

    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['fr', { src_lang: 'en', src_text: 'a fox', glossary_id: 'g-1' }, /is for en → de, not → fr/],
      ['de', { src_lang: 'fr', src_text: 'un renard', glossary_id: 'g-1' }, /for en → de, but the text is in fr/],
      ['de', { src_lang: 'en', src_text: 'a fox', glossary_id: 'nope' }, /Unknown glossary_id "nope"/],
      ['de', { src_lang: 'en', src_text: 'a fox', glossary: { fox: '</s>' } }, /cannot write/],
      ['de', { src_lang: 'en', src_text: 'a fox', glossary: { fox: 3 } }, /source term → target term \(strings\)/],
    ];
    for (const [model, body, message] of cases) {
      const res = await call(`${t.inference}/predictions/${model}`, { body });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    expect((await call(`${t.inference}/glossaries/g-1`, { method: 'DELETE' })).status).toBe(204);
    expect((await call(`${t.inference}/glossaries/g-1`)).status).toBe(404);
    const gone = await translate({ src_text: 'a fox', glossary_id: 'g-1' });
    expect(gone.status).toBe(400);
  });

  it('a sentence longer than the model reads: each part is held to the glossary terms found inside it', async () => {
    // The tiny model reads 128 tokens: 150 words make several parts; "fox" stands in the first, "dog" in the last.
    const words = Array.from({ length: 150 }, (_, i) => ['alpha', 'beta', 'gamma', 'delta'][i % 4]);
    const res = await translate({
      src_text: ['fox', ...words, 'dog'].join(' '),
      glossary: { fox: 'Fuchs', dog: 'Hund' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const count = (term: string) => (res.body.translated as string).split(term).length - 1;
    expect([count('Fuchs'), count('Hund')]).toEqual([1, 1]);
  });

  it('alternatives: distinct runners-up with scores, per text; none unless asked; plain text only', async () => {
    const one = await translate({ src_text: 'the quick brown fox. hello world.', alternatives: 2 });
    expect(one.status, JSON.stringify(one.body)).toBe(200);
    const { translated, alternatives } = one.body as {
      translated: string;
      alternatives: { translated: string; score: number }[];
    };
    expect(alternatives.length).toBeGreaterThan(0);
    expect(alternatives.length).toBeLessThanOrEqual(2);
    for (const a of alternatives) {
      expect(typeof a.score).toBe('number');
      expect(a.translated).not.toBe(translated);
    }
    const many = await translate({ src_text: ['hello world', 'good morning'], alternatives: 1 });
    expect(many.body.alternatives).toHaveLength(2);
    expect((await translate({ src_text: 'hello world' })).body.alternatives).toBeUndefined();
    const html = await translate({ src_text: '<p>hi</p>', format: 'html', alternatives: 1 });
    expect(html.status).toBe(400);
    expect(html.body.message).toMatch(/alternatives are offered for plain text/);
    const tooMany = await translate({ src_text: 'hello', alternatives: 9 });
    expect(tooMany.status).toBe(400);
  });
});
