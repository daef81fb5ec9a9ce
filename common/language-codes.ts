/**
 * @module common/language-codes — how the translation families spell a language (the tokens each tokenizer class
 * writes, read by the engine and by the registration's check of an export), and the ISO 639-1 code each answers to: M2M100 `__en__`, NLLB-200 `eng_Latn` (FLORES-200), mBART-50 `en_XX`. The native API
 * takes ISO 639-1 codes for every model and NLLB's codes as they are; the engine turns either into the model's token.
 */

/**
 * `src_lang` may also ask the model server to detect each text's language. Here, not beside the request's schema
 * (common/translation-contract.ts), so that the text threads, which read it, do not load zod to start.
 */
export const AUTO_LANGUAGE = 'auto';

/**
 * ISO 639-1 → the FLORES-200 code NLLB-200 writes for it. Where NLLB has several scripts or varieties of one
 * language, the one its model card and most clients mean by the bare code (`zh` → Simplified, `ar` → Modern
 * Standard Arabic, `fa` → Western Persian, `ms` → Standard Malay).
 */
export const NLLB_CODES: Readonly<Record<string, string>> = Object.freeze({
  af: 'afr_Latn',
  am: 'amh_Ethi',
  ar: 'arb_Arab',
  az: 'azj_Latn',
  be: 'bel_Cyrl',
  bg: 'bul_Cyrl',
  bn: 'ben_Beng',
  bs: 'bos_Latn',
  ca: 'cat_Latn',
  cs: 'ces_Latn',
  cy: 'cym_Latn',
  da: 'dan_Latn',
  de: 'deu_Latn',
  el: 'ell_Grek',
  en: 'eng_Latn',
  eo: 'epo_Latn',
  es: 'spa_Latn',
  et: 'est_Latn',
  eu: 'eus_Latn',
  fa: 'pes_Arab',
  fi: 'fin_Latn',
  fr: 'fra_Latn',
  ga: 'gle_Latn',
  gl: 'glg_Latn',
  gu: 'guj_Gujr',
  ha: 'hau_Latn',
  he: 'heb_Hebr',
  hi: 'hin_Deva',
  hr: 'hrv_Latn',
  hu: 'hun_Latn',
  hy: 'hye_Armn',
  id: 'ind_Latn',
  ig: 'ibo_Latn',
  is: 'isl_Latn',
  it: 'ita_Latn',
  ja: 'jpn_Jpan',
  jv: 'jav_Latn',
  ka: 'kat_Geor',
  kk: 'kaz_Cyrl',
  km: 'khm_Khmr',
  kn: 'kan_Knda',
  ko: 'kor_Hang',
  ky: 'kir_Cyrl',
  lo: 'lao_Laoo',
  lt: 'lit_Latn',
  lv: 'lvs_Latn',
  mk: 'mkd_Cyrl',
  ml: 'mal_Mlym',
  mn: 'khk_Cyrl',
  mr: 'mar_Deva',
  ms: 'zsm_Latn',
  my: 'mya_Mymr',
  ne: 'npi_Deva',
  nl: 'nld_Latn',
  no: 'nob_Latn',
  pa: 'pan_Guru',
  pl: 'pol_Latn',
  ps: 'pbt_Arab',
  pt: 'por_Latn',
  ro: 'ron_Latn',
  ru: 'rus_Cyrl',
  si: 'sin_Sinh',
  sk: 'slk_Latn',
  sl: 'slv_Latn',
  so: 'som_Latn',
  sq: 'als_Latn',
  sr: 'srp_Cyrl',
  sv: 'swe_Latn',
  sw: 'swh_Latn',
  ta: 'tam_Taml',
  te: 'tel_Telu',
  tg: 'tgk_Cyrl',
  th: 'tha_Thai',
  tl: 'tgl_Latn',
  tr: 'tur_Latn',
  uk: 'ukr_Cyrl',
  ur: 'urd_Arab',
  uz: 'uzn_Latn',
  vi: 'vie_Latn',
  xh: 'xho_Latn',
  yo: 'yor_Latn',
  zh: 'zho_Hans',
  zu: 'zul_Latn',
});

/**
 * Each tokenizer class's language tokens (tokenizer_config.json's `tokenizer_class`, `Fast` dropped; group 1 is the
 * code); null for a class without them (Marian: a model is one pair). The classes transformers.js translates with.
 */
