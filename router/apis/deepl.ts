/**
 * @module router/apis/deepl — DeepL API v2 on the public port, for DeepL's own clients (`serverUrl`):
 * `POST /v2/translate`, `GET|POST /v2/languages`, `GET|POST /v2/usage`, and the glossary API (`/v2/glossaries`,
 * `/v2/glossary-language-pairs`, ./deepl-glossaries.ts; v3's multilingual `/v3/glossaries`, ./deepl-glossaries-v3.ts). Texts go through the router's translation path
 * (./translate-texts.ts); answers and errors take DeepL's shapes and status codes, which the official
 * clients parse: `{"translations": [{"detected_source_language", "text"}]}`, errors `{"message"}` with 400, 403
 * (key), 413, 429 (+ Retry-After), 456 (quota), 5xx.
 *
 * Every parameter of `/v2/translate` is in `TRANSLATE_PARAMETERS`: honoured, mapped to what the model does, ignored
 * as DeepL ignores it, or refused as DeepL refuses a value it does not support (docs/compatible-apis.md prints it).
 */
import type { Context, Hono } from 'hono';
import type { RouterEnv } from '../router-env.js';
import { deeplLanguages } from './deepl-languages.js';
import { admit, answer, authorize, DeepLError, requestParams, unsupported } from './deepl-dialect.js';
import { mountDocuments } from './deepl-documents.js';
import { mountGlossaries, translationPair } from './deepl-glossaries.js';
import { mountMultilingualGlossaries } from './deepl-glossaries-v3.js';
import { billedOnSuccess } from '../keys/request-key.js';
import { type ApiContext, characterCount, param, type Params, translateTexts } from './translate-texts.js';

/** How `/v2/translate` treats one parameter. */
export interface ParameterRule {
  handling: 'honoured' | 'mapped' | 'ignored' | 'unsupported';
  /** What it does here, for the docs table. */
  note: string;
  /** Refuses a value (DeepL's 400) or accepts it. */
  check?: (value: string) => void;
}

const oneOf =
  (name: string, values: readonly string[]) =>
  (value: string): void => {
    if (!values.includes(value)) throw unsupported(name);
  };
const refuse = (name: string) => (): void => {
  throw unsupported(name);
};

/** DeepL's model types; `model_type_used` names the one that served (one model serves them all here). */
const MODEL_TYPES = ['quality_optimized', 'latency_optimized', 'prefer_quality_optimized'];

