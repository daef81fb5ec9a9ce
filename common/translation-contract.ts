/**
 * @module common/translation-contract — the translation request, parsed once at each hop's edge: the router's
 * `POST /` (which names `tgt_lang`) and the model server's `/predictions/{tgt_lang}` (whose target is the model it
 * is sent to); both then pass it on typed. `format` says what a text is: plain text, a markup document whose text
 * alone is translated, or a subtitle file whose cue text alone is.
 *
 * The seed's classifier took `request.get_json(force=True)` and indexed it blindly (a KeyError became an HTML
 * 500). Here every problem is a 400 JSON error whose message names the field, and all problems of a body are
 * reported at once. What a field's value alone cannot tell (a glossary id's entries, the languages a model reads,
 * the request limits) is checked where it is known: the model server's translation plan.
 */
import { z } from 'zod';
import { type ErrorCode, ServeError } from './errors.js';
import { AUTO_LANGUAGE } from './language-codes.js';

/**
 * Language codes as the model server and setup_config.json spell them: ISO 639-1 (`en`, `ko`, `zh`, …) for every
 * model, or NLLB-200's own (`eng_Latn`, common/language-codes.ts) for an NLLB model.
 */
export const LANGUAGE_CODE = /^[a-z]{2,3}(_[A-Z][a-z]{3})?$/;

export { AUTO_LANGUAGE };

/** Most alternative translations a sentence may ask for: each is a beam, and beams are decoder rows. */
export const MAX_ALTERNATIVES = 8;

export const TEXT_FORMATS = ['text', 'html', 'xml', 'srt', 'vtt'] as const;
export type TextFormat = (typeof TEXT_FORMATS)[number];

/** A checked translation request. `src_text` keeps its shape: string in, string out; array in, array out. */
export interface TranslationRequest {
  /** A language code, or `auto`. */
  src_lang: string;
  /** Never blank; an array is never empty. */
  src_text: string | string[];
  /** `none`: each text one row instead of one row per sentence (the model server's translation-plan.ts). */
  split?: 'sentences' | 'none';
  /**
   * With `src_lang: "auto"`: `strict` (default) refuses a text too short or too mixed to tell; `guess` takes the
   * best guess among the languages the model reads (what DeepL's and LibreTranslate's clients expect).
   */
  detect?: 'strict' | 'guess';
  /** What the texts are; plain text when absent. */
  format?: TextFormat;
  /** Markup elements whose content is kept as it is (`format` html or xml). */
  ignore_tags?: string[];
  /** `format` xml: each text may be a fragment (text outside an element, several top-level elements), as DeepL's. */
  fragment?: boolean;
  /** `format` xml: elements inside a sentence (DeepL's `non_splitting_tags`): part of their parent's run. */
  non_splitting_tags?: string[];
  /** `format` xml: elements that always end a sentence (DeepL's `splitting_tags`): blocks. */
  splitting_tags?: string[];
  /**
   * `format` xml: whether an element listed in neither is told inline or block from its content (true, the default,
   * as DeepL's `outline_detection`), or is always a block (false).
   */
  outline_detection?: boolean;
  /** A stored glossary (the model server's `/glossaries`) the translation follows. */
  glossary_id?: string;
  /** An inline glossary, source term → target term. */
  glossary?: Record<string, string>;
  /** Alternative translations wanted beside each text's translation (beam search's runners-up; plain text only). */
  alternatives?: number;
  /**
   * Answer each text's word alignment beside its translation (`alignment`: per text, flat links per target token
   * `targetStart, targetEnd, sourceStart, sourceEnd` over the text's and the translation's characters); plain text
   * only. Off by default: only the sentences that ask pay the alignment pass.
   */
  alignment?: boolean;
  /**
   * With `alignment`: per text (the shape of `src_text`), the offsets in it where the caller's formatting changes (a
   * run's start). Only the sentences an offset falls strictly inside are aligned word by word; each other sentence is
   * answered as one link from its whole translation to its whole source, which places anything wrapping it as well.
   */
  alignment_edges?: number[] | number[][];
}

