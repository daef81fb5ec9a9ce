/**
 * @module tools/demo-model/vocab — the generated models' tokenizer: a SentencePiece-style Unigram
 * vocabulary (Metaspace `▁` word boundaries) with a family's special tokens and language tokens, written as
 * `tokenizer.json` the way transformers.js and @huggingface/tokenizers read it.
 *
 * Ids: the family's leading specials (M2M100, NLLB, mBART: 0 `<s>`, 1 `<pad>`, 2 `</s>`, 3 `<unk>`; Marian: 0 `</s>`,
 * 1 `<unk>`), then pieces, then the language tokens (`__xx__`, `xxx_Xxxx`, `xx_XX`), then the trailing specials
 * (`<mask>`; Marian's `<pad>`) at the very end. Every printable ASCII character is a piece, so ASCII text never
 * needs `<unk>`; other scripts map to `<unk>` (the model is a stand-in, not a translator).
 */
import { FAMILIES, type Family } from './families.js';

const SPACE = '\u2581';

const COMMON_WORDS = (
  'the of and to in is that it for was on are as with his they at be this from have or by one had not but ' +
  'what all were when we there can an your which their said if do will each about how up out them then she ' +
  'many some so these would other into has more her two like him see time could no make than first been its ' +
  'who now people my made over did down only way find use may water long little very after words called just ' +
  'where most know hello world good morning thank you please translate language model server batch token'
).split(' ');

/** Pieces with their Unigram log-probabilities: longer pieces score better than spelling them out. */
function pieces(count: number): [string, number][] {
  const out: [string, number][] = [];
  const seen = new Set<string>();
  const add = (piece: string, score: number) => {
    if (out.length < count && !seen.has(piece)) {
      seen.add(piece);
      out.push([piece, score]);
    }
  };
  add(SPACE, -6);
  for (let c = 33; c < 127; c++) add(String.fromCharCode(c), -10);
  for (let c = 33; c < 127; c++) add(SPACE + String.fromCharCode(c), -8);
  for (const word of COMMON_WORDS) add(SPACE + word, -4 - word.length * 0.1);
  const letters = 'etaoinshrdlcumwfgypbvkjxqz';
  // Then letter n-grams, with and without a word boundary, until the vocabulary is full.
  for (let length = 2; out.length < count; length++) {
    const total = letters.length ** length;
    for (let n = 0; n < total && out.length < count; n++) {
      let gram = '';
      for (let k = n, j = 0; j < length; j++, k = Math.floor(k / letters.length)) gram += letters[k % letters.length];
      add(SPACE + gram, -5 - length * 0.5);
      add(gram, -6 - length * 0.5);
    }
  }
  if (out.length < count) throw new Error(`vocabulary of ${count} pieces could not be filled`);
  return out;
}

/** The template's token list: `</s>` closes the text; the source language (when the family has one) opens it, or with
 * NLLB's legacy behaviour follows `</s>`. */
function template(source: string | null, legacy: boolean, withB: boolean): object[] {
  const special = (id: string) => ({ SpecialToken: { id, type_id: 0 } });
  const text = [{ Sequence: { id: 'A', type_id: 0 } }, ...(withB ? [{ Sequence: { id: 'B', type_id: 0 } }] : [])];
  if (source === null) return [...text, special('</s>')];
  return legacy ? [...text, special('</s>'), special(source)] : [special(source), ...text, special('</s>')];
}

/**
 * `tokenizer.json` for a vocabulary of `vocabSize` ids: the family's leading specials, pieces, the language tokens
 * (`languages` in ISO 639-1, spelt the family's way), then its trailing specials at the very end.
 * `legacy`: NLLB's legacy placement of the source language (after `</s>`). `marianTargets`: a multilingual Marian
 * model's target codes, written as `>>fra<<` entries.
 */
export function tokenizerJson(
  vocabSize: number,
  family: Family,
  languages: readonly string[],
  legacy = false,
  marianTargets: readonly string[] = [],
): object {
  const traits = FAMILIES[family];
  const tokens = traits.languageToken === null ? [] : languages.map(traits.languageToken);
  const { leadingSpecials: lead, trailingSpecials: trail } = traits;
  // A multilingual Marian model's `>>fra<<`, after the specials: in the vocabulary (its vocab.json's), and added tokens
  // (not special), so a tokenizer splits `>>fra<< text` before the Unigram model as HF's MarianTokenizer strips the
  // code before SentencePiece (transformers.js' own override of that no longer runs).
  const targets = marianTargets.map((code) => `>>${code}<<`);
  const pieceCount = vocabSize - lead.length - targets.length - tokens.length - trail.length;
  if (pieceCount < 200) throw new Error(`vocab_size ${vocabSize} leaves too few pieces`);
  const vocab: [string, number][] = [
    ...lead.map((t): [string, number] => [t, 0]),
    ...targets.map((t): [string, number] => [t, 0]),
    ...pieces(pieceCount),
    ...[...tokens, ...trail].map((t): [string, number] => [t, 0]),
  ];
  const added = (content: string, id: number, special = true) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special,
  });
  const firstLanguageId = lead.length + targets.length + pieceCount;
  const specials = [
    ...lead.map((t, i): [string, number] => [t, i]),
    ...[...tokens, ...trail].map((t, i): [string, number] => [t, firstLanguageId + i]),
  ];
  const specialEntry = (token: string, id: number) => ({ id: token, ids: [id], tokens: [token] });
  const source = tokens.length === 0 ? null : (tokens[languages.indexOf('en')] ?? tokens[0]!);
  const eos = lead.indexOf('</s>');
  const unk = lead.indexOf('<unk>');
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      ...specials.map(([t, id]) => added(t, id)),
      ...targets.map((t, i) => added(t, lead.length + i, false)),
    ].sort((a, b) => a.id - b.id),
    normalizer: { type: 'NFKC' },
    pre_tokenizer: { type: 'Metaspace', replacement: SPACE, prepend_scheme: 'always', split: true },
    post_processor: {
      type: 'TemplateProcessing',
      single: template(source, legacy, false),
      pair: template(source, legacy, true),
      special_tokens: {
        '</s>': specialEntry('</s>', eos),
        ...Object.fromEntries(tokens.map((t, i) => [t, specialEntry(t, firstLanguageId + i)])),
      },
    },
    decoder: { type: 'Metaspace', replacement: SPACE, prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: unk, vocab, byte_fallback: false },
  };
}
