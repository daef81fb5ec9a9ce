/**
 * @module engine/tokens/tokenizer — translation tokenization on `@huggingface/tokenizers` (pure JS), for each family as
 * its export's files say (never its folder name): tokenizer_config.json's `tokenizer_class` names how languages are
 * spelt (M2M100 `__en__`, NLLB `eng_Latn`, mBART-50 `en_XX`; Marian none, its one pair in `source_lang` and
 * `target_lang`), tokenizer.json's post-processor template where the source language and `</s>` go (as
 * transformers.js, which swaps the source language into the template's first language token: NLLB's legacy
 * template puts it after `</s>`). Encoding truncates the text to fit; decoding drops specials. A Marian export with
 * separate vocabularies (`separate_vocabs`) writes its translations in its target's (target-vocabulary.ts):
 * translations are decoded, glossary terms encoded and target spans walked there.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ServeError } from '../../../common/errors.js';
import {
  FAMILY_NAMES,
  isoAlias,
  LANGUAGE_TOKEN_EXAMPLE,
  LANGUAGE_TOKENS,
  marianAlias,
  marianTargetTokens,
} from '../../../common/language-codes.js';
import { NO_FORCED_TOKEN } from '../decoding.js';
import { targetTokenizerJson } from './target-vocabulary.js';

const SENTENCEPIECE_SPACE = '\u2581';
/** How far past the previous piece `spans` looks for the next (the spaces and characters a piece may skip). */
const SPAN_LOOKAHEAD = 8;
/** Searches past the lookahead (after an `<unk>`) that may find nothing before `spans` stops making them. */
const SPAN_RESYNCS = 16;

/** Which request field a language code came from, for error messages. */
export type LanguageField = 'src_lang' | 'tgt_lang';

export interface EncodedSource {
  /** The template's tokens with the text's (`[__src__] tokens </s>` for M2M100), at most `maxInputTokens` long. */
  ids: number[];
  /** Whether the text had to be cut to fit. */
  truncated: boolean;
}

/** One place of the post-processor template: the text, the source language, or a fixed special token. */
type TemplateItem = 'text' | 'source' | number;

/** What the tokenizer files say about languages. */
interface Languages {
  /** Codes a source may be given in (the model's own and their ISO 639-1 aliases) → token id (-1: Marian's). */
  sources: ReadonlyMap<string, number>;
  targets: ReadonlyMap<string, number>;
  /** A multilingual Marian model's: the target's token (`>>fra<<`) opens the source instead of being forced. */
  targetInSource?: boolean;
}

type Json = Record<string, unknown>;

/** One side's vocabulary (a model with one vocabulary has the same on both sides). */
interface Side {
  tokenizer: Tokenizer;
  /** Ids a glossary term may not write: special tokens (languages, `</s>`, padding) and `<unk>`. */
  unwritable: ReadonlySet<number>;
  unknownId: number;
}

function sideOf(tokenizer: Tokenizer, eosId: number): Side {
  const specials = [...tokenizer.get_added_tokens_decoder()].filter(([, token]) => token.special).map(([id]) => id);
  const unknownId = tokenizer.token_to_id('<unk>') ?? -1;
  return { tokenizer, unwritable: new Set([...specials, eosId, unknownId]), unknownId };
}

export class TranslationTokenizer {
  readonly #source: Side;
  readonly #target: Side;
  readonly #languages: Languages;
  readonly #template: readonly TemplateItem[];
  readonly #maxInputTokens: number;
  /** The model family its tokenizer class belongs to (`M2M100`, `NLLB-200`, `mBART-50`, `Marian`). */
  readonly family: string;

  private constructor(
    family: string,
    sides: { source: Side; target: Side },
    languages: Languages,
    template: TemplateItem[],
    maxInputTokens: number,
  ) {
    this.family = family;
    this.#source = sides.source;
    this.#target = sides.target;
    this.#languages = languages;
    this.#template = template;
    this.#maxInputTokens = maxInputTokens;
  }

