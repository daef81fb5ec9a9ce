/**
 * @module model-server/translation/translation-plan — how a translation request becomes jobs, and how their answers
 * become the response: every text may be a document, so it is cut into sentences (model-server/text), each
 * sentence is one job (one engine row, batched with everyone else's), and each text's answer is its sentences'
 * translations joined by the separators that stood between them — the same paragraphs, line breaks and spacing.
 *
 * `src_lang: "auto"` detects each text's language among every language the identifier knows, then checks the
 * model can read it, so a text in a language the model lacks is a clear 400, not a guess among the wrong ones.
 *
 * `format` says what a text is: `html`/`xml` documents have only their text translated, tags and all else kept
 * (text/markup/); `srt`/`vtt` subtitle files only their cue text (text/subtitles.ts). Each part to translate is
 * then a document like a plain text.
 *
 * `split: "none"` asks for each text as one row (context across its sentences, for a caller that segmented
 * itself); a text longer than the window is still split by the worker, never cut.
 *
 * Limits are stated in characters and sentences per request (MAX_REQUEST_CHARS, MAX_REQUEST_SENTENCES) and
 * answered 413 past them: never a 200 with text missing. A sentence longer than the model's input window is the
 * worker's to split (it knows the tokenizer, worker/handlers/translation.ts).
 *
 * The model server runs both halves in its text pool (text-pool.ts), off its event loop: `outlineTranslation` (the
 * jobs, and an outline the answer needs) and `answerTranslation` (the response from the jobs' values). Both take and
 * give only what crosses threads by structured clone; markup and subtitles are parsed again for the answer.
 */
import { ServeError } from '../../common/errors.js';
import { AUTO_LANGUAGE } from '../../common/language-codes.js';
import type { TextFormat, TranslationRequest } from '../../common/translation-contract.js';
import type { SentenceItem } from '../protocol.js';
import { detectLanguage, DETECTABLE_LANGUAGES } from '../text/detect-language.js';
import { joinAlternatives, type RankedPart } from '../text/alternatives.js';
import { glossaryEntries, MAX_TERMS_PER_SENTENCE, termsFor, type GlossaryEntries } from '../text/glossary.js';
import { type Edges, joinLinks, type Links, piecesCut, wholeLink } from '../text/markup/inline-tags.js';
import { planMarkup } from '../text/markup/markup.js';
import { joinTranslations, segmentDocument, TooManySentencesError, type Segments } from '../text/segment.js';
import { planSubtitles } from '../text/subtitles.js';

/** The parts of one text to translate as documents, and the text rebuilt from their translations. */
interface Content {
  texts: readonly string[];
  /** Per part, where its inline markup's edges fall (text/markup/inline-tags.ts `Edges`); absent: no markup to place. */
  edges?: readonly Edges[];
  render(translations: readonly string[], links?: readonly (Links | undefined)[]): string;
}

export interface TranslationLimits {
  /** Most characters in all of a request's texts together. */
  maxChars: number;
  /** Most sentences in all of a request's texts together. */
  maxSentences: number;
}

/** A stored glossary (`glossary_id`) as the plan applies it: found and checked against the model by the caller. */
export interface PlanGlossary {
  entries: GlossaryEntries;
  sourceLang: string;
}

export interface PlanContext {
  /** The model's name: the target language. */
  tgtLang: string;
  /** Languages the engine can read (its tokenizer's); undefined while no worker has said. */
  readable: readonly string[] | undefined;
  limits: TranslationLimits;
  /** The stored glossary the request names (`glossary_id`); an inline one (`glossary`) is in the request. */
  glossary?: PlanGlossary;
}

/** One sentence of a request: what a worker translates, under an id unique within the request. */
export interface PlannedSentence {
  /** `text.part.sentence` (`1.0.2`): cache hits, answers and per-row errors are matched by it, never by position. */
  id: string;
  item: SentenceItem;
}

/**
 * Each text's language and, per part, its sentences' ids and the separators between them: the answer's shape. A
 * part whose translation is answered with links (inline markup to place, or `alignment` asked) keeps its source
 * pieces too, and which of them an edge cuts: those were aligned word by word, the others are linked whole.
 */
export type DocumentOutline = {
  lang: string;
  units: {
    ids: string[];
    separators: readonly string[];
    linked?: { pieces: readonly string[]; cut: readonly boolean[] };
  }[];
}[];

/** A request's sentences, each with its id, terms and options, and how their answers rejoin. */
export interface SentencePlan {
  sentences: PlannedSentence[];
  docs: DocumentOutline;
}

/** Each sentence's answer (the worker's value, or the cache's), by sentence id. */
export type SentenceAnswers = ReadonlyMap<string, unknown>;

/**
 * The jobs of a request, checked at the model server's edge (common/translation-contract.ts), for model `tgtLang`.
 * @throws ServeError BAD_REQUEST (undetectable language, glossary), UNKNOWN_LANGUAGE (a language the model cannot
 *   read), PAYLOAD_TOO_LARGE (over the request limits).
 */
