/**
 * @module tools/demo-model/families — what sets the four translation families apart in their exports, as the
 * generator writes them: the architecture switches the graphs read, the special-token layout and language tokens of
 * the tokenizer, and the keys of config.json, generation_config.json and tokenizer_config.json (each family's
 * published files, minus what no loader reads).
 */
import { NLLB_CODES } from '../../../common/language-codes.js';

export type Family = 'm2m100' | 'nllb' | 'mbart50' | 'marian';

/** mBART-50's code for each demo language (its list has one region per language). */
const MBART_CODES: Readonly<Record<string, string>> = {
  ko: 'ko_KR',
  en: 'en_XX',
  zh: 'zh_CN',
  es: 'es_XX',
  fr: 'fr_XX',
  ru: 'ru_RU',
  id: 'id_ID',
  ja: 'ja_XX',
  vi: 'vi_VN',
  de: 'de_DE',
  it: 'it_IT',
  hi: 'hi_IN',
  ar: 'ar_AR',
  pt: 'pt_XX',
};

export interface FamilyTraits {
  /** The family's name for people (the model card's). */
  label: string;
  modelType: string;
  architecture: string;
  tokenizerClass: string;
  /** A language's token (null: the family has none; a Marian model is one pair). */
  languageToken: ((iso: string) => string) | null;
  /** Special tokens in id order from 0 (Marian: `</s>`, `<unk>`; the others fairseq's four). */
  leadingSpecials: readonly string[];
  /** Specials after the language tokens, at the very end of the vocabulary (`<mask>`, Marian's `<pad>`). */
  trailingSpecials: readonly string[];
  /** Positions: fairseq's sinusoids from offset 2, Marian's from 0, or mBART's learned table (offset 2). */
  positions: 'sinusoidal-offset' | 'sinusoidal' | 'learned';
  /** Layer norm before each block (M2M100, NLLB, mBART) or after the residual add (Marian). */
  normBefore: boolean;
  /** mBART's `layernorm_embedding` after the embeddings. */
  embeddingNorm: boolean;
  /** A final layer norm closing encoder and decoder (not Marian). */
  finalNorm: boolean;
  activation: 'relu' | 'gelu' | 'swish';
  /** Marian's `final_logits_bias` buffer, added to the logits. */
  finalLogitsBias: boolean;
}

const M2M100: FamilyTraits = {
  label: 'M2M100',
  modelType: 'm2m_100',
  architecture: 'M2M100ForConditionalGeneration',
  tokenizerClass: 'M2M100Tokenizer',
  languageToken: (iso) => `__${iso}__`,
  leadingSpecials: ['<s>', '<pad>', '</s>', '<unk>'],
  trailingSpecials: [],
  positions: 'sinusoidal-offset',
  normBefore: true,
  embeddingNorm: false,
  finalNorm: true,
  activation: 'relu',
  finalLogitsBias: false,
};

export const FAMILIES: Readonly<Record<Family, FamilyTraits>> = {
  m2m100: M2M100,
  // NLLB-200 is M2M100's network (its config says model_type m2m_100) with its own tokenizer.
  nllb: {
    ...M2M100,
    label: 'NLLB-200',
    tokenizerClass: 'NllbTokenizer',
    languageToken: (iso) => NLLB_CODES[iso]!,
    trailingSpecials: ['<mask>'],
  },
  mbart50: {
    label: 'mBART-50',
    modelType: 'mbart',
    architecture: 'MBartForConditionalGeneration',
    tokenizerClass: 'MBart50Tokenizer',
    languageToken: (iso) => MBART_CODES[iso]!,
    leadingSpecials: ['<s>', '<pad>', '</s>', '<unk>'],
    trailingSpecials: ['<mask>'],
    positions: 'learned',
    normBefore: true,
    embeddingNorm: true,
    finalNorm: true,
    activation: 'gelu',
    finalLogitsBias: false,
  },
  marian: {
    label: 'Marian (opus-mt)',
    modelType: 'marian',
    architecture: 'MarianMTModel',
    tokenizerClass: 'MarianTokenizer',
    languageToken: null,
    leadingSpecials: ['</s>', '<unk>'],
    trailingSpecials: ['<pad>'],
    positions: 'sinusoidal',
    normBefore: false,
    embeddingNorm: false,
    finalNorm: false,
    activation: 'swish',
    finalLogitsBias: true,
  },
};

