/**
 * @module router/translate-request — what `POST /` accepts, and the 4xx a client gets otherwise.
 *
 * The seed's classifier took `request.get_json(force=True)` and indexed it blindly (a KeyError became an
 * HTML 500). Here every problem is a 400/415 JSON error whose message names the field, and all problems of a
 * body are reported at once.
 */
import { z } from 'zod';
import { ServeError } from '../common/errors.js';
import { LANGUAGE_CODE, MAX_ALTERNATIVES, TEXT_FORMATS, type TextFormat } from '../common/translation-contract.js';

/** A validated translation request. `src_text` keeps its shape: string in, string out; array in, array out. */
export interface TranslateInput {
  src_lang: string;
  src_text: string | string[];
  tgt_lang: string;
  /** `none`: each text one row instead of one row per sentence (the model server's translation-plan.ts). */
  split?: 'sentences' | 'none';
  /**
   * With `src_lang: "auto"`: `strict` (default) refuses a text too short or too mixed to tell; `guess` takes the
   * best guess among the languages the model reads (what DeepL's and LibreTranslate's clients expect).
   */
  detect?: 'strict' | 'guess';
  /** What the texts are (common/translation-contract.ts); plain text when absent. */
  format?: TextFormat;
  /** Markup elements whose content is kept as it is (`format` html or xml). */
  ignore_tags?: string[];
  /** A stored glossary (the model server's `/glossaries`) the translation follows. */
  glossary_id?: string;
  /** An inline glossary, source term → target term. */
  glossary?: Record<string, string>;
  /** Alternative translations wanted beside each text's translation (beam search's runners-up). */
  alternatives?: number;
}

export { LANGUAGE_CODE };

/** `src_lang` may also ask the model server to detect each text's language. */
export const AUTO_LANGUAGE = 'auto';

/**
 * Content types a JSON body may arrive with. Besides JSON itself: none, `text/plain`, and
 * `application/x-www-form-urlencoded` — what `curl -d '{…}'` sends, and what the seed accepted (it parsed
 * every body as JSON). Anything else (multipart forms, XML, …) is a 415.
 */
export function acceptsContentType(header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true;
  const mime = header.split(';')[0]!.trim().toLowerCase();
  return (
    mime === 'application/json' ||
    /^application\/[\w.+-]+\+json$/.test(mime) ||
    mime === 'text/plain' ||
    mime === 'application/x-www-form-urlencoded'
  );
}

const typeName = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

const stringField = (name: string, what: string) =>
  z.string({
    error: (issue) =>
      issue.input === undefined
        ? `Missing field "${name}" (${what}).`
        : `Field "${name}" must be a string (${what}), got ${typeName(issue.input)}.`,
  });

const srcText = z.unknown().superRefine((value, ctx) => {
  const issue = (message: string) => ctx.addIssue({ code: 'custom', message });
  if (value === undefined) return issue('Missing field "src_text" (a string or an array of strings).');
  if (typeof value === 'string') {
    if (value.trim() === '') issue('Field "src_text" is empty.');
    return;
  }
  if (!Array.isArray(value)) {
    return issue(`Field "src_text" must be a string or an array of strings, got ${typeName(value)}.`);
  }
  if (value.length === 0) return issue('Field "src_text" is an empty array.');
  value.forEach((item, i) => {
    if (typeof item !== 'string') issue(`Field "src_text[${i}]" must be a string, got ${typeName(item)}.`);
    else if (item.trim() === '') issue(`Field "src_text[${i}]" is empty.`);
  });
});

const ALTERNATIVES_RANGE = `Field "alternatives" must be an integer from 0 to ${MAX_ALTERNATIVES}.`;
const GLOSSARY_SHAPE = 'Field "glossary" must be an object of source term → target term (strings).';

/** A validator for one set of served languages; build it once (the zod schema is built here, not per call). */
export type TranslateRequestParser = (body: unknown) => TranslateInput;