/** Every `/v2/translate` parameter DeepL documents; any other is ignored, as DeepL ignores it. */
export const TRANSLATE_PARAMETERS: Readonly<Record<string, ParameterRule>> = {
  text: { handling: 'honoured', note: 'one or many (repeated, or a JSON array); blank texts come back as they are' },
  target_lang: {
    handling: 'mapped',
    note: 'to the served language: EN-GB/EN-US/EN → en, PT-BR/PT-PT/PT → pt, ZH/ZH-HANS → zh; others as listed',
  },
  source_lang: {
    handling: 'mapped',
    note: 'to the served language; absent → detected per text, returned as detected_source_language',
  },
  split_sentences: {
    handling: 'mapped',
    note: '1 and nonewlines → sentence by sentence (line breaks always separate), 0 → each text whole',
    check: oneOf('split_sentences', ['0', '1', 'nonewlines']),
  },
  preserve_formatting: {
    handling: 'honoured',
    note: 'formatting and surrounding whitespace are always kept',
    check: oneOf('preserve_formatting', ['0', '1', 'true', 'false']),
  },
  show_billed_characters: {
    handling: 'honoured',
    note: 'billed_characters: the text’s characters',
    check: oneOf('show_billed_characters', ['0', '1', 'true', 'false']),
  },
  formality: {
    handling: 'unsupported',
    note: 'no target supports formality: default/prefer_* accepted, more/less → 400 as DeepL answers',
    check: (value) => {
      if (value === 'more' || value === 'less')
        throw new DeepLError(400, "'formality' is not supported for given 'target_lang'.");
      oneOf('formality', ['default', 'prefer_more', 'prefer_less'])(value);
    },
  },
  tag_handling: {
    handling: 'honoured',
    note: 'html and xml: only the text is translated, tags, entities and comments kept',
    check: oneOf('tag_handling', ['html', 'xml']),
  },
  glossary_id: {
    handling: 'honoured',
    note: 'a glossary made with /v2/glossaries (needs source_lang, as DeepL); enforced while decoding',
  },
  style_id: { handling: 'unsupported', note: '400 for any value', check: refuse('style_id') },
  translation_memory_id: { handling: 'unsupported', note: '400 for any value', check: refuse('translation_memory_id') },
  custom_instructions: { handling: 'unsupported', note: '400 for any value', check: refuse('custom_instructions') },
  context: { handling: 'ignored', note: 'accepted, not translated, not billed (as DeepL)' },
  model_type: {
    handling: 'mapped',
    note: 'one model serves every type: model_type_used answers quality_optimized, or latency_optimized when asked',
    check: oneOf('model_type', MODEL_TYPES),
  },
  tag_handling_version: {
    handling: 'ignored',
    note: 'v1 and v2 parse alike here',
    check: oneOf('tag_handling_version', ['v1', 'v2']),
  },
  outline_detection: {
    handling: 'honoured',
    note: 'tag_handling=xml: on (default), an unlisted element in mixed content holding text is inline; 0: only non_splitting_tags are',
    check: oneOf('outline_detection', ['0', '1', 'true', 'false']),
  },
  non_splitting_tags: {
    handling: 'honoured',
    note: 'tag_handling=xml: these elements stay inside a sentence, carried onto the words they wrap (comma-separated or repeated)',
  },
  splitting_tags: {
    handling: 'honoured',
    note: 'tag_handling=xml: these elements always end a sentence (comma-separated or repeated)',
  },
  ignore_tags: {
    handling: 'honoured',
    note: 'with tag_handling: these elements are kept as they are (comma-separated or repeated)',
  },
  translation_memory_threshold: { handling: 'ignored', note: 'meaningful only with translation_memory_id' },
  enable_beta_languages: { handling: 'ignored', note: 'every served language is listed' },
};

/** The parameters of `/v2/translate` that `/v2/document` takes too, checked alike. */
const DOCUMENT_PARAMETERS = ['formality', 'style_id', 'translation_memory_id', 'custom_instructions'];

/** `/v2/translate`'s checks of the parameters `names` (DeepL's 400 for a value it refuses). */
function checkParameters(params: Params, names: readonly string[]): void {
  for (const name of names) {
    const value = param(params, name);
    const check = TRANSLATE_PARAMETERS[name]?.check;
    if (value !== undefined && check !== undefined) check(value);
  }
}

/** A list of element names: each value comma-separated, the values of a repeated field (a JSON array) joined. */
function tagList(params: Params, name: string): string[] | undefined {
  const values = params.get(name);
  if (values === undefined) return undefined;
  return values.flatMap((value) =>
    String(value)
      .split(',')
      .map((tag) => tag.trim())
      .filter((tag) => tag !== ''),
  );
}

/** `{[name]: value}`, or nothing when the value is absent. */
const optional = <K extends string, V>(name: K, value: V | undefined) =>
  (value === undefined ? {} : { [name]: value }) as Partial<Record<K, V>>;

/** DeepL's usage figures for a keyless server: nothing counted, no limit. */
const UNLIMITED = 1_000_000_000_000;

