/**
 * @module model-server/text/segments — the lossless "pieces and the whitespace between them" shape
 * shared by sentence segmentation and long-sentence splitting.
 *
 * A text is cut into pieces to translate and the exact separators around them:
 *
 *     separators[0] pieces[0] separators[1] pieces[1] … pieces[n-1] separators[n]
 *
 * so `joinSegments` gives back the input byte for byte. Pieces are never empty and have no leading or
 * trailing whitespace or bidirectional controls; separators hold only those (possibly nothing). A text of
 * nothing else has no piece and one separator: the text itself.
 *
 * Why bidi controls go with the separators: a direction mark, embedding or isolate at a sentence's edge says how
 * the sentences sit in the line, not what a sentence says. Inside a piece it would reach the model, which drops or
 * moves it; in a separator it is kept byte for byte and stays exactly where it was around the translations.
 */

/** Pieces to translate and the exact whitespace around them; `separators.length === pieces.length + 1`. */
export interface Segments {
  /** Non-empty, trimmed pieces of text, in order. */
  readonly pieces: readonly string[];
  /** `separators[i]` comes before `pieces[i]`; the last one trails the last piece. Whitespace and bidi controls. */
  readonly separators: readonly string[];
}

/**
 * Whitespace as separators see it: JavaScript's `\s` plus U+0085 (NEXT LINE), which `\s` leaves out
 * but Unicode and ICU treat as a line break.
 */
export const WHITESPACE = '\\s\\u0085';

const WHITESPACE_CHAR = new RegExp(`[${WHITESPACE}]`, 'u');

/**
 * Bidirectional formatting characters: the marks (ALM U+061C, LRM U+200E, RLM U+200F), embeddings and overrides
 * (U+202A-U+202E) and isolates (U+2066-U+2069). Each is one UTF-16 unit.
 */
export const BIDI_CONTROLS = '\\u061c\\u200e\\u200f\\u202a-\\u202e\\u2066-\\u2069';

const SEPARATOR_CHAR = new RegExp(`[${WHITESPACE}${BIDI_CONTROLS}]`, 'u');

/** Whether `char` (one UTF-16 unit) belongs in a separator: whitespace or a bidi control. */
export function isSeparatorChar(char: string): boolean {
  return SEPARATOR_CHAR.test(char);
}

/** The index just past the separator characters (whitespace, bidi controls) that start `text`. */
export const leadingSeparatorEnd = (text: string): number => leadingEnd(text, isSeparatorChar);

/** The index where the separator characters that end `text` start (`text.length` when there are none). */
export const trailingSeparatorStart = (text: string): number => trailingStart(text, isSeparatorChar);

// Whitespace is found by scanning from an end rather than with `/\s*$/`-style expressions: those retry
// from every position and take quadratic time on a long run of spaces inside the text (a request body
// can hold one). Every whitespace character is a single UTF-16 unit, so scanning units is exact.

/** Whether `char` (one UTF-16 unit) is whitespace in the sense of `WHITESPACE`. */
export function isWhitespace(char: string): boolean {
  return WHITESPACE_CHAR.test(char);
}

/** The index just past the whitespace that starts `text`. */
export const leadingWhitespaceEnd = (text: string): number => leadingEnd(text, isWhitespace);

/** The index where the whitespace that ends `text` starts (`text.length` when there is none). */
export const trailingWhitespaceStart = (text: string): number => trailingStart(text, isWhitespace);

function leadingEnd(text: string, is: (char: string) => boolean): number {
  let i = 0;
  while (i < text.length && is(text[i]!)) i++;
  return i;
}

function trailingStart(text: string, is: (char: string) => boolean): number {
  let i = text.length;
  while (i > 0 && is(text[i - 1]!)) i--;
  return i;
}

/** The input text of `segments`, restored exactly. */
export function joinSegments(segments: Segments): string {
  let text = segments.separators[0] ?? '';
  for (let i = 0; i < segments.pieces.length; i++) text += segments.pieces[i] + (segments.separators[i + 1] ?? '');
  return text;
}

/**
 * Accumulates `Segments` left to right. `text` may carry whitespace at either end: it is moved into the
 * separators, so callers can feed raw slices and still get trimmed pieces.
 */
export class SegmentsBuilder {
  readonly #pieces: string[] = [];
  readonly #separators: string[] = [''];

  /** Pieces so far. */
  get pieceCount(): number {
    return this.#pieces.length;
  }

  /** Appends whitespace to the separator being built. */
  gap(whitespace: string): void {
    this.#separators[this.#separators.length - 1] += whitespace;
  }

  /** Appends a piece of text; its leading and trailing whitespace and bidi controls become separator text. */
  text(text: string): void {
    const start = leadingSeparatorEnd(text);
    if (start === text.length) {
      this.gap(text);
      return;
    }
    const end = trailingSeparatorStart(text);
    this.gap(text.slice(0, start));
    this.#pieces.push(text.slice(start, end));
    this.#separators.push(text.slice(end));
  }

  /** Appends every piece and separator of `segments`, merging the separators where they meet. */
  append(segments: Segments): void {
    this.gap(segments.separators[0] ?? '');
    for (let i = 0; i < segments.pieces.length; i++) {
      this.#pieces.push(segments.pieces[i]!);
      this.#separators.push(segments.separators[i + 1] ?? '');
    }
  }

  build(): Segments {
    return Object.freeze({
      pieces: Object.freeze([...this.#pieces]),
      separators: Object.freeze([...this.#separators]),
    });
  }
}