/** The router's request: the model server it goes to is the one serving `tgt_lang`. */
export interface TranslateInput extends TranslationRequest {
  tgt_lang: string;
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

/** A list of element names (a prefixed name such as `x:b` included), at most 100 of at most 100 characters. */
const tagNames = (name: string, example: string) => {
  const error = () => `Field "${name}" must be an array of element names such as "${example}".`;
  return z
    .array(
      z
        .string({ error })
        .max(100, { error })
        .regex(/^[A-Za-z_][\w.:-]*$/, { error }),
      { error },
    )
    .max(100, { error: `Field "${name}" names at most 100 elements.` })
    .optional();
};

const EDGES_SHAPE = 'Field "alignment_edges" must be an array of character offsets, or one per text.';
const EDGE = z.number({ error: EDGES_SHAPE }).int({ error: EDGES_SHAPE }).nonnegative({ error: EDGES_SHAPE });

/** Whether `alignment_edges` has the shape of `src_text`, each offset within its text. */
function edgesFit(request: { src_text: unknown; alignment_edges?: number[] | number[][] }): boolean {
  const texts: unknown[] = Array.isArray(request.src_text) ? request.src_text : [request.src_text];
  const given = request.alignment_edges!;
  const lists: unknown[] = Array.isArray(request.src_text) ? given : [given];
  if (lists.length !== texts.length) return false;
  return lists.every((list, i) => {
    const text = texts[i];
    return (
      Array.isArray(list) &&
      typeof text === 'string' &&
      list.every((edge) => typeof edge === 'number' && edge <= text.length)
    );
  });
}

const ALTERNATIVES_RANGE = `Field "alternatives" must be an integer from 0 to ${MAX_ALTERNATIVES}.`;
const GLOSSARY_SHAPE = 'Field "glossary" must be an object of source term → target term (strings).';

/** Every field but the target, with the messages the router has answered since the seed. */
const FIELDS = {
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
      error: (issue) => `Field "detect" must be "strict" (the default) or "guess", got ${JSON.stringify(issue.input)}.`,
    })
    .optional(),
  format: z
    .enum(TEXT_FORMATS, {
      error: (issue) =>
        `Field "format" must be one of ${TEXT_FORMATS.join(', ')} (text is the default), got ${JSON.stringify(issue.input)}.`,
    })
    .optional(),
  ignore_tags: tagNames('ignore_tags', 'code'),
  fragment: z.boolean({ error: 'Field "fragment" must be true or false.' }).optional(),
  non_splitting_tags: tagNames('non_splitting_tags', 'b'),
  splitting_tags: tagNames('splitting_tags', 'p'),
  outline_detection: z.boolean({ error: 'Field "outline_detection" must be true or false.' }).optional(),
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
  alignment: z.boolean({ error: 'Field "alignment" must be true or false.' }).optional(),
  alignment_edges: z.union([z.array(EDGE), z.array(z.array(EDGE))], { error: EDGES_SHAPE }).optional(),
};

/** A parser of request bodies, built once (the zod schema is made when the parser is, not per call). */
export type RequestParser<T> = (body: unknown) => T;

/** The model server's parser: the target is the model the request was sent to, so a body's `tgt_lang` is not read. */
export function createRequestParser(): RequestParser<TranslationRequest>;
/** The router's parser: `tgt_lang` must be one of `targets` (the keys of setup_config.json). */
export function createRequestParser(targets: readonly string[]): RequestParser<TranslateInput>;
/**
 * The parser throws ServeError BAD_REQUEST naming every bad field, or UNKNOWN_LANGUAGE when only `tgt_lang` is
 * wrong (a string that is not served).
 */
export function createRequestParser(targets?: readonly string[]): RequestParser<TranslationRequest> {
  const served = new Set(targets);
  const supported = targets?.join(', ');
  const target = stringField('tgt_lang', 'a language code such as "ko"').refine((v) => served.has(v), {
    error: (issue) => `Field "tgt_lang": ${JSON.stringify(issue.input)} is not served here; supported: ${supported}.`,
    params: { code: 'UNKNOWN_LANGUAGE' satisfies ErrorCode },
  });
  const schema = z
    .object(targets === undefined ? FIELDS : { ...FIELDS, tgt_lang: target })
    // Runs once every field is valid: alternatives are beams of one plain-text row.
    .refine((r) => !r.alternatives || (r.format ?? 'text') === 'text', {
      error: 'alternatives are offered for plain text (format "text") only.',
    })
    .refine((r) => !r.fragment || r.format === 'xml', { error: 'fragment applies to format "xml" only.' })
    .refine(
      (r) =>
        r.format === 'xml' ||
        (r.non_splitting_tags === undefined && r.splitting_tags === undefined && r.outline_detection === undefined),
      { error: 'non_splitting_tags, splitting_tags and outline_detection apply to format "xml" only.' },
    )
    .refine((r) => !r.alignment || (r.format ?? 'text') === 'text', {
      error: 'alignment is answered for plain text (format "text") only.',
    })
    .refine((r) => r.alignment_edges === undefined || (r.alignment === true && edgesFit(r)), {
      error:
        'alignment_edges needs alignment: true, and per text (one list per text when src_text is an array) offsets within that text.',
    });
  const expected = targets === undefined ? '{"src_lang", "src_text"}' : '{"src_lang", "src_text", "tgt_lang"}';
  return (body) => {
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      throw new ServeError('BAD_REQUEST', `Request body must be a JSON object ${expected}, got ${typeName(body)}.`);
    }
    const parsed = schema.safeParse(body);
    if (parsed.success) return parsed.data as TranslationRequest;
    const issues = parsed.error.issues;
    // A sole refusal that names its own code (an unserved tgt_lang) keeps it; anything else is a bad request.
    const own = issues.length === 1 && issues[0]!.code === 'custom' ? issues[0]!.params?.code : undefined;
    throw new ServeError((own as ErrorCode | undefined) ?? 'BAD_REQUEST', issues.map((i) => i.message).join(' '));
  };
}
