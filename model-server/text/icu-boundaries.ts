/**
 * @module model-server/text/icu-boundaries — ICU segment boundaries of a long text in linear time.
 *
 * V8's `Intl.Segmenter` spends time proportional to the whole input on every segment it returns
 * (Node 20: 40,000 graphemes take 0.5 s, 80,000 take 1.6 s), so a 1 MiB request body on one line would
 * take minutes. `segmentBoundaries` feeds it windows of `windowChars` instead and stitches the results.
 *
 * ICU decides a boundary from a few characters on either side (a terminator, closing marks and spaces
 * before it; spaces, digits or punctuation up to a lowercase letter after it). A boundary is therefore
 * only taken from a window when it lies at least `marginChars` from an edge the window cut, and the next
 * window starts at the last boundary taken (where ICU's own context restarts too). A stretch with no
 * boundary is crossed by windows that overlap by twice the margin.
 */

/** Window sizes, in UTF-16 units; tests shrink them to exercise the stitching. */
export interface BoundaryWindow {
  /** Characters given to ICU at once. Default 1024. */
  readonly windowChars: number;
  /** Context kept on either side of a cut window edge. Default 128; under a third of `windowChars`. */
  readonly marginChars: number;
}

const DEFAULT_WINDOW: BoundaryWindow = { windowChars: 1024, marginChars: 128 };

/**
 * The indices where a segment of `text` starts, excluding 0 and `text.length`, in increasing order: the
 * same as `[...segmenter.segment(text)].map((s) => s.index).slice(1)` for ordinary text, in time
 * linear in `text.length`.
 */
export function segmentBoundaries(
  segmenter: Intl.Segmenter,
  text: string,
  window: BoundaryWindow = DEFAULT_WINDOW,
): number[] {
  const boundaries: number[] = [];
  for (const at of boundarySteps(segmenter, text, window)) if (at !== undefined) boundaries.push(at);
  return boundaries;
}

/**
 * `segmentBoundaries` one window at a time: yields each boundary in order, and `undefined` after each window
 * given to ICU, so a caller can pause between windows (a long text without boundaries takes many windows).
 */
export function* boundarySteps(
  segmenter: Intl.Segmenter,
  text: string,
  { windowChars, marginChars }: BoundaryWindow = DEFAULT_WINDOW,
): Generator<number | undefined> {
  if (marginChars * 3 >= windowChars) throw new RangeError('marginChars must be under a third of windowChars');
  // `from` is where the window starts; `atBoundary` says whether a segment starts there (so ICU sees
  // the same context as on the whole text) or the window was started mid-segment.
  let from = 0;
  let atBoundary = true;
  for (;;) {
    const to = Math.min(text.length, from + windowChars);
    let lastTaken: number | undefined;
    for (const { index } of segmenter.segment(text.slice(from, to))) {
      const at = from + index;
      if (index === 0 || (!atBoundary && index < marginChars)) continue;
      if (to < text.length && at > to - marginChars) break;
      lastTaken = at;
      yield at;
    }
    yield undefined;
    if (to === text.length) return;
    if (lastTaken !== undefined) {
      from = lastTaken;
      atBoundary = true;
    } else {
      from = to - 2 * marginChars;
      atBoundary = false;
    }
  }
}
