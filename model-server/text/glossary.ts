/**
 * @module model-server/text/glossary — glossary entries (source term → target term) as DeepL takes them, and the
 * target terms a sentence must contain.
 *
 * A sentence needs an entry's target term when the entry's source term occurs in it as whole words (any case; in
 * scripts written without spaces, anywhere). The engine then enforces those terms while decoding (engine/
 * constraints.ts): the translation contains each of them, whatever the model would have said.
 */
import { ServeError } from '../../common/errors.js';

/** Source term → target term, in entry order. */
export type GlossaryEntries = ReadonlyMap<string, string>;

/** DeepL's limits are per glossary file (10 MB); ours keep a request's matching bounded. */
export const MAX_GLOSSARY_ENTRIES = 10_000;
export const MAX_TERM_CHARS = 1_000;
/** Target terms one sentence may be held to: each costs decoder steps, and all must fit the row's token cap. */
export const MAX_TERMS_PER_SENTENCE = 16;

const CONTROL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029]/u;

/** Entries from DeepL's `tsv` (term TAB term per line) or `csv` (RFC 4180, two columns, more ignored) formats. */
export function parseGlossaryEntries(text: string, format: 'tsv' | 'csv'): GlossaryEntries {
  const rows = format === 'tsv' ? text.split(/\r?\n/).map((line) => line.split('\t')) : parseCsv(text);
  const pairs: [string, string][] = [];
  rows.forEach((row, i) => {
    if (row.length === 1 && row[0]!.trim() === '') return;
    if (row.length < 2 || (format === 'tsv' && row.length !== 2)) {
      throw new ServeError(
        'BAD_REQUEST',
        `Glossary entry ${i + 1} must be a source and a target term separated by ${format === 'tsv' ? 'one tab' : 'a comma'}.`,
      );
    }
    pairs.push([row[0]!, row[1]!]);
  });
  return glossaryEntries(pairs);
}

/**
 * Checked entries from pairs (an inline glossary, a stored one): terms trimmed and non-empty, without control
 * characters, each source term once.
 * @throws ServeError BAD_REQUEST naming the first bad entry
 */
export function glossaryEntries(pairs: Iterable<readonly [string, string]>): GlossaryEntries {
  const entries = new Map<string, string>();
  let n = 0;
  for (const [source, target] of pairs) {
    n++;
    if (n > MAX_GLOSSARY_ENTRIES) {
      throw new ServeError('BAD_REQUEST', `A glossary holds at most ${MAX_GLOSSARY_ENTRIES} entries.`);
    }
    const [s, t] = [source.trim(), target.trim()];
    const problem =
      s === '' || t === ''
        ? `has an empty ${s === '' ? 'source' : 'target'} term`
        : CONTROL.test(s) || CONTROL.test(t)
          ? 'has a control character in a term'
          : s.length > MAX_TERM_CHARS || t.length > MAX_TERM_CHARS
            ? `has a term over ${MAX_TERM_CHARS} characters`
            : entries.has(s)
              ? `repeats the source term ${JSON.stringify(s)}`
              : undefined;
    if (problem) throw new ServeError('BAD_REQUEST', `Glossary entry ${n} ${problem}.`);
    entries.set(s, t);
  }
  if (entries.size === 0) throw new ServeError('BAD_REQUEST', 'A glossary needs at least one entry.');
  return entries;
}

/** The entries as DeepL's TSV. */
export function formatGlossaryTsv(entries: GlossaryEntries): string {
  return [...entries].map(([s, t]) => `${s}\t${t}`).join('\n');
}

function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') ((field += '"'), i++);
      else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"' && field === '') quoted = true;
    else if (c === ',') (row.push(field), (field = ''));
    else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i++;
      (row.push(field), rows.push(row), (row = []), (field = ''));
    } else field += c;
  }
  if (quoted) throw new ServeError('BAD_REQUEST', 'The glossary CSV has an unclosed quote.');
  if (field !== '' || row.length > 0) (row.push(field), rows.push(row));
  return rows;
}

const UNSPACED = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Thai}\p{sc=Lao}\p{sc=Khmer}\p{sc=Myanmar}]/u;
const WORD_CHAR = /[\p{L}\p{M}\p{N}_]/u;

interface Term {
  /** The source term lower-cased, as matched. */
  source: string;
  /** The entry as given. */
  entry: [string, string];
  /** Matched as whole words (false in scripts written without spaces: anywhere). */
  whole: boolean;
}

/** Entries indexed by the first character of their lower-cased source term: a sentence is scanned once. */
const indexes = new WeakMap<GlossaryEntries, Map<string, Term[]>>();

function indexOf(entries: GlossaryEntries): Map<string, Term[]> {
  let index = indexes.get(entries);
  if (index === undefined) {
    index = new Map();
    for (const [source, target] of entries) {
      const term: Term = { source: source.toLowerCase(), entry: [source, target], whole: !UNSPACED.test(source) };
      const first = term.source[0]!;
      const list = index.get(first);
      if (list) list.push(term);
      else index.set(first, [term]);
    }
    // Longest first, so that where two source terms start at one place the longer one wins.
    for (const list of index.values()) list.sort((a, b) => b.source.length - a.source.length);
    indexes.set(entries, index);
  }
  return index;
}

/**
 * The entries `sentence` is held to (its translation must contain their target terms): those whose source term
 * occurs in it, in the order they occur, each target once. Matches do not overlap: scanning from the start, the
 * longest source term at a place wins.
 */
export function termsFor(sentence: string, entries: GlossaryEntries): [string, string][] {
  const index = indexOf(entries);
  const lower = sentence.toLowerCase();
  const terms: [string, string][] = [];
  let at = 0;
  while (at < lower.length) {
    const match = index
      .get(lower[at]!)
      ?.find(
        (term) =>
          lower.startsWith(term.source, at) &&
          (!term.whole ||
            (!WORD_CHAR.test(lower[at - 1] ?? '') && !WORD_CHAR.test(lower[at + term.source.length] ?? ''))),
      );
    if (match === undefined) {
      at++;
      continue;
    }
    if (!terms.some(([, target]) => target === match.entry[1])) terms.push(match.entry);
    at += match.source.length;
  }
  return terms;
}
