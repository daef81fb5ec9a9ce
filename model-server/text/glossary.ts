/**
 * @module model-server/text/glossary — glossary entries (source term → target term) as DeepL takes them, and the
 * target terms a sentence must contain.
 *
 * A sentence needs an entry's target term when the entry's source term occurs in it as whole words (any case; in
 * scripts written without spaces, anywhere). The engine then enforces those terms while decoding (engine/
 * constraints.ts): the translation contains each of them, whatever the model would have said.
 */
import { ServeError } from '../../common/errors.js';
import { NONE, StartsMatcher, type StartPattern } from './starts-matcher.js';

/** Source term → target term, in entry order. */
export type GlossaryEntries = ReadonlyMap<string, string>;

/**
 * DeepL's limits are per glossary file (10 MB); ours bound what a glossary costs to match with (an automaton of its
 * source terms, built per request for an inline one): 10,000 entries averaging 25 characters a side.
 */
export const MAX_GLOSSARY_ENTRIES = 10_000;
export const MAX_TERM_CHARS = 1_000;
/** Characters of all terms together, source and target. */
export const MAX_GLOSSARY_CHARS = 500_000;
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
  let chars = 0;
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
    chars += s.length + t.length;
    if (chars > MAX_GLOSSARY_CHARS) {
      throw new ServeError(
        'BAD_REQUEST',
        `A glossary holds at most ${MAX_GLOSSARY_CHARS} characters of terms, source and target together; entry ${n} goes past it.`,
      );
    }
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

// Whether each UTF-16 unit is a word character, as WORD_CHAR tests it (0 not asked yet, 1 yes, 2 no).
const wordUnits = new Uint8Array(0x10000);
function isWordUnit(unit: number): boolean {
  if (wordUnits[unit] === 0) wordUnits[unit] = WORD_CHAR.test(String.fromCharCode(unit)) ? 1 : 2;
  return wordUnits[unit] === 1;
}

/*
 * Matching finds the longest source term starting at each place of a sentence in one pass (starts-matcher.ts):
 * trying each term at each place cost sentence × terms × term length (3,000 terms of 100 characters over 10,000
 * characters took 8.7 s). Whole words: the text is read as if a MARK stood before each character that is not a word
 * character and at its end, and a whole-word term ends with one, so it is found only where a word ends; that it
 * starts where a word does is the same for every term at a place, and checked there.
 */
const MARK = 0x10000;
const WHOLE = 0;
const ANYWHERE = 1;

interface Term {
  /** The source term lower-cased, as matched. */
  source: string;
  /** The entry as given. */
  entry: [string, string];
}

const matchers = new WeakMap<GlossaryEntries, { terms: Term[]; automaton: StartsMatcher }>();

function matcherOf(entries: GlossaryEntries): { terms: Term[]; automaton: StartsMatcher } {
  let matcher = matchers.get(entries);
  if (matcher === undefined) {
    const terms: Term[] = [];
    const patterns: StartPattern[] = [];
    for (const [source, target] of entries) {
      const term = { source: source.toLowerCase(), entry: [source, target] as [string, string] };
      // Matched as whole words, except in scripts written without spaces: anywhere.
      const whole = !UNSPACED.test(source);
      const symbols: number[] = [];
      for (let i = 0; i < term.source.length; i++) {
        const unit = term.source.charCodeAt(i);
        if (!isWordUnit(unit)) symbols.push(MARK);
        symbols.push(unit);
      }
      if (whole) symbols.push(MARK);
      terms.push(term);
      patterns.push({ symbols, group: whole ? WHOLE : ANYWHERE });
    }
    matcher = { terms, automaton: new StartsMatcher(patterns) };
    matchers.set(entries, matcher);
  }
  return matcher;
}

/** `[source term, target term, spans]`: the [start, end) UTF-16 spans of the sentence its source terms cover. */
export type SentenceTerm = [string, string, [number, number][]];

/**
 * The entries `sentence` is held to (its translation must contain their target terms): those whose source term
 * occurs in it, in the order they occur, each target once with every span where one of its source terms stands.
 * Matches do not overlap: scanning from the start, the longest source term at a place wins (of two as long, the
 * earlier entry). Linear in the sentence.
 */
export function termsFor(sentence: string, entries: GlossaryEntries): SentenceTerm[] {
  const { terms, automaton } = matcherOf(entries);
  const lower = sentence.toLowerCase();
  const length = lower.length;
  // The longest term of each kind starting at each place, the sentence read from its end.
  const wholeAt = new Int32Array(length + 1);
  const anywhereAt = new Int32Array(length + 1);
  let state = automaton.next(StartsMatcher.ROOT_STATE, MARK);
  for (let at = length; ; at--) {
    wholeAt[at] = automaton.longest(state, WHOLE);
    anywhereAt[at] = automaton.longest(state, ANYWHERE);
    if (at === 0) break;
    const unit = lower.charCodeAt(at - 1);
    state = automaton.next(state, unit);
    if (!isWordUnit(unit)) state = automaton.next(state, MARK);
  }
  const found = new Map<string, SentenceTerm>();
  const origin = originOf(sentence, lower);
  for (let at = 0; at < length;) {
    const whole = at === 0 || !isWordUnit(lower.charCodeAt(at - 1)) ? wholeAt[at]! : NONE;
    const anywhere = anywhereAt[at]!;
    const match = longer(terms, whole, anywhere);
    if (match === NONE) {
      at++;
      continue;
    }
    const { entry, source } = terms[match]!;
    const span: [number, number] = [origin(at), origin(at + source.length)];
    const term = found.get(entry[1]);
    if (term === undefined) found.set(entry[1], [...entry, [span]]);
    else term[2].push(span);
    at += source.length;
  }
  return [...found.values()];
}

/** Offsets of `lower` (`text` lower-cased) back to `text`'s: the same, unless a character lower-cased to two (İ). */
function originOf(text: string, lower: string): (at: number) => number {
  if (lower.length === text.length) return (at) => at;
  let end = 0;
  const origin = [...text].flatMap((char) =>
    Array<number>(char.toLowerCase().length).fill((end += char.length) - char.length),
  );
  return (at) => origin[at] ?? text.length;
}

/** Of two terms (indexes, or NONE), the longer; of two as long, the earlier entry. */
function longer(terms: readonly Term[], a: number, b: number): number {
  if (a === NONE || b === NONE) return a === NONE ? b : a;
  const [la, lb] = [terms[a]!.source.length, terms[b]!.source.length];
  return la > lb || (la === lb && a < b) ? a : b;
}