  /**
   * Load `tokenizer.json` and `tokenizer_config.json` from a model folder (with `separate_vocabs`, also
   * `target_vocab.json` and `target.spm`).
   * @param eosTokenId the decoder's `</s>` (config.json's)
   * @param maxInputTokens longest encoding, special tokens included (≥ 3)
   * @param vocabSize the decoder's vocabulary, which a separate target vocabulary must fill exactly (when given)
   * @throws ServeError WORKER_START_FAILED naming the file that is missing, unreadable or disagrees
   */
  static load(
    modelDir: string,
    options: { eosTokenId: number; maxInputTokens: number; vocabSize?: number },
  ): TranslationTokenizer {
    const file = (name: string) => path.join(modelDir, name);
    const read = (name: string): Json => {
      try {
        return JSON.parse(readFileSync(file(name), 'utf8')) as Json;
      } catch (err) {
        throw new ServeError('WORKER_START_FAILED', `Cannot read ${file(name)}: ${(err as Error).message}`, {
          cause: err,
        });
      }
    };
    const json = read('tokenizer.json');
    const config = read('tokenizer_config.json');
    const className = String(config.tokenizer_class ?? '').replace(/Fast$/, '');
    const pattern = LANGUAGE_TOKENS[className];
    if (pattern === undefined) {
      throw new ServeError(
        'WORKER_START_FAILED',
        `${file('tokenizer_config.json')}: "tokenizer_class" ${JSON.stringify(config.tokenizer_class ?? null)} is not one of ${Object.keys(LANGUAGE_TOKENS).join(', ')}.`,
      );
    }
    const tokenizer = new Tokenizer(json, config);
    const languages =
      pattern === null
        ? pairOf(file('tokenizer_config.json'), config, json, tokenizer)
        : languageTokens(tokenizer, pattern);
    if (languages.sources.size === 0) {
      throw new ServeError(
        'WORKER_START_FAILED',
        `${file('tokenizer.json')} has no language tokens for its ${className} (such as ${LANGUAGE_TOKEN_EXAMPLE[className]}).`,
      );
    }
    const template = templateOf(json, tokenizer, pattern, file('tokenizer.json'));
    if (options.maxInputTokens < template.length + 1) throw new RangeError('maxInputTokens leaves no room for text');
    const separate = pattern === null && config.separate_vocabs === true;
    // config.json's `</s>` is the decoder's: a separate source vocabulary has its own among its special tokens.
    const source = sideOf(tokenizer, separate ? -1 : options.eosTokenId);
    let target = source;
    if (separate) {
      const targetJson = targetTokenizerJson(json, file('target_vocab.json'), file('target.spm'));
      const size = (targetJson.model as { vocab: unknown[] }).vocab.length;
      if (options.vocabSize !== undefined && size !== options.vocabSize) {
        throw new ServeError(
          'WORKER_START_FAILED',
          `${file('target_vocab.json')} has ${size} tokens, not the decoder's ${options.vocabSize} (config.json's decoder_vocab_size).`,
        );
      }
      target = sideOf(new Tokenizer(targetJson, config), options.eosTokenId);
    }
    return new TranslationTokenizer(
      FAMILY_NAMES[className]!,
      { source, target },
      languages,
      template,
      options.maxInputTokens,
    );
  }

