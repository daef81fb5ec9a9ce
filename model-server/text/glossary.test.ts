import { describe, expect, it } from 'vitest';
import { formatGlossaryTsv, glossaryEntries, parseGlossaryEntries, termsFor } from './glossary.js';

describe('glossary entries', () => {
  it('reads DeepL’s TSV and CSV, and writes TSV back', () => {
    const tsv = parseGlossaryEntries('cloud\tWolke\r\nAcme\tAcme\n\n', 'tsv');
    expect([...tsv]).toEqual([
      ['cloud', 'Wolke'],
      ['Acme', 'Acme'],
    ]);
    expect(formatGlossaryTsv(tsv)).toBe('cloud\tWolke\nAcme\tAcme');
    const csv = parseGlossaryEntries('"a, b",x,ignored\r\nc,"d ""q"""\n', 'csv');
    expect([...csv]).toEqual([
      ['a, b', 'x'],
      ['c', 'd "q"'],
    ]);
  });

  it('refuses what cannot be a glossary, naming the entry', () => {
    expect(() => parseGlossaryEntries('a\tb\tc', 'tsv')).toThrow(/entry 1 must be a source and a target term/);
    expect(() => parseGlossaryEntries('a,"b', 'csv')).toThrow(/unclosed quote/);
    expect(() =>
      glossaryEntries([
        ['a', 'b'],
        ['a', 'c'],
      ]),
    ).toThrow(/entry 2 repeats the source term "a"/);
    expect(() => glossaryEntries([['a', ' ']])).toThrow(/entry 1 has an empty target term/);
    expect(() =>
      glossaryEntries([
        ['a', 'b'],
        ['', 'c'],
      ]),
    ).toThrow(/entry 2 has an empty source term/);
    expect(() => glossaryEntries([['a\u0000', 'b']])).toThrow(/control character/);
    expect(() => glossaryEntries([])).toThrow(/at least one entry/);
  });
});

describe('termsFor', () => {
  const entries = glossaryEntries([
    ['cloud', 'Wolke'],
    ['cloud computing', 'Cloud-Computing'],
    ['Acme', 'ACME'],
    ['东京', 'Tokyo'],
  ]);

  it('whole words in any case, longest match first, each target once, in order', () => {
    expect(termsFor('Acme sells Cloud Computing; the cloud is ACME’s.', entries)).toEqual([
      ['Acme', 'ACME'],
      ['cloud computing', 'Cloud-Computing'],
      ['cloud', 'Wolke'],
    ]);
    expect(termsFor('Acmeville clouds', entries)).toEqual([]);
  });

  it('anywhere in scripts written without spaces', () => {
    expect(termsFor('我在东京工作', entries)).toEqual([['东京', 'Tokyo']]);
  });
});
