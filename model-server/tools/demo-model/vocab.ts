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
import { Mulberry32 } from './prng.js';

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

/**
 * A separate target vocabulary (a Marian export's target_vocab.json) as the source ids its tokens are, in target id
 * order: Marian's leading specials in place (`</s>`, `<unk>`), the source's first `size − 3` pieces shuffled from
 * `seed`, then `<pad>` last. Every target token is a source piece, at another id.
 */
export function targetSourceIds(vocabSize: number, size: number, seed: number): number[] {
  const lead = FAMILIES.marian.leadingSpecials.length;
  if (size > vocabSize) throw new Error(`a target vocabulary of ${size} is larger than the source's ${vocabSize}`);
  const pieces = Array.from({ length: size - lead - 1 }, (_, i) => lead + i);
  const rng = new Mulberry32(seed);
  for (let i = pieces.length - 1; i > 0; i--) {
    const j = Math.floor(rng.next() * (i + 1));
    [pieces[i], pieces[j]] = [pieces[j]!, pieces[i]!];
  }
  return [...Array.from({ length: lead }, (_, i) => i), ...pieces, vocabSize - 1];
}

/**
 * The tokenizer files HF's MarianTokenizer saves for separate vocabularies, beside tokenizer.json (the source's,
 * `source`): `vocab.json` and `target_vocab.json` (token → id), `source.spm` and `target.spm` (their pieces' scores).
 */
export function separateVocabFiles(source: object, targetIds: readonly number[]): Record<string, Uint8Array> {
  const vocab = (source as { model: { vocab: [string, number][] } }).model.vocab;
  const target = targetIds.map((id) => vocab[id]!);
  const ids = (entries: [string, number][]) => JSON.stringify(Object.fromEntries(entries.map(([t], i) => [t, i])));
  return {
    'vocab.json': new TextEncoder().encode(`${ids(vocab)}\n`),
    'target_vocab.json': new TextEncoder().encode(`${ids(target)}\n`),
    'source.spm': sentencePieceModel(vocab),
    'target.spm': sentencePieceModel(target),
  };
}

/** SentencePiece's own specials and their types (2 unknown, 3 control), ahead of the pieces in a .spm: its ids are
 * not vocab.json's, as in opus-mt's files. */
const SPM_SPECIALS: readonly [string, number][] = [
  ['<unk>', 2],
  ['<s>', 3],
  ['</s>', 3],
];

/**
 * A SentencePiece Unigram model file (ModelProto): field 1 each piece (its text, float score, type), field 2 the
 * trainer spec (model_type 1: Unigram). The vocabulary's own specials are left to SentencePiece's.
 */
function sentencePieceModel(vocab: readonly [string, number][]): Uint8Array {
  const out: number[] = [];
  const varint = (value: number) => {
    for (; value >= 0x80; value = Math.floor(value / 128)) out.push((value % 128) | 0x80);
    out.push(value);
  };
  const field = (tag: number, body: readonly number[]) => {
    varint(tag);
    varint(body.length);
    out.push(...body);
  };
  const piece = (text: string, score: number, type: number) => {
    const start = out.length;
    const bytes = new TextEncoder().encode(text);
    field(0x0a, [...bytes]);
    out.push(0x15, ...new Uint8Array(Float32Array.of(score).buffer), 0x18, type);
    return out.splice(start);
  };
  const specials = new Set(['</s>', '<unk>', '<pad>']);
  const entries = [
    ...SPM_SPECIALS.map(([text, type]) => piece(text, 0, type)),
    ...vocab.filter(([text]) => !specials.has(text)).map(([text, score]) => piece(text, score, 1)),
  ];
  for (const entry of entries) field(0x0a, entry);
  field(0x12, [0x18, 1]);
  return Uint8Array.from(out);
}