  /** Source language codes this tokenizer reads (the model's own and their ISO 639-1 aliases), sorted. */
  languages(): readonly string[] {
    return [...this.#languages.sources.keys()].sort();
  }

  /** Target language codes, sorted. */
  targetLanguages(): readonly string[] {
    return [...this.#languages.targets.keys()].sort();
  }

  hasLanguage(code: string): boolean {
    return this.#languages.sources.has(code);
  }

  /**
   * The first token forced for target `code` (its language token), or `NO_FORCED_TOKEN` for a model without them.
   * @throws ServeError UNKNOWN_LANGUAGE naming the field, the code and the supported codes
   */
  forcedTokenId(code: string): number {
    const id = this.#languageId(this.#languages.targets, code, 'tgt_lang');
    return this.#languages.targetInSource ? NO_FORCED_TOKEN : id;
  }

  #languageId(map: ReadonlyMap<string, number>, code: string, field: LanguageField): number {
    const id = map.get(code);
    if (id === undefined) {
      throw new ServeError(
        'UNKNOWN_LANGUAGE',
        `Unknown ${field} "${code}". Supported languages: ${[...map.keys()].sort().join(', ')}.`,
      );
    }
    return id;
  }

  /**
   * The template around the text's tokens, the text truncated to fit (as the seed's `truncation=True`); for a
   * multilingual Marian model the target's token first, as transformers.js encodes `>>fra<< text`.
   */
  encode(text: string, srcLang: string, tgtLang?: string): EncodedSource {
    const languageId = this.#languageId(this.#languages.sources, srcLang, 'src_lang');
    const prefix: number[] = [];
    if (this.#languages.targetInSource) {
      if (tgtLang === undefined) throw new RangeError('this model writes several targets: encode needs tgtLang');
      prefix.push(this.#languageId(this.#languages.targets, tgtLang, 'tgt_lang'));
    }
    const tokens = this.#source.tokenizer.encode(text, { add_special_tokens: false }).ids;
    const room = this.#maxInputTokens - (this.#template.length - 1) - prefix.length;
    const truncated = tokens.length > room;
    const kept = truncated ? tokens.slice(0, room) : tokens;
    const ids = this.#template.flatMap((item) => (item === 'text' ? kept : item === 'source' ? [languageId] : [item]));
    return { ids: [...prefix, ...ids], truncated };
  }

  /**
   * The ids that write `term` inside a translation (no language token, no `</s>`): a glossary term's constraint.
   * @throws ServeError BAD_REQUEST when the vocabulary cannot write it (an unknown piece, a special token)
   */
  encodeTerm(term: string): number[] {
    const ids: number[] = this.#target.tokenizer.encode(term, { add_special_tokens: false }).ids;
    if (ids.length === 0 || ids.some((id) => this.#target.unwritable.has(id))) {
      throw new ServeError(
        'BAD_REQUEST',
        `The glossary term ${JSON.stringify(term.slice(0, 60))} has characters this model cannot write.`,
      );
    }
    return ids;
  }

  /**
   * Each source id's characters in `text`, the text the ids encode: `[start, end)`, or null for a special token
   * and for a piece not found where the walk expects it (a normalised character). The tokenizer keeps no offsets,
   * so the pieces (SentencePiece's `▁` read as a space) are walked along the text, each looked for a few characters
   * ahead; after an `<unk>` (which stands for characters of unknown number) the next piece is looked for anywhere
   * ahead, at most `SPAN_RESYNCS` times in vain, so the walk stays linear in the text.
   */
  spans(text: string, ids: readonly number[]): ([number, number] | null)[] {
    return walk(this.#source, text, ids);
  }

  /** `spans` of generated ids in the text they decode to: the target's pieces (its own vocabulary's, if separate). */
  targetSpans(text: string, ids: readonly number[]): ([number, number] | null)[] {
    return walk(this.#target, text, ids);
  }

  /** Text of generated ids, special tokens (start, language, `</s>`, padding) skipped. */
  decode(ids: readonly number[]): string {
    return this.#target.tokenizer.decode(ids as number[], { skip_special_tokens: true });
  }
}

/** `spans` over one side's pieces. */
function walk(side: Side, text: string, ids: readonly number[]): ([number, number] | null)[] {
  let at = 0;
  let lost = false;
  let resyncs = SPAN_RESYNCS;
  return ids.map((id) => {
    if (id === side.unknownId) lost = true;
    if (side.unwritable.has(id)) return null;
    const piece = (side.tokenizer.id_to_token(id) ?? '').replaceAll(SENTENCEPIECE_SPACE, ' ').trim();
    if (piece === '') return null;
    let found: number;
    if (lost && resyncs > 0) {
      found = text.indexOf(piece, at);
      if (found < 0) resyncs--;
    } else {
      const ahead = text.slice(at, at + SPAN_LOOKAHEAD + piece.length).indexOf(piece);
      found = ahead < 0 ? -1 : at + ahead;
    }
    if (found < 0) return null;
    lost = false;
    at = found + piece.length;
    return [found, at];
  });
}

/** The language tokens matching `pattern`, by their own code and by ISO 639-1 alias where one is known. */
function languageTokens(tokenizer: Tokenizer, pattern: RegExp): Languages {
  const ids = new Map<string, number>();
  for (const [id, token] of tokenizer.get_added_tokens_decoder()) {
    const match = pattern.exec(token.content);
    if (match && token.special) ids.set(match[1]!, id);
  }
  for (const [code, id] of [...ids]) {
    const alias = isoAlias(code);
    if (alias !== undefined && !ids.has(alias)) ids.set(alias, id);
  }
  return { sources: ids, targets: ids };
}

/**
 * A Marian model's languages: its source and target from tokenizer_config.json, or for a multilingual model
 * (opus-mt-en-roa) its source and the targets of its `>>xx<<` tokens, each also by its ISO 639-1 alias.
 * @throws ServeError naming the file when it names no source, or no target and has no target tokens
 */
function pairOf(file: string, config: Json, json: Json, tokenizer: Tokenizer): Languages {
  const code = (key: string) => {
    const value = config[key];
    if (typeof value !== 'string' || !/^[a-z]{2,3}$/.test(value)) {
      throw new ServeError(
        'WORKER_START_FAILED',
        `${file}: "${key}" must name the model's language (ISO 639-1, such as "en"), got ${JSON.stringify(value ?? null)}.`,
      );
    }
    return value;
  };
  const targetTokens = marianTargetTokens(json);
  if (targetTokens.size > 0) {
    const targets = new Map<string, number>();
    for (const [target, token] of targetTokens) targets.set(target, tokenizer.token_to_id(token)!);
    for (const [target, id] of [...targets]) {
      const alias = marianAlias(target);
      if (alias !== undefined && !targets.has(alias)) targets.set(alias, id);
    }
    return { sources: new Map([[code('source_lang'), NO_FORCED_TOKEN]]), targets, targetInSource: true };
  }
  return {
    sources: new Map([[code('source_lang'), NO_FORCED_TOKEN]]),
    targets: new Map([[code('target_lang'), NO_FORCED_TOKEN]]),
  };
}

/**
 * tokenizer.json's single-text template as items: where the text, the source language and each fixed special go.
 * @throws ServeError naming the file when a family with languages has no language token in it
 */
function templateOf(json: Json, tokenizer: Tokenizer, pattern: RegExp | null, file: string): TemplateItem[] {
  const processor = json.post_processor as Json | null | undefined;
  const processors = processor?.type === 'Sequence' ? ((processor.processors ?? []) as Json[]) : [processor];
  const single = processors.find((p) => p?.type === 'TemplateProcessing')?.single as Json[] | undefined;
  let source = false;
  const items: TemplateItem[] = (single ?? [{ Sequence: { id: 'A' } }]).map((item) => {
    if ('Sequence' in item) return 'text';
    const token = String((item.SpecialToken as Json | undefined)?.id);
    if (!source && pattern !== null && pattern.test(token)) {
      source = true;
      return 'source';
    }
    const id = tokenizer.token_to_id(token);
    if (id === undefined) {
      throw new ServeError(
        'WORKER_START_FAILED',
        `${file}: the post-processor's token ${JSON.stringify(token)} is not in the vocabulary.`,
      );
    }
    return id;
  });
  if (pattern !== null && !source) {
    throw new ServeError(
      'WORKER_START_FAILED',
      `${file}: the post-processor template has no language token, so the source language would not be written.`,
    );
  }
  return items;
}