export const LANGUAGE_TOKENS: Readonly<Record<string, RegExp | null>> = Object.freeze({
  M2M100Tokenizer: /^__([a-z]{2,3})__$/,
  NllbTokenizer: /^([a-z]{3}_[A-Z][a-z]{3})$/,
  MBart50Tokenizer: /^([a-z]{2}_[A-Z]{2})$/,
  MBartTokenizer: /^([a-z]{2}_[A-Z]{2})$/,
  MarianTokenizer: null,
});

/** The family each tokenizer class belongs to, as the status page and `GET /models/{name}` name it. */
export const FAMILY_NAMES: Readonly<Record<string, string>> = Object.freeze({
  M2M100Tokenizer: 'M2M100',
  NllbTokenizer: 'NLLB-200',
  MBart50Tokenizer: 'mBART-50',
  MBartTokenizer: 'mBART',
  MarianTokenizer: 'Marian',
});

/** A language token a tokenizer class writes, as an example for messages. */
export const LANGUAGE_TOKEN_EXAMPLE: Readonly<Record<string, string>> = Object.freeze({
  M2M100Tokenizer: '__en__',
  NllbTokenizer: 'eng_Latn',
  MBart50Tokenizer: 'en_XX',
  MBartTokenizer: 'en_XX',
});

/**
 * A multilingual Marian (opus-mt-en-roa) model's target token, `>>fra<<`: the target language written before the source
 * text (group 1 the code: ISO 639-3 mostly, some ISO 639-1 or with a variety, `>>pt_br<<`).
 */
export const MARIAN_TARGET_TOKEN = /^>>(\w+)<<$/;

/**
 * A multilingual Marian model's target tokens, from its tokenizer.json (the vocabulary, where the published exports
 * keep them, and the added tokens): code → token, in vocabulary order.
 */
export function marianTargetTokens(tokenizerJson: Record<string, unknown>): Map<string, string> {
  const vocab = (tokenizerJson.model as Record<string, unknown> | undefined)?.vocab;
  // Unigram's vocabulary is a list of [piece, score]; BPE's and WordLevel's an object of token → id.
  const pieces = Array.isArray(vocab) ? vocab.map((v) => String((v as unknown[])[0])) : Object.keys(vocab ?? {});
  const added = Array.isArray(tokenizerJson.added_tokens) ? tokenizerJson.added_tokens : [];
  const codes = new Map<string, string>();
  for (const token of [...pieces, ...added.map((t) => String((t as Record<string, unknown>).content))]) {
    const code = MARIAN_TARGET_TOKEN.exec(token)?.[1];
    if (code !== undefined) codes.set(code, token);
  }
  return codes;
}

/** The ISO 639-1 code a Marian target code answers to (`fra` → `fr`, through NLLB's codes); undefined when none. */
export function marianAlias(code: string): string | undefined {
  return /^[a-z]{3}$/.test(code) ? ISO_BY_639_3.get(code) : undefined;
}

/** An NLLB-200 (FLORES-200) code: ISO 639-3, `_`, ISO 15924 script. */
export const NLLB_CODE = /^[a-z]{3}_[A-Z][a-z]{3}$/;
/** An mBART-50 code: ISO 639-1, `_`, a region (`XX` where the model names none). */
export const MBART_CODE = /^[a-z]{2}_[A-Z]{2}$/;

/**
 * The ISO 639-1 code a family's language code answers to: NLLB's through `NLLB_CODES`, mBART's by its language
 * part (mBART-50 has one region per language); undefined when there is none (NLLB languages without an ISO 639-1
 * code are reached by their own code).
 */
export function isoAlias(code: string): string | undefined {
  if (MBART_CODE.test(code)) return code.slice(0, 2);
  if (NLLB_CODE.test(code)) return NLLB_BY_CODE.get(code);
  return undefined;
}

const NLLB_BY_CODE: ReadonlyMap<string, string> = new Map(Object.entries(NLLB_CODES).map(([iso, code]) => [code, iso]));

const ISO_BY_639_3: ReadonlyMap<string, string> = new Map(
  Object.entries(NLLB_CODES).map(([iso, code]) => [code.slice(0, 3), iso]),
);
