/**
 * @module model-server/frontend/translation-plan — how a translation request becomes jobs, and how their answers
 * become the response: every text may be a document, so it is cut into sentences (model-server/text), each
 * sentence is one job (one engine row, batched with everyone else's), and each text's answer is its sentences'
 * translations joined by the separators that stood between them — the same paragraphs, line breaks and spacing.
 *
 * `src_lang: "auto"` detects each text's language among every language the identifier knows, then checks the
 * model can read it, so a text in a language the model lacks is a clear 400, not a guess among the wrong ones.
 *
 * `split: "none"` asks for each text as one row (context across its sentences, for a caller that segmented
 * itself); a text longer than the window is still split by the worker, never cut.
 *
 * Limits are stated in characters and sentences per request (MAX_REQUEST_CHARS, MAX_REQUEST_SENTENCES) and
 * answered 413 past them: never a 200 with text missing. A sentence longer than the model's input window is the
 * worker's to split (it knows the tokenizer, worker/handlers/translation.ts).
 */
import { ServeError } from '../../common/errors.js';
import { detectLanguage, DETECTABLE_LANGUAGES } from '../text/detect-language.js';
import { joinTranslations, segmentDocument, TooManySentencesError, type Segments } from '../text/segment.js';

/** What `src_lang` may say to ask for detection. */
export const AUTO = 'auto';

export interface TranslationLimits {
  /** Most characters in all of a request's texts together. */
  maxChars: number;
  /** Most sentences in all of a request's texts together. */
  maxSentences: number;
}

export interface PlanContext {
  /** The model's name: the target language. */
  tgtLang: string;
  /** Languages the engine can read (its tokenizer's); undefined while no worker has said. */
  readable: readonly string[] | undefined;
  limits: TranslationLimits;
}

export interface TranslationPlan {
  /** One job body per sentence, in order: `{src_lang, src_text}` as the translation handler takes it. */
  bodies: { src_lang: string; src_text: string }[];
  /** The response body from the jobs' values, in the order of `bodies`. */
  answer(values: readonly unknown[]): Record<string, unknown>;
}

const typeName = (value: unknown) => (value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value);

/**
 * Plan a `{src_lang, src_text}` body for model `tgtLang`.
 * @throws ServeError BAD_REQUEST (shape, empty text, undetectable language), UNKNOWN_LANGUAGE (a language the model
 *   cannot read), PAYLOAD_TOO_LARGE (over the request limits).
 */
export function planTranslation(body: unknown, context: PlanContext): TranslationPlan {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new ServeError('BAD_REQUEST', 'Request body must be a JSON object with "src_lang" and "src_text".');
  }
  const { src_lang: srcLang, src_text: srcText, split = 'sentences' } = body as Record<string, unknown>;
  if (typeof srcLang !== 'string') throw new ServeError('BAD_REQUEST', 'src_lang must be a string.');
  if (split !== 'sentences' && split !== 'none') {
    throw new ServeError(
      'BAD_REQUEST',
      `split must be "sentences" (the default) or "none", got ${JSON.stringify(split)}.`,
    );
  }
  const isArray = Array.isArray(srcText);
  if (!isArray && typeof srcText !== 'string') {
    throw new ServeError('BAD_REQUEST', `src_text must be a string or an array of strings, got ${typeName(srcText)}.`);
  }
  const texts = isArray ? (srcText as unknown[]) : [srcText];
  if (texts.length === 0) throw new ServeError('BAD_REQUEST', 'src_text must not be an empty array.');
  let chars = 0;
  texts.forEach((text, i) => {
    const name = isArray ? `src_text[${i}]` : 'src_text';
    if (typeof text !== 'string')
      throw new ServeError('BAD_REQUEST', `${name} must be a string, got ${typeName(text)}.`);
    if (text.trim() === '') throw new ServeError('BAD_REQUEST', `${name} is empty.`);
    chars += text.length;
  });
  const { limits } = context;
  if (chars > limits.maxChars) {
    throw new ServeError(
      'PAYLOAD_TOO_LARGE',
      `Request has ${chars} characters of text; at most ${limits.maxChars} are translated in one request (MAX_REQUEST_CHARS): split it into several requests.`,
    );
  }
  const auto = srcLang === AUTO;
  const tooMany = () =>
    new ServeError(
      'PAYLOAD_TOO_LARGE',
      `Request has more than ${limits.maxSentences} sentences; at most ${limits.maxSentences} are translated in one request (MAX_REQUEST_SENTENCES): split it into several requests.`,
    );
  // Counted while segmenting, which stops at the first sentence past the limit: a body of a hundred thousand
  // one-letter lines is refused after the limit's worth of work, not after segmenting all of it.
  let sentences = 0;
  const docs = (texts as string[]).map((text, i) => {
    const lang = auto ? detected(text, isArray ? `src_text[${i}]` : 'src_text', context.readable) : srcLang;
    let segments: Segments;
    try {
      segments = split === 'none' ? wholeText(text) : segmentDocument(text, lang, limits.maxSentences - sentences);
    } catch (err) {
      throw err instanceof TooManySentencesError ? tooMany() : err;
    }
    sentences += segments.pieces.length;
    if (sentences > limits.maxSentences) throw tooMany();
    return { lang, segments };
  });
  const bodies = docs.flatMap(({ lang, segments }) =>
    segments.pieces.map((piece) => ({ src_lang: lang, src_text: piece })),
  );
  return {
    bodies,
    answer(values) {
      let next = 0;
      const translated = docs.map(({ segments }) =>
        join(segments, values.slice(next, (next += segments.pieces.length)), context.tgtLang),
      );
      const response: Record<string, unknown> = { translated: isArray ? translated : translated[0] };
      if (auto) response.detected_src_lang = isArray ? docs.map((d) => d.lang) : docs[0]!.lang;
      return response;
    },
  };
}

/** The text as one piece, its surrounding whitespace kept as separators. */
function wholeText(text: string): Segments {
  const start = text.length - text.trimStart().length;
  const end = text.trimEnd().length;
  return { pieces: [text.slice(start, end)], separators: [text.slice(0, start), text.slice(end)] };
}

function join(segments: Segments, values: readonly unknown[], tgtLang: string): string {
  const translations = values.map((value) => {
    const text = value !== null && typeof value === 'object' ? (value as { translated?: unknown }).translated : value;
    if (typeof text !== 'string') throw new ServeError('INTERNAL', 'The translation handler answered without text.');
    return text;
  });
  return joinTranslations(segments, translations, tgtLang);
}

/** The language of `text` for `src_lang: "auto"`. @throws ServeError BAD_REQUEST / UNKNOWN_LANGUAGE */
function detected(text: string, name: string, readable: readonly string[] | undefined): string {
  const guess = detectLanguage(text, DETECTABLE_LANGUAGES);
  if (guess.lang === null) {
    throw new ServeError(
      'BAD_REQUEST',
      `Could not detect the language of ${name} (too short or too mixed to tell); give src_lang instead of "auto".`,
    );
  }
  if (readable !== undefined && !readable.includes(guess.lang)) {
    throw new ServeError(
      'UNKNOWN_LANGUAGE',
      `${name} looks like "${guess.lang}", which this model cannot read; give src_lang if that is wrong.`,
    );
  }
  return guess.lang;
}
