import { describe, expect, it } from 'vitest';
import { createRequestParser } from './translation-contract.js';

// The router's parser is tested through its app (router/test/app.test.ts) and by property
// (test/reliability/parsing.property.test.ts); these are the model server's edge, whose target is its model.
describe('createRequestParser() — the model server edge', () => {
  const parse = createRequestParser();
  const bad = (body: unknown) => () => parse(body);

  it('takes a valid body as it is, without the fields it does not know (a tgt_lang is not read)', () => {
    expect(parse({ src_lang: 'en', src_text: ['a', 'b'], tgt_lang: 'whatever', split: 'none', x: 1 })).toEqual({
      src_lang: 'en',
      src_text: ['a', 'b'],
      split: 'none',
    });
    expect(parse({ src_lang: 'auto', src_text: 'Hi', detect: 'guess', alternatives: 2 })).toMatchObject({
      alternatives: 2,
    });
  });

  it('refuses bad shapes with the messages the router answers, every field at once', () => {
    expect(bad(null)).toThrow('Request body must be a JSON object {"src_lang", "src_text"}, got null.');
    expect(bad('translate me')).toThrow('Request body must be a JSON object {"src_lang", "src_text"}, got string.');
    expect(bad({ src_lang: 1, src_text: 'a' })).toThrow(
      'Field "src_lang" must be a string (a language code such as "en"), got number.',
    );
    expect(bad({ src_lang: 'en', src_text: { a: 1 } })).toThrow(
      'Field "src_text" must be a string or an array of strings, got object.',
    );
    expect(bad({ src_lang: 'en', src_text: [] })).toThrow('Field "src_text" is an empty array.');
    expect(bad({ src_lang: 'en', src_text: ['a', 2, ' \n'] })).toThrow(
      'Field "src_text[1]" must be a string, got number. Field "src_text[2]" is empty.',
    );
    expect(bad({ src_lang: 'en', src_text: 'a', split: 'paragraphs' })).toThrow(
      'Field "split" must be "sentences" (the default) or "none", got "paragraphs".',
    );
    expect(bad({ src_lang: 'auto', src_text: 'Hi', detect: 'maybe' })).toThrow(
      'Field "detect" must be "strict" (the default) or "guess", got "maybe".',
    );
    expect(bad({ src_lang: 'en', src_text: 'a', glossary: { a: 1 } })).toThrow(
      'Field "glossary" must be an object of source term → target term (strings).',
    );
    expect(bad({ src_text: '' })).toThrow(
      expect.objectContaining({
        code: 'BAD_REQUEST',
        message: 'Missing field "src_lang" (a language code such as "en"). Field "src_text" is empty.',
      }),
    );
  });

  it('alternatives are for plain text only, once every field is valid', () => {
    expect(bad({ src_lang: 'en', src_text: '<p>a</p>', format: 'html', alternatives: 1 })).toThrow(
      expect.objectContaining({
        code: 'BAD_REQUEST',
        message: 'alternatives are offered for plain text (format "text") only.',
      }),
    );
    expect(parse({ src_lang: 'en', src_text: '<p>a</p>', format: 'html', alternatives: 0 })).toMatchObject({
      format: 'html',
    });
  });

  it('alignment is for plain text only, and a boolean', () => {
    expect(parse({ src_lang: 'en', src_text: 'a', alignment: true })).toMatchObject({ alignment: true });
    expect(bad({ src_lang: 'en', src_text: '<p>a</p>', format: 'html', alignment: true })).toThrow(
      expect.objectContaining({
        code: 'BAD_REQUEST',
        message: 'alignment is answered for plain text (format "text") only.',
      }),
    );
    expect(bad({ src_lang: 'en', src_text: 'a', alignment: 'yes' })).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: 'Field "alignment" must be true or false.' }),
    );
  });

  it('alignment_edges: offsets within each text, shaped as src_text, with alignment only', () => {
    expect(
      parse({ src_lang: 'en', src_text: ['One two.', 'Three'], alignment: true, alignment_edges: [[4], []] }),
    ).toMatchObject({ alignment_edges: [[4], []] });
    expect(parse({ src_lang: 'en', src_text: 'One two.', alignment: true, alignment_edges: [0, 8] })).toMatchObject({
      alignment_edges: [0, 8],
    });
    const refused = expect.objectContaining({
      code: 'BAD_REQUEST',
      message: expect.stringContaining('alignment_edges needs alignment: true'),
    });
    // Without alignment; past its text's end; one list for two texts; a list where a text has a string.
    expect(bad({ src_lang: 'en', src_text: 'One two.', alignment_edges: [4] })).toThrow(refused);
    expect(bad({ src_lang: 'en', src_text: 'One two.', alignment: true, alignment_edges: [9] })).toThrow(refused);
    expect(bad({ src_lang: 'en', src_text: ['a', 'b'], alignment: true, alignment_edges: [[0]] })).toThrow(refused);
    expect(bad({ src_lang: 'en', src_text: 'a', alignment: true, alignment_edges: [[0]] })).toThrow(refused);
    expect(bad({ src_lang: 'en', src_text: 'a', alignment: true, alignment_edges: [-1] })).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: expect.stringContaining('alignment_edges') }),
    );
  });

  it('fragment is for XML only, and a boolean', () => {
    expect(parse({ src_lang: 'en', src_text: 'a <b>b</b>', format: 'xml', fragment: true })).toMatchObject({
      fragment: true,
    });
    expect(bad({ src_lang: 'en', src_text: 'a', fragment: true })).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: 'fragment applies to format "xml" only.' }),
    );
    expect(bad({ src_lang: 'en', src_text: 'a', format: 'xml', fragment: 'yes' })).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', message: 'Field "fragment" must be true or false.' }),
    );
  });

  it('the XML tag lists and outline detection: element names, bounded, for XML only', () => {
    const xml = { src_lang: 'en', src_text: '<p>a <x:b>b</x:b></p>', format: 'xml' };
    const lists = { non_splitting_tags: ['x:b'], splitting_tags: ['p'], outline_detection: false };
    expect(parse({ ...xml, ...lists })).toMatchObject(lists);
    expect(bad({ ...xml, format: 'html', non_splitting_tags: ['b'] })).toThrow(
      expect.objectContaining({
        code: 'BAD_REQUEST',
        message: 'non_splitting_tags, splitting_tags and outline_detection apply to format "xml" only.',
      }),
    );
    for (const [field, value, message] of [
      ['non_splitting_tags', ['1b'], 'Field "non_splitting_tags" must be an array of element names such as "b".'],
      ['splitting_tags', ['p'.repeat(101)], 'Field "splitting_tags" must be an array of element names such as "p".'],
      ['splitting_tags', Array(101).fill('p'), 'Field "splitting_tags" names at most 100 elements.'],
      ['outline_detection', '0', 'Field "outline_detection" must be true or false.'],
    ] as const) {
      expect(bad({ ...xml, [field]: value })).toThrow(expect.objectContaining({ code: 'BAD_REQUEST', message }));
    }
  });
});