/**
 * The validator of `POST /` bodies against the languages served.
 * @param languages the keys of setup_config.json (the registered models).
 * The parser throws ServeError BAD_REQUEST naming every bad field, or UNKNOWN_LANGUAGE when only `tgt_lang` is
 * wrong.
 */
export function createTranslateRequestParser(languages: readonly string[]): TranslateRequestParser {
  const served = new Set(languages);
  const supported = languages.join(', ');
  const schema = z.object({
    src_lang: stringField('src_lang', 'a language code such as "en"').refine(
      (v) => v === AUTO_LANGUAGE || LANGUAGE_CODE.test(v),
      {
        error: (issue) =>
          `Field "src_lang" must be a language code of 2-3 lowercase letters such as "en", or "auto", got ${JSON.stringify(issue.input)}.`,
      },
    ),
    src_text: srcText,
    split: z
      .enum(['sentences', 'none'], {
        error: (issue) =>
          `Field "split" must be "sentences" (the default) or "none", got ${JSON.stringify(issue.input)}.`,
      })
      .optional(),
    detect: z
      .enum(['strict', 'guess'], {
        error: (issue) =>
          `Field "detect" must be "strict" (the default) or "guess", got ${JSON.stringify(issue.input)}.`,
      })
      .optional(),
    format: z
      .enum(TEXT_FORMATS, {
        error: (issue) =>
          `Field "format" must be one of ${TEXT_FORMATS.join(', ')} (text is the default), got ${JSON.stringify(issue.input)}.`,
      })
      .optional(),
    ignore_tags: z
      .array(z.string().regex(/^[A-Za-z_][\w.:-]*$/), {
        error: () => 'Field "ignore_tags" must be an array of element names such as "code".',
      })
      .max(100, { error: 'Field "ignore_tags" names at most 100 elements.' })
      .optional(),
    glossary_id: z
      .string({ error: 'Field "glossary_id" must be a string (a glossary\'s id).' })
      .max(64, { error: 'Field "glossary_id" is at most 64 characters.' })
      .optional(),
    alternatives: z
      .number({ error: ALTERNATIVES_RANGE })
      .int({ error: ALTERNATIVES_RANGE })
      .min(0, { error: ALTERNATIVES_RANGE })
      .max(MAX_ALTERNATIVES, { error: ALTERNATIVES_RANGE })
      .optional(),
    glossary: z.record(z.string(), z.string({ error: GLOSSARY_SHAPE }), { error: GLOSSARY_SHAPE }).optional(),
    tgt_lang: stringField('tgt_lang', 'a language code such as "ko"').refine((v) => served.has(v), {
      error: (issue) => `Field "tgt_lang": ${JSON.stringify(issue.input)} is not served here; supported: ${supported}.`,
    }),
  });
  return (body) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ServeError(
        'BAD_REQUEST',
        `Request body must be a JSON object {"src_lang", "src_text", "tgt_lang"}, got ${typeName(body)}.`,
      );
    }
    const parsed = schema.safeParse(body);
    if (!parsed.success) {
      const issues = parsed.error.issues;
      // The refine above is the only custom issue on tgt_lang: a string that is not a served language.
      const unknownTarget = issues.length === 1 && issues[0]!.code === 'custom' && issues[0]!.path[0] === 'tgt_lang';
      throw new ServeError(unknownTarget ? 'UNKNOWN_LANGUAGE' : 'BAD_REQUEST', issues.map((i) => i.message).join(' '));
    }
    return parsed.data as TranslateInput;
  };
}

const parsers = new WeakMap<readonly string[], TranslateRequestParser>();

/**
 * Validate a parsed JSON body against the languages served: `createTranslateRequestParser(languages)(body)`,
 * with the parser kept per `languages` array.
 */
export function parseTranslateRequest(body: unknown, languages: readonly string[]): TranslateInput {
  let parse = parsers.get(languages);
  if (parse === undefined) {
    parse = createTranslateRequestParser(languages);
    parsers.set(languages, parse);
  }
  return parse(body);
}
