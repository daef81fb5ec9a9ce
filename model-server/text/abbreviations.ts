/**
 * @module model-server/text/abbreviations — per-language words that end in a period without ending a
 * sentence (the policy half of sentence segmentation; `segment.ts` is the mechanism).
 *
 * Node's `Intl.Segmenter` runs ICU's sentence rules without ICU's per-locale break suppressions, so it
 * breaks after "Mr. " or "z. B. " whenever a capital letter follows. These lists put the suppressions
 * back, in the manner of Moses' nonbreaking-prefix files: an entry is the word before the final period,
 * compared case-insensitively. A sentence that really ends on one of them is merged with the next one;
 * that is the cheaper mistake, since the model translates two sentences in one input well, while a
 * sentence cut after "Dr." is translated as two broken halves.
 */

/** Abbreviations that never end a sentence here. */
export interface AbbreviationRules {
  /** Words (without the final period) after which a sentence never breaks. */
  readonly always: ReadonlySet<string>;
  /** Words after which a sentence does not break when the next one starts with a digit ("No. 5"). */
  readonly beforeNumber: ReadonlySet<string>;
  /**
   * Abbreviations that often end a sentence too ("etc.", "a.m."): left to ICU, which breaks after them
   * only when a capital letter follows. Checked first, so they override the initial and dotted rules.
   */
  readonly mayEnd: ReadonlySet<string>;
  /** Words that, after a number and a period, show the number was an ordinal ("am 3. Oktober"). */
  readonly afterOrdinal: ReadonlySet<string>;
}

// Titles and Latin abbreviations found in text of any language, including English names quoted in
// CJK, Korean or Arabic text.
const COMMON = ['mr', 'mrs', 'ms', 'dr', 'prof', 'st', 'vs', 'approx', 'jr', 'sr', 'inc', 'ltd', 'co', 'corp'];
const COMMON_BEFORE_NUMBER = ['no', 'nos', 'nr', 'p', 'pp', 'vol', 'fig', 'art', 'ch', 'ed'];

const ALWAYS: Record<string, readonly string[]> = {
  en: ['mt', 'gen', 'col', 'capt', 'lt', 'sgt', 'rev', 'hon', 'gov', 'sen', 'rep', 'pres', 'dept', 'est', 'cf'],
  de: [
    ...[
      'z',
      'd',
      'h',
      'u',
      'a',
      's',
      'v',
      'o',
      'ä',
      'm',
      'i',
      'bzw',
      'vgl',
      'ca',
      'evtl',
      'ggf',
      'inkl',
      'zzgl',
      'bspw',
    ],
    ...['sog', 'str', 'hr', 'fr', 'abs', 'jh', 'jhd', 'mio', 'mrd', 'geb', 'gest', 'dt', 'engl', 'franz'],
  ],
  fr: ['mm', 'mme', 'mmes', 'mlle', 'mlles', 'pr', 'ste', 'cf', 'env', 'ex', 'av', 'apr', 'bd', 'cie'],
  es: ['sra', 'sres', 'srta', 'dra', 'ud', 'uds', 'vd', 'vds', 'aprox', 'av', 'avda', 'lic', 'ing', 'ej', 'cía'],
  it: ['sig', 'sigg', 'sig.ra', 'sig.na', 'dott', 'dott.ssa', 'avv', 'ing', 'geom', 'es', 'cfr', 'ca'],
  pt: ['sra', 'srta', 'dra', 'profa', 'av', 'ex', 'ltda', 'exa', 'sras', 'srs', 'aprox', 'cia'],
  ru: ['т', 'е', 'к', 'н', 'см', 'ул', 'пр', 'проф', 'акад', 'им', 'тыс', 'млн', 'млрд', 'гг'],
  id: ['hj', 'bpk', 'sdr', 'sdri', 'yth', 'jl', 'tn', 'ny', 'nn', 'ir', 'drs'],
  vi: ['ts', 'pgs', 'gs', 'ths', 'bs', 'ks', 'tp', 'tt', 'q', 'p'],
  hi: ['डॉ', 'प्रो', 'ई', 'सं', 'ई.पू'],
  ar: ['د', 'أ', 'أ.د', 'م.د'],
};

const COMMON_MAY_END = ['etc', 'a.m', 'p.m'];
const MAY_END: Record<string, readonly string[]> = {
  de: ['usw', 'etc'],
  fr: ['etc'],
  es: ['etc'],
  it: ['ecc'],
  pt: ['etc'],
  ru: ['д', 'п', 'др'],
  id: ['dll', 'dsb', 'dst'],
  vi: ['v.v'],
};

const BEFORE_NUMBER: Record<string, readonly string[]> = {
  en: ['jan', 'feb', 'mar', 'apr', 'jun', 'jul', 'aug', 'sep', 'sept', 'oct', 'nov', 'dec', 'ca'],
  de: ['bd', 'tel'],
  fr: ['n', 'vol', 'chap', 'tél'],
  es: ['núm', 'pág', 'págs', 'tel', 'n'],
  it: ['n', 'pag', 'pagg', 'cap', 'tel'],
  pt: ['n', 'pág', 'págs', 'tel', 'nº'],
  ru: ['стр', 'с', 'кв', 'рис', 'гл'],
  id: ['hal', 'tel'],
  vi: ['tr', 'số'],
  hi: ['पृ'],
  ar: ['ص'],
};

// German writes ordinals as a number and a period ("am 3. Oktober", "im 19. Jahrhundert"); the
// capitalised noun after it makes ICU break there.
const AFTER_ORDINAL: Record<string, readonly string[]> = {
  de: [
    ...['januar', 'jänner', 'februar', 'märz', 'april', 'mai', 'juni', 'juli', 'august', 'september'],
    ...['oktober', 'november', 'dezember', 'jahrhundert', 'jahrtausend', 'klasse', 'stock', 'platz', 'mal'],
    ...['liga', 'bundesliga', 'auflage', 'geburtstag', 'jahrestag', 'etage', 'runde', 'spieltag', 'kapitel'],
  ],
};

// `lang` may be any string ("constructor" included): only a table's own entries count.
const own = (table: Record<string, readonly string[]>, lang: string): readonly string[] =>
  Object.hasOwn(table, lang) ? table[lang]! : [];

// Bounded for the same reason as segment.ts's segmenters: `lang` may come from a request.
const cache = new Map<string, AbbreviationRules>();
const MAX_CACHED_RULES = 64;

/**
 * The abbreviation rules for `lang` (an M2M100 code such as "de"): the common list plus the language's
 * own. Unknown languages get the common list.
 */
export function abbreviationRules(lang: string): AbbreviationRules {
  let rules = cache.get(lang);
  if (rules === undefined) {
    rules = Object.freeze({
      always: new Set([...COMMON, ...own(ALWAYS, lang)]),
      mayEnd: new Set([...COMMON_MAY_END, ...own(MAY_END, lang)]),
      beforeNumber: new Set([...COMMON_BEFORE_NUMBER, ...own(BEFORE_NUMBER, lang)]),
      afterOrdinal: new Set(own(AFTER_ORDINAL, lang)),
    });
    if (cache.size < MAX_CACHED_RULES) cache.set(lang, rules);
  }
  return rules;
}
