/**
 * @module engine/tokenizer — M2M100 tokenization on `@huggingface/tokenizers` (pure JS): the language
 * codes a model knows, `[__src__] tokens </s>` encoding with truncation, and decoding without specials.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Tokenizer } from '@huggingface/tokenizers';
import { ServeError } from '../../common/errors.js';

/** M2M100's language tokens: `__en__`, `__ast__`. */
const LANGUAGE_TOKEN = /^__([a-z]{2,3})__$/;

/** Which request field a language code came from, for error messages. */
export type LanguageField = 'src_lang' | 'tgt_lang';

export interface EncodedSource {
  /** `[__src__] tokens </s>`, at most `maxInputTokens` long. */
  ids: number[];
  /** Whether the text had to be cut to fit. */
  truncated: boolean;
}

export class TranslationTokenizer {
  readonly #tokenizer: Tokenizer;
  readonly #languageIds: ReadonlyMap<string, number>;
  readonly #eosId: number;
  readonly #maxInputTokens: number;
  /** Sorted codes, for error messages and `languages()`. */
  readonly #codes: readonly string[];
  /** Ids a glossary term may not write: special tokens (languages, `</s>`, padding) and `<unk>`. */
  readonly #unwritable: ReadonlySet<number>;

  private constructor(tokenizer: Tokenizer, languageIds: Map<string, number>, eosId: number, maxInputTokens: number) {
    this.#tokenizer = tokenizer;
    this.#languageIds = languageIds;
    this.#eosId = eosId;
    this.#maxInputTokens = maxInputTokens;
    this.#codes = Object.freeze([...languageIds.keys()].sort());
    const specials = [...tokenizer.get_added_tokens_decoder()].filter(([, token]) => token.special).map(([id]) => id);
    this.#unwritable = new Set([...specials, eosId, tokenizer.token_to_id('<unk>') ?? -1]);
  }

  /**
   * Load `tokenizer.json` (+ `tokenizer_config.json` when present) from a model folder.
   * @param maxInputTokens longest encoding, special tokens included (≥ 3)
   */
  static load(modelDir: string, options: { eosTokenId: number; maxInputTokens: number }): TranslationTokenizer {
    const read = (name: string, required: boolean): object => {
      try {
        return JSON.parse(readFileSync(path.join(modelDir, name), 'utf8')) as object;
      } catch (err) {
        if (!required && (err as NodeJS.ErrnoException).code === 'ENOENT') return {};
        throw new ServeError(
          'WORKER_START_FAILED',
          `Cannot read ${path.join(modelDir, name)}: ${(err as Error).message}`,
          {
            cause: err,
          },
        );
      }
    };
    const tokenizer = new Tokenizer(read('tokenizer.json', true), read('tokenizer_config.json', false));
    const languageIds = new Map<string, number>();
    for (const [id, token] of tokenizer.get_added_tokens_decoder()) {
      const match = LANGUAGE_TOKEN.exec(token.content);
      if (match && token.special) languageIds.set(match[1]!, id);
    }
    if (languageIds.size === 0) {
      throw new ServeError('WORKER_START_FAILED', `${modelDir}/tokenizer.json has no language tokens (__xx__).`);
    }
    if (options.maxInputTokens < 3) throw new RangeError('maxInputTokens must be at least 3');
    return new TranslationTokenizer(tokenizer, languageIds, options.eosTokenId, options.maxInputTokens);
  }

  /** Language codes this tokenizer knows, sorted. */
  languages(): readonly string[] {
    return this.#codes;
  }

  hasLanguage(code: string): boolean {
    return this.#languageIds.has(code);
  }

  /** Token id of `__code__`. @throws ServeError UNKNOWN_LANGUAGE naming the field, the code and the supported codes. */
  languageId(code: string, field: LanguageField): number {
    const id = this.#languageIds.get(code);
    if (id === undefined) {
      throw new ServeError(
        'UNKNOWN_LANGUAGE',
        `Unknown ${field} "${code}". Supported languages: ${this.#codes.join(', ')}.`,
      );
    }
    return id;
  }

  /** `[__src__] tokens </s>`, truncating the text's tokens (as the seed's `truncation=True`). */
  encode(text: string, srcLang: string): EncodedSource {
    const languageId = this.languageId(srcLang, 'src_lang');
    const tokens = this.#tokenizer.encode(text, { add_special_tokens: false }).ids;
    const room = this.#maxInputTokens - 2;
    const truncated = tokens.length > room;
    return { ids: [languageId, ...(truncated ? tokens.slice(0, room) : tokens), this.#eosId], truncated };
  }

  /**
   * The ids that write `term` inside a translation (no language token, no `</s>`): a glossary term's constraint.
   * @throws ServeError BAD_REQUEST when the vocabulary cannot write it (an unknown piece, a special token)
   */
  encodeTerm(term: string): number[] {
    const ids: number[] = this.#tokenizer.encode(term, { add_special_tokens: false }).ids;
    if (ids.length === 0 || ids.some((id) => this.#unwritable.has(id))) {
      throw new ServeError(
        'BAD_REQUEST',
        `The glossary term ${JSON.stringify(term.slice(0, 60))} has characters this model cannot write.`,
      );
    }
    return ids;
  }

  /** Text of generated ids, special tokens (start, language, `</s>`, padding) skipped. */
  decode(ids: readonly number[]): string {
    return this.#tokenizer.decode(ids as number[], { skip_special_tokens: true });
  }
}
