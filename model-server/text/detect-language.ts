/**
 * @module model-server/text/detect-language — guesses the source language for `src_lang: "auto"`, or
 * says it is unsure.
 *
 * Detection is tinyld's (n-gram profiles of 60+ languages, pure JavaScript), restricted to the caller's
 * candidates; docs/text.md compares it with franc, cld3 and eld on the served languages. On top of it
 * this module decides when a guess is worth acting on: too little text, or two candidates scoring
 * close together, give `lang: null`, and the caller asks the client for `src_lang`.
 */
import { detectAll, supportedLanguages, toISO2 } from 'tinyld';

/** A guess: an M2M100 (ISO 639-1) code from the candidates, or null when unsure. */
export interface LanguageGuess {
  /** The detected language, or null when the text is too short or too ambiguous to tell. */
  readonly lang: string | null;
  /**
   * How far the best candidate's score is ahead of the runner-up's, from 0 (a tie, or no evidence) to
   * 1 (no other candidate scored): `1 - second / best`.
   */
  readonly confidence: number;
}

/**
 * The least evidence detected on: letters after URLs and e-mail addresses are removed, each Han, kana
 * or Hangul character counting as 3 (one carries about as much as a short Latin syllable). Below it,
 * greetings such as "Hello" or "Bom dia" are guessed wrong as often as right.
 */
export const MIN_EVIDENCE = 12;
/** The least confidence for a guess to be returned; below it `lang` is null. */
export const MIN_CONFIDENCE = 0.5;
/**
 * Only the first this many characters are examined, which bounds the cost on a long document (tinyld
 * is linear in its input) while leaving ample evidence.
 */
export const MAX_SAMPLE_CHARS = 2000;

// URLs and e-mail addresses are Latin-letter noise in text of any language. Tested per token (the
// sample split at whitespace): one expression over the whole text, such as /\S+@\S+\.\S+/, backtracks
// polynomially on a long run of "@"s.
const NOISE_TOKEN = /^(?:[\p{Ps}\p{Pi}"'<]*)(?:https?:\/\/|www\.)|@/iu;
const LETTER = /\p{L}/gu;
const DENSE_LETTER = /[\p{sc=Han}\p{sc=Hiragana}\p{sc=Katakana}\p{sc=Hangul}]/u;
// tinyld lists its languages in ISO 639-3 and answers in ISO 639-1, the codes M2M100 uses.
const SUPPORTED: ReadonlySet<string> = new Set(supportedLanguages.map(toISO2));
/**
 * Every language the identifier knows (M2M100 codes). Detecting among these and then checking that the
 * answer is served tells "Dutch, which we do not serve" apart from "unsure".
 */
export const DETECTABLE_LANGUAGES: readonly string[] = [...SUPPORTED];

function evidence(text: string): number {
  let total = 0;
  for (const [letter] of text.matchAll(LETTER)) total += DENSE_LETTER.test(letter) ? 3 : 1;
  return total;
}

/**
 * Detects the language of `text` among `candidates` (M2M100 codes, e.g. the served languages). Never
 * returns a language outside `candidates`; candidates tinyld does not know are never returned.
 *
 * @returns `{ lang: null }` when the text has under `MIN_EVIDENCE` of letters, when no candidate
 *   scores, or when confidence is under `MIN_CONFIDENCE`; otherwise the best candidate. With `guess`, the best
 *   candidate whenever the text has a letter and one scores (what DeepL's and LibreTranslate's clients expect).
 *
 */
export function detectLanguage(
  text: string,
  candidates: readonly string[],
  options: { guess?: boolean } = {},
): LanguageGuess {
  const only = candidates.filter((lang) => SUPPORTED.has(lang));
  const sample = text
    .slice(0, MAX_SAMPLE_CHARS)
    .split(/\s+/u)
    .filter((token) => !NOISE_TOKEN.test(token))
    .join(' ');
  const guess = options.guess === true;
  if (only.length === 0 || evidence(sample) < (guess ? 1 : MIN_EVIDENCE)) return { lang: null, confidence: 0 };
  const [best, second] = detectAll(sample, { only });
  if (best === undefined || best.accuracy <= 0) return { lang: null, confidence: 0 };
  const confidence = 1 - (second?.accuracy ?? 0) / best.accuracy;
  return { lang: guess || confidence >= MIN_CONFIDENCE ? best.lang : null, confidence };
}