export function planSentences(request: TranslationRequest, context: PlanContext): SentencePlan {
  const { src_lang: srcLang, src_text: srcText, split, format = 'text', detect, alternatives = 0 } = request;
  const isArray = Array.isArray(srcText);
  const texts = isArray ? srcText : [srcText];
  const chars = texts.reduce((sum, text) => sum + text.length, 0);
  const { limits } = context;
  if (chars > limits.maxChars) {
    throw new ServeError(
      'PAYLOAD_TOO_LARGE',
      `Request has ${chars} characters of text; at most ${limits.maxChars} are translated in one request (MAX_REQUEST_CHARS): split it into several requests.`,
    );
  }
  const auto = srcLang === AUTO_LANGUAGE;
  const tooMany = () =>
    new ServeError(
      'PAYLOAD_TOO_LARGE',
      `Request has more than ${limits.maxSentences} sentences; at most ${limits.maxSentences} are translated in one request (MAX_REQUEST_SENTENCES): split it into several requests.`,
    );
  // Counted while segmenting, which stops at the first sentence past the limit: a body of a hundred thousand
  // one-letter lines is refused after the limit's worth of work, not after segmenting all of it.
  let counted = 0;
  const docs = texts.map((text, i): { lang: string; units: Segments[]; wanted?: readonly (Edges | 'every')[] } => {
    const name = isArray ? `src_text[${i}]` : 'src_text';
    const content = contentOf(text, format, request);
    const lang = auto ? detected(content.texts.join('\n'), name, context.readable, detect === 'guess') : srcLang;
    const units = content.texts.map((unit) => {
      let segments: Segments;
      try {
        segments = split === 'none' ? wholeText(unit) : segmentDocument(unit, lang, limits.maxSentences - counted);
      } catch (err) {
        throw err instanceof TooManySentencesError ? tooMany() : err;
      }
      counted += segments.pieces.length;
      if (counted > limits.maxSentences) throw tooMany();
      return segments;
    });
    // Plain text asking for `alignment` (the contract allows no other format): its one part's links are answered,
    // word by word in the sentences its edges cut, or in every sentence when it gives none.
    if (request.alignment) return { lang, units, wanted: [givenEdges(request, i) ?? ('every' as const)] };
    return content.edges?.some((edges) => edges.length > 0) ? { lang, units, wanted: content.edges } : { lang, units };
  });
  // An inline glossary (`glossary`) is for whatever the source is; a stored one (`glossary_id`) for its pair.
  const { glossary: inline } = request;
  const glossary: Partial<PlanGlossary> | undefined = inline
    ? { entries: glossaryEntries(Object.entries(inline)) }
    : context.glossary;
  const sentences: PlannedSentence[] = [];
  const outline = docs.map(({ lang, units, wanted }, d) => {
    if (glossary?.sourceLang !== undefined && glossary.sourceLang !== lang) {
      throw new ServeError(
        'BAD_REQUEST',
        `The glossary is for ${glossary.sourceLang} → ${context.tgtLang}, but the text is in ${lang}.`,
      );
    }
    const planned = (piece: string, id: string, align: boolean) => {
      const item = sentenceItem(lang, piece, glossary?.entries);
      sentences.push({
        id,
        item: {
          ...item,
          ...(alternatives !== 0 ? { alternatives } : {}),
          ...(align ? { align: true as const } : {}),
        },
      });
      return id;
    };
    const parts = units.map((segments, u) => {
      const want = wanted?.[u];
      const cut =
        want === undefined ? undefined : want === 'every' ? segments.pieces.map(() => true) : piecesCut(segments, want);
      return {
        ids: segments.pieces.map((p, k) => planned(p, `${d}.${u}.${k}`, cut?.[k] === true)),
        separators: segments.separators,
        // The source pieces, which the answer's links are measured against.
        ...(cut === undefined ? {} : { linked: { pieces: segments.pieces, cut } }),
      };
    });
    return { lang, units: parts };
  });
  return { sentences, docs: outline };
}

/**
 * The response from every sentence's answer, found by id while walking the plan: each text rebuilt from its parts'
 * translations, with alternatives and the detected languages when asked for.
 * @throws ServeError INTERNAL when a sentence has no answer with text
 */
