import { describe, expect, it } from 'vitest';
import { OOXML } from './dialects.js';
import { planParagraphs } from './paragraphs.js';

const W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"';
const document = (body: string) => `<w:document ${W}><w:body>${body}</w:body></w:document>`;
/** A Word run: its properties (`b`, `i`), then its text. */
const run = (text: string, props = '') =>
  `<w:r>${props === '' ? '' : `<w:rPr><w:${props}/></w:rPr>`}<w:t xml:space="preserve">${text}</w:t></w:r>`;

/** Each word of `text` linked to itself (a copy model's alignment); `spaced`: tokens hold their leading space. */
function copyLinks(text: string, spaced = false): number[] {
  return [...text.matchAll(/\S+/g)].flatMap(({ index }, k, all) => {
    const start = spaced && index > 0 ? index - 1 : index;
    const end = index + all[k]![0].length;
    return [start, end, start, end];
  });
}

/** Where the whole word `word` first stands in `text`. */
const wordAt = (text: string, word: string) => new RegExp(`(?<!\\p{L})${word}(?!\\p{L})`, 'u').exec(text)!.index;

/** Links from target words to source words, `[target word, source word]` by their first occurrence. */
function wordLinks(source: string, target: string, pairs: [string, string][]): number[] {
  return pairs.flatMap(([t, s]) => {
    const at = wordAt(target, t);
    const from = wordAt(source, s);
    return [at, at + t.length, from, from + s.length];
  });
}

function render(body: string, translations: string[], links: (number[] | undefined)[]): string {
  const plan = planParagraphs(document(body), OOXML, 'word/document.xml');
  return plan.render(translations, links);
}

describe('runs placed by the word alignment', () => {
  const paragraph =
    '<w:p>' +
    run('The quick ') +
    run('brown', 'b') +
    run(' fox and an ') +
    run('italic', 'i') +
    run(' word.') +
    '</w:p>';
  const text = 'The quick brown fox and an italic word.';

  it('puts every run back on its own words when the translation is the source (a copy model)', () => {
    for (const spaced of [false, true])
      expect(render(paragraph, [text], [copyLinks(text, spaced)]), `spaced ${spaced}`).toBe(document(paragraph));
  });

  it('puts each run on the words its words align with in another language', () => {
    const target = 'Le renard brun et un mot italique.';
    const links = wordLinks(text, target, [
      ['Le', 'The'],
      ['renard', 'fox'],
      ['brun', 'brown'],
      ['et', 'and'],
      ['un', 'an'],
      ['mot', 'word'],
      ['italique', 'italic'],
    ]);
    // "renard" (fox) came before "brun": the plain run after the bold one starts at its next word, "et". "mot"
    // (word) came before "italique": the last run has no word after the italic one's and is left empty.
    expect(render(paragraph, [target], [links])).toBe(
      document(
        '<w:p>' +
          run('Le renard ') +
          run('brun', 'b') +
          run(' et un mot ') +
          run('italique.', 'i') +
          run('') +
          '</w:p>',
      ),
    );
  });

  it('keeps runs in their order when the translation reorders their words, each run kept', () => {
    const body = '<w:p>' + run('Big', 'i') + run(' ') + run('house', 'b') + run(' here.') + '</w:p>';
    const source = 'Big house here.';
    const target = 'Haus groß hier.';
    const links = wordLinks(source, target, [
      ['Haus', 'house'],
      ['groß', 'Big'],
      ['hier', 'here'],
    ]);
    // The bold run's word moved before the italic one's: the runs keep their order (moving a run could move what is
    // anchored between runs), so each takes the next words in turn and none is dropped.
    expect(render(body, [target], [links])).toBe(
      document('<w:p>' + run('Haus', 'i') + run(' ') + run('groß', 'b') + run(' hier.') + '</w:p>'),
    );
  });

  it('gives a run no word is linked to its place in proportion, whole words', () => {
    const body = '<w:p>' + run('The ') + run('very', 'b') + run(' big dog.') + '</w:p>';
    const source = 'The very big dog.';
    const target = 'Le très grand chien.';
    const links = wordLinks(source, target, [
      ['Le', 'The'],
      ['grand', 'big'],
      ['chien', 'dog'],
    ]);
    expect(render(body, [target], [links])).toBe(
      document('<w:p>' + run('Le ') + run('très', 'b') + run(' grand chien.') + '</w:p>'),
    );
  });

  it('keeps empty and whitespace-only runs, and a tab and a field between units where they stand', () => {
    const field =
      '<w:r><w:fldChar w:fldCharType="begin"/></w:r><w:r><w:instrText xml:space="preserve"> PAGE </w:instrText></w:r>' +
      '<w:r><w:fldChar w:fldCharType="separate"/></w:r><w:r><w:t>7</w:t></w:r><w:r><w:fldChar w:fldCharType="end"/></w:r>';
    const body =
      '<w:p>' +
      run('') +
      run('Hello ') +
      run('dear', 'b') +
      '<w:r><w:tab/></w:r>' +
      run('See page ', 'i') +
      field +
      run(' now.') +
      '</w:p>';
    const plan = planParagraphs(document(body), OOXML, 'word/document.xml');
    expect(plan.texts).toEqual(['Hello dear', 'See page', 'now.']);
    const out = plan.render(
      plan.texts,
      plan.texts.map((t) => copyLinks(t)),
    );
    expect(out).toBe(document(body));
    // Another translation: each unit's runs change, the tab, the field and the empty run do not.
    const targets = ['Bonjour cher', 'Voir page', 'maintenant.'];
    const links = [
      wordLinks('Hello dear', 'Bonjour cher', [
        ['Bonjour', 'Hello'],
        ['cher', 'dear'],
      ]),
      copyLinks('Voir page'),
      copyLinks('maintenant.'),
    ];
    expect(plan.render(targets, links)).toBe(
      document(
        '<w:p>' +
          run('') +
          run('Bonjour ') +
          run('cher', 'b') +
          '<w:r><w:tab/></w:r>' +
          run('Voir page ', 'i') +
          field +
          run(' maintenant.') +
          '</w:p>',
      ),
    );
  });

  it('without an alignment, puts the translation into the first run with text and empties the others', () => {
    for (const none of [undefined, []])
      expect(render(paragraph, ['Le renard brun et un mot italique.'], [none])).toBe(
        document(
          '<w:p>' +
            run('Le renard brun et un mot italique.') +
            run('', 'b') +
            run('') +
            run('', 'i') +
            run('') +
            '</w:p>',
        ),
      );
  });
});
