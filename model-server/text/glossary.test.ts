import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  formatGlossaryTsv,
  glossaryEntries,
  MAX_GLOSSARY_CHARS,
  MAX_GLOSSARY_ENTRIES,
  MAX_TERM_CHARS,
  parseGlossaryEntries,
  termsFor,
  type GlossaryEntries,
  type SentenceTerm,
} from './glossary.js';

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

  it('refuses a glossary past its caps, naming the cap', () => {
    const entry = (i: number, chars = 8): [string, string] => [`${i}`.padStart(chars, 'x'), 't'];
    expect(() => glossaryEntries(Array.from({ length: MAX_GLOSSARY_ENTRIES + 1 }, (_, i) => entry(i)))).toThrow(
      `A glossary holds at most ${MAX_GLOSSARY_ENTRIES} entries.`,
    );
    expect(() => glossaryEntries([entry(1, MAX_TERM_CHARS + 1)])).toThrow(
      `Glossary entry 1 has a term over ${MAX_TERM_CHARS} characters.`,
    );
    // Terms of the longest length allowed, as many as the characters' cap lets in, and one more.
    const fit = Math.floor(MAX_GLOSSARY_CHARS / (MAX_TERM_CHARS + 1));
    expect(glossaryEntries(Array.from({ length: fit }, (_, i) => entry(i, MAX_TERM_CHARS))).size).toBe(fit);
    expect(() => glossaryEntries(Array.from({ length: fit + 1 }, (_, i) => entry(i, MAX_TERM_CHARS)))).toThrow(
      `A glossary holds at most ${MAX_GLOSSARY_CHARS} characters of terms, source and target together; entry ${fit + 1} goes past it.`,
    );
  });
});

describe('termsFor', () => {
  const entries = glossaryEntries([
    ['cloud', 'Wolke'],
    ['cloud computing', 'Cloud-Computing'],
    ['Acme', 'ACME'],
    ['东京', 'Tokyo'],
  ]);

  it('whole words in any case, longest match first, each target once, in order, with where each stands', () => {
    expect(termsFor('Acme sells Cloud Computing; the cloud is ACME’s.', entries)).toEqual([
      [
        'Acme',
        'ACME',
        [
          [0, 4],
          [41, 45],
        ],
      ],
      ['cloud computing', 'Cloud-Computing', [[11, 26]]],
      ['cloud', 'Wolke', [[32, 37]]],
    ]);
    expect(termsFor('Acmeville clouds', entries)).toEqual([]);
  });

  it('anywhere in scripts written without spaces', () => {
    expect(termsFor('我在东京工作', entries)).toEqual([['东京', 'Tokyo', [[2, 4]]]]);
  });

  it("spans are the sentence's own offsets, also after a character that lower-cases to two (İ)", () => {
    expect(termsFor('İstanbul hosts Acme.', entries)).toEqual([['Acme', 'ACME', [[15, 19]]]]);
  });
});

/** termsFor's meaning, spelled out: at each place the longest term that matches there, tried one by one. */
function naiveTermsFor(sentence: string, entries: GlossaryEntries): SentenceTerm[] {
  const wordChar = (c: string | undefined) => c !== undefined && /[\p{L}\p{M}\p{N}_]/u.test(c);
  const unspaced = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]/u;
  const terms = [...entries]
    .map((entry) => ({ entry, source: entry[0].toLowerCase(), whole: !unspaced.test(entry[0]) }))
    .sort((a, b) => b.source.length - a.source.length);
  const lower = sentence.toLowerCase();
  const found: SentenceTerm[] = [];
  // A place in the lower-cased sentence as a place in the sentence: the shortest prefix that lower-cases as long.
  const origin = (at: number) => {
    let i = 0;
    while (sentence.slice(0, i).toLowerCase().length < at) i++;
    return i;
  };
  for (let at = 0; at < lower.length;) {
    const match = terms.find(
      ({ source, whole }) =>
        lower.startsWith(source, at) && (!whole || (!wordChar(lower[at - 1]) && !wordChar(lower[at + source.length]))),
    );
    if (match === undefined) at++;
    else {
      const span: [number, number] = [origin(at), origin(at + match.source.length)];
      const term = found.find(([, target]) => target === match.entry[1]);
      if (term === undefined) found.push([...match.entry, [span]]);
      else term[2].push(span);
      at += match.source.length;
    }
  }
  return found;
}

describe('termsFor against its meaning', () => {
  // Few characters, so that terms overlap, nest, repeat in other cases and sit at word edges.
  const char = fc.constantFrom('a', 'b', 'A', ' ', '.', '-', '_', '1', '东', '京', 'é', 'İ', '😀', "'");
  const string = (maxLength: number) => fc.array(char, { minLength: 1, maxLength }).map((c) => c.join(''));

  it('property: the same terms, in the same order, as trying every term at every place', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.tuple(string(4), fc.constantFrom('X', 'Y', 'Z', 'W')), {
          minLength: 1,
          maxLength: 8,
          selector: ([source]) => source.trim(),
        }),
        fc.array(string(6), { maxLength: 4 }),
        (pairs, sentences) => {
          fc.pre(pairs.every(([source]) => source.trim() !== ''));
          const entries = glossaryEntries(pairs);
          // Each sentence alone, and followed by every term, so that most terms occur.
          for (const sentence of sentences.flatMap((s) => [s, `${s} ${pairs.map(([source]) => source).join(' ')}`])) {
            expect(termsFor(sentence, entries)).toEqual(naiveTermsFor(sentence, entries));
          }
        },
      ),
      { numRuns: 2_000 },
    );
  });
});
