/**
 * @module tools/demo-model/vocab — the generated models' tokenizer: a SentencePiece-style Unigram
 * vocabulary (Metaspace `▁` word boundaries) with M2M100's special tokens and language tokens, written as
 * `tokenizer.json` + `tokenizer_config.json` the way transformers.js and @huggingface/tokenizers read them.
 *
 * Ids: 0 `<s>`, 1 `<pad>`, 2 `</s>`, 3 `<unk>` (as M2M100), then pieces, then `__xx__` for each language
 * at the very end of the vocabulary. Every printable ASCII character is a piece, so ASCII text never
 * needs `<unk>`; other scripts map to `<unk>` (the model is a stand-in, not a translator).
 */

export const SPECIAL_TOKENS = ['<s>', '<pad>', '</s>', '<unk>'] as const;
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

export const languageToken = (code: string): string => `__${code}__`;

/** `tokenizer.json` for a vocabulary of `vocabSize` ids whose last ids are the language tokens. */
export function tokenizerJson(vocabSize: number, languages: readonly string[]): object {
  const pieceCount = vocabSize - SPECIAL_TOKENS.length - languages.length;
  if (pieceCount < 200) throw new Error(`vocab_size ${vocabSize} leaves too few pieces`);
  const vocab: [string, number][] = [
    ...SPECIAL_TOKENS.map((t): [string, number] => [t, 0]),
    ...pieces(pieceCount),
    ...languages.map((code): [string, number] => [languageToken(code), 0]),
  ];
  const added = (content: string, id: number) => ({
    id,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  });
  const firstLanguageId = vocabSize - languages.length;
  const specialEntry = (token: string, id: number) => ({ id: token, ids: [id], tokens: [token] });
  const defaultSource = languageToken(languages.includes('en') ? 'en' : languages[0]!);
  return {
    version: '1.0',
    truncation: null,
    padding: null,
    added_tokens: [
      ...SPECIAL_TOKENS.map((t, i) => added(t, i)),
      ...languages.map((code, i) => added(languageToken(code), firstLanguageId + i)),
    ],
    normalizer: { type: 'NFKC' },
    pre_tokenizer: { type: 'Metaspace', replacement: SPACE, prepend_scheme: 'always', split: true },
    post_processor: {
      type: 'TemplateProcessing',
      single: [
        { SpecialToken: { id: defaultSource, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
      ],
      pair: [
        { SpecialToken: { id: defaultSource, type_id: 0 } },
        { Sequence: { id: 'A', type_id: 0 } },
        { Sequence: { id: 'B', type_id: 0 } },
        { SpecialToken: { id: '</s>', type_id: 0 } },
      ],
      special_tokens: {
        '</s>': specialEntry('</s>', 2),
        ...Object.fromEntries(
          languages.map((code, i) => [languageToken(code), specialEntry(languageToken(code), firstLanguageId + i)]),
        ),
      },
    },
    decoder: { type: 'Metaspace', replacement: SPACE, prepend_scheme: 'always', split: true },
    model: { type: 'Unigram', unk_id: 3, vocab, byte_fallback: false },
  };
}

/** `tokenizer_config.json`: the M2M100 tokenizer class (transformers.js forces the target token only with it). */
export function tokenizerConfigJson(maxLength: number, languages: readonly string[]): object {
  return {
    tokenizer_class: 'M2M100Tokenizer',
    model_max_length: maxLength,
    bos_token: '<s>',
    eos_token: '</s>',
    sep_token: '</s>',
    pad_token: '<pad>',
    unk_token: '<unk>',
    src_lang: null,
    tgt_lang: null,
    language_codes: 'm2m100',
    additional_special_tokens: languages.map(languageToken),
    clean_up_tokenization_spaces: true,
  };
}