/** Registers DeepL's routes on the router app. */
export function mountDeepL(app: Hono<RouterEnv>, context: ApiContext): void {
  const routes = context.routes;
  const languages =
    routes === undefined
      ? deeplLanguages(context.languages)
      : deeplLanguages(routes.sources, routes.targets, (src, tgt) => routes.serves(src, tgt));

  app.post('/v2/translate', (c) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const key = authorize(c, params, context);
      checkParameters(params, Object.keys(TRANSLATE_PARAMETERS));
      const texts = params.get('text');
      if (texts === undefined || texts.length === 0) throw new DeepLError(400, "Parameter 'text' not specified.");
      if (!texts.every((t): t is string => typeof t === 'string'))
        throw new DeepLError(400, "Value for 'text' not supported.");
      const { srcLang, tgtLang, glossary } = await translationPair(context, params, languages, key);
      c.set('tgtLang', tgtLang);
      c.set('texts', texts.length);
      const charged = key && { access: context.access!, key, charge: await admit(context, key, characterCount(texts)) };
      const split = param(params, 'split_sentences') === '0' ? 'none' : undefined;
      const format = param(params, 'tag_handling') as 'html' | 'xml' | undefined;
      const ignoreTags = tagList(params, 'ignore_tags');
      const outline = param(params, 'outline_detection');
      // DeepL reads these for XML only; with tag_handling=html they change nothing there either.
      const xml =
        format === 'xml'
          ? {
              fragment: true,
              ...optional('nonSplittingTags', tagList(params, 'non_splitting_tags')),
              ...optional('splittingTags', tagList(params, 'splitting_tags')),
              ...optional('outlineDetection', outline === undefined ? undefined : !['0', 'false'].includes(outline)),
            }
          : {};
      const modelType = param(params, 'model_type');
      const modelTypeUsed = modelType === 'latency_optimized' ? modelType : 'quality_optimized';
      const reply = await billedOnSuccess(
        charged,
        () =>
          translateTexts(context, {
            texts,
            ...(format === undefined ? {} : { format }),
            ...(format === undefined || ignoreTags === undefined ? {} : { ignoreTags }),
            // DeepL's XML is inline markup in a text: text outside any element, several elements side by side.
            ...xml,
            srcLang,
            tgtLang,
            ...(split === undefined ? {} : { split }),
            ...(glossary === undefined ? {} : { glossary }),
            // DeepL answers a text already in the target language as it is (and bills it).
            sameLanguage: 'as-is',
            requestId: c.get('requestId'),
            signal: c.req.raw.signal,
          }),
        context.logger,
      );
      const billed = ['1', 'true'].includes(param(params, 'show_billed_characters') ?? '');
      return {
        translations: reply.translated.map((text, i) => ({
          detected_source_language: reply.sourceLangs[i]!.toUpperCase(),
          text,
          ...(billed ? { billed_characters: characterCount([texts[i]!]) } : {}),
          ...(modelType === undefined ? {} : { model_type_used: modelTypeUsed }),
        })),
      };
    }),
  );

  const languageList = (c: Context<RouterEnv>) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      authorize(c, params, context);
      const type = param(params, 'type') ?? 'source';
      if (type !== 'source' && type !== 'target') throw unsupported('type');
      return type === 'source' ? languages.source : languages.target;
    });
  app.get('/v2/languages', languageList);
  app.post('/v2/languages', languageList);

  const usage = (c: Context<RouterEnv>) =>
    answer(context, c, async () => {
      const params = await requestParams(c, context);
      const key = authorize(c, params, context);
      if (key === undefined || context.access === undefined) return { character_count: 0, character_limit: UNLIMITED };
      const used = await context.access.usage(key);
      return { character_count: used.characters, character_limit: key.characterQuota ?? UNLIMITED };
    });
  app.get('/v2/usage', usage);
  app.post('/v2/usage', usage);

  mountGlossaries(app, context, languages);
  mountMultilingualGlossaries(app, context, languages);
  mountDocuments(app, context, languages, (params) => checkParameters(params, DOCUMENT_PARAMETERS));

  const paths = ['/v2/translate', '/v2/languages', '/v2/usage', '/v2/glossaries', '/v2/glossary-language-pairs'];
  for (const path of [...paths, '/v2/document', '/v3/glossaries'])
    app.all(path, (c) => answer(context, c, () => Promise.reject(new DeepLError(405, 'Method Not Allowed'))));
  for (const prefix of ['/v2/*', '/v3/*'])
    app.all(prefix, (c) => answer(context, c, () => Promise.reject(new DeepLError(404, 'Not found'))));
}
