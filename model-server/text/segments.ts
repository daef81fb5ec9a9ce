/**
 * @module model-server/text/segments — the lossless "pieces and the whitespace between them" shape
 * shared by sentence segmentation and long-sentence splitting.
 *
 * A text is cut into pieces to translate and the exact separators around them:
 *
 *     separators[0] pieces[0] separators[1] pieces[1] … pieces[n-1] separators[n]
 *
 * so `joinSegments` gives back the input byte for byte. Pieces are never empty and have no leading or
 * trailing whitespace; separators are whitespace only (possibly empty). A whitespace-only text has no
 * piece and one separator: the text itself.
 */

/** Pieces to translate and the exact whitespace around them; `separators.length === pieces.length + 1`. */
export interface Segments {
  /** Non-empty, trimmed pieces of text, in order. */
  readonly pieces: readonly string[];
  /** `separators[i]` comes before `pieces[i]`; the last one trails the last piece. Whitespace only. */
  readonly separators: readonly string[];
}

/**
 * Whitespace as separators see it: JavaScript's `\s` plus U+0085 (NEXT LINE), which `\s` leaves out
 * but Unicode and ICU treat as a line break.
 */
export const WHITESPACE = '\\s\\u0085';

const LEADING_WS = new RegExp(`^[${WHITESPACE}]*`, 'u');
const TRAILING_WS = new RegExp(`[${WHITESPACE}]*$`, 'u');

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

  /** Appends whitespace to the separator being built. */
  gap(whitespace: string): void {
    this.#separators[this.#separators.length - 1] += whitespace;
  }

  /** Appends a piece of text; its leading and trailing whitespace become separator text. */
  text(text: string): void {
    const lead = LEADING_WS.exec(text)![0];
    if (lead.length === text.length) {
      this.gap(text);
      return;
    }
    const trail = TRAILING_WS.exec(text)![0];
    this.gap(lead);
    this.#pieces.push(text.slice(lead.length, text.length - trail.length));
    this.#separators.push(trail);
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