export function answerTranslation(
  request: TranslationRequest,
  docs: DocumentOutline,
  answers: SentenceAnswers,
  tgtLang: string,
): Record<string, unknown> {
  const { src_text: srcText, format = 'text', alternatives = 0 } = request;
  const isArray = Array.isArray(srcText);
  const texts = isArray ? srcText : [srcText];
  // Walking the plan: each part's answers are found by its sentences' ids, and rejoin between its separators.
  const parts = docs.map(({ units }) =>
    units.map(({ ids, separators }) => ({
      ranked: ids.map((id) => rankedPart(answers.get(id))),
      join: (texts: string[]) => joinTranslations({ pieces: ids, separators }, texts, tgtLang),
    })),
  );
  const alignments: Links[] = [];
  const translated = texts.map((text, d) => {
    const units = parts[d]!.map(({ ranked, join }) => join(ranked.map((p) => p.text)));
    const outline = docs[d]!.units;
    if (!outline.some((unit) => unit.linked)) return contentOf(text, format, request).render(units);
    // A unit with inline markup gets its sentences' links, joined as its translation was.
    const links = outline.map(({ ids, separators, linked }, u) => {
      if (linked === undefined) return undefined;
      const translations = parts[d]![u]!.ranked.map((p) => p.text);
      const sentences = ids.map((id, k) =>
        linked.cut[k] ? alignmentOf(answers.get(id)) : wholeLink(linked.pieces[k]!, translations[k]!),
      );
      return joinLinks({ pieces: linked.pieces, separators }, translations, sentences, units[u]!);
    });
    if (request.alignment) alignments.push(links[0] ?? []);
    return contentOf(text, format, request).render(units, links);
  });
  const response: Record<string, unknown> = { translated: isArray ? translated : translated[0] };
  if (request.alignment) response.alignment = isArray ? alignments : alignments[0];
  if (alternatives !== 0) {
    // Plain text only: one part per text.
    const ranked = parts.map(([{ ranked, join }]) =>
      joinAlternatives(ranked, alternatives, join).map(({ text, score }) => ({ translated: text, score })),
    );
    response.alternatives = isArray ? ranked : ranked[0];
  }
  if (request.src_lang === AUTO_LANGUAGE) {
    response.detected_src_lang = isArray ? docs.map((d) => d.lang) : docs[0]!.lang;
  }
  return response;
}

/** A sentence's job, with the target terms its glossary holds it to. */
function sentenceItem(lang: string, sentence: string, glossary: GlossaryEntries | undefined): SentenceItem {
  const terms = glossary === undefined ? [] : termsFor(sentence, glossary);
  if (terms.length > MAX_TERMS_PER_SENTENCE) {
    throw new ServeError(
      'BAD_REQUEST',
      `The sentence ${JSON.stringify(sentence.slice(0, 60))} holds ${terms.length} glossary terms; at most ${MAX_TERMS_PER_SENTENCE} are enforced in one sentence.`,
    );
  }
  return terms.length === 0 ? { srcLang: lang, text: sentence } : { srcLang: lang, text: sentence, terms };
}

function contentOf(text: string, format: TextFormat, request: TranslationRequest): Content {
  const { ignore_tags: ignoreTags = [], fragment } = request;
  switch (format) {
    case 'text':
      return { texts: [text], render: (translations) => translations[0]! };
    case 'html':
    case 'xml':
      return planMarkup(text, format, {
        ignoreTags,
        ...(fragment === undefined ? {} : { fragment }),
        ...(request.non_splitting_tags === undefined ? {} : { nonSplittingTags: request.non_splitting_tags }),
        ...(request.splitting_tags === undefined ? {} : { splittingTags: request.splitting_tags }),
        ...(request.outline_detection === undefined ? {} : { outlineDetection: request.outline_detection }),
      });
    case 'srt':
    case 'vtt':
      return planSubtitles(text, format);
  }
}

/** The text as one piece, its surrounding whitespace kept as separators. */
function wholeText(text: string): Segments {
  const start = text.length - text.trimStart().length;
  const end = text.trimEnd().length;
  return { pieces: [text.slice(start, end)], separators: [text.slice(0, start), text.slice(end)] };
}

/** Text `i`'s `alignment_edges`, when the request gives them. */
function givenEdges(request: TranslationRequest, i: number): Edges | undefined {
  const given = request.alignment_edges;
  if (given === undefined) return undefined;
  return Array.isArray(request.src_text) ? (given as number[][])[i] : (given as number[]);
}

/** A sentence's word alignment, when its answer has one. */
function alignmentOf(value: unknown): Links | undefined {
  const links = value !== null && typeof value === 'object' ? (value as { alignment?: unknown }).alignment : undefined;
  return Array.isArray(links) ? (links as Links) : undefined;
}

/** A sentence's answer as the join reads it: its translation, with beam search's runners-up when asked for. */
function rankedPart(value: unknown): RankedPart {
  const { translated, score = 0, alternatives } = (value ?? {}) as { translated?: unknown } & Partial<RankedPart>;
  if (typeof translated !== 'string')
    throw new ServeError('INTERNAL', 'The translation handler answered without text.');
  return { text: translated, score, ...(alternatives ? { alternatives } : {}) };
}

/** The language of `text` for `src_lang: "auto"`. @throws ServeError BAD_REQUEST / UNKNOWN_LANGUAGE */
function detected(text: string, name: string, readable: readonly string[] | undefined, best: boolean): string {
  // A best guess is made among the languages the model reads, so it is one it can translate from.
  const guess = best
    ? detectLanguage(text, readable ?? DETECTABLE_LANGUAGES, { guess: true })
    : detectLanguage(text, DETECTABLE_LANGUAGES);
  if (guess.lang === null) {
    // Nothing to tell by (digits, punctuation, a word the detector does not know): a guess is still asked for, as
    // DeepL and LibreTranslate answer every text, so English where the model reads it (LibreTranslate's own
    // fallback), else the first language it reads.
    if (best) return readable === undefined || readable.includes('en') ? 'en' : (readable[0] ?? 'en');
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