/** Token ids of the specials every family has, given the vocabulary size. */
export function specialIds(family: Family, vocabSize: number): { eos: number; pad: number; bos: number; unk: number } {
  const traits = FAMILIES[family];
  const at = (token: string) => {
    const lead = traits.leadingSpecials.indexOf(token);
    if (lead >= 0) return lead;
    return vocabSize - traits.trailingSpecials.length + traits.trailingSpecials.indexOf(token);
  };
  // Marian has no `<s>`: its config names `</s>` as bos.
  return { eos: at('</s>'), pad: at('<pad>'), bos: family === 'marian' ? 0 : at('<s>'), unk: at('<unk>') };
}

/** The keys config.json adds per family beyond the network's sizes. */
export function familyConfigKeys(family: Family): Record<string, unknown> {
  const traits = FAMILIES[family];
  return {
    architectures: [traits.architecture],
    model_type: traits.modelType,
    activation_function: traits.activation,
    scale_embedding: true,
    normalize_before: traits.normBefore,
    ...(family === 'marian' ? { share_encoder_decoder_embeddings: true, static_position_embeddings: true } : {}),
    ...(family === 'mbart50' ? { add_final_layer_norm: true } : {}),
  };
}

/** generation_config.json's keys per family (the published files' values; max_length fitted to the preset). */
export function familyGenerationKeys(family: Family, vocabSize: number, maxLength: number): Record<string, unknown> {
  const ids = specialIds(family, vocabSize);
  const common = { eos_token_id: ids.eos, pad_token_id: ids.pad, max_length: maxLength };
  if (family === 'marian') {
    // opus-mt's: generation starts from `<pad>`, which it may never write (bad_words_ids).
    return {
      ...common,
      bos_token_id: ids.bos,
      decoder_start_token_id: ids.pad,
      bad_words_ids: [[ids.pad]],
      forced_eos_token_id: ids.eos,
      num_beams: 4,
    };
  }
  return {
    ...common,
    bos_token_id: ids.bos,
    decoder_start_token_id: ids.eos,
    num_beams: 5,
    early_stopping: true,
    length_penalty: 1.0,
    // mBART-50's published files force `</s>` at max_length; M2M100's and NLLB's do not.
    ...(family === 'mbart50' ? { forced_eos_token_id: ids.eos } : {}),
  };
}

/** tokenizer_config.json: the class transformers.js picks its tokenizer by, and the family's defaults. */
export function tokenizerConfigJson(
  family: Family,
  maxLength: number,
  languageTokens: readonly string[],
  pair: { source: string; target: string } | null,
  separateVocabs = false,
): object {
  const traits = FAMILIES[family];
  const common = {
    tokenizer_class: traits.tokenizerClass,
    model_max_length: maxLength,
    eos_token: '</s>',
    pad_token: '<pad>',
    unk_token: '<unk>',
    clean_up_tokenization_spaces: true,
  };
  if (family === 'marian') {
    return { ...common, source_lang: pair!.source, target_lang: pair!.target, separate_vocabs: separateVocabs };
  }
  const languages = { bos_token: '<s>', sep_token: '</s>', additional_special_tokens: languageTokens };
  if (family === 'm2m100') return { ...common, ...languages, src_lang: null, tgt_lang: null, language_codes: 'm2m100' };
  if (family === 'nllb') {
    return {
      ...common,
      ...languages,
      mask_token: '<mask>',
      src_lang: languageTokens[0],
      tgt_lang: null,
      legacy_behaviour: false,
    };
  }
  return { ...common, ...languages, mask_token: '<mask>', src_lang: languageTokens[0], tgt_lang: null };
}
