/**
 * @module model-server/text/subtitles — SRT and WebVTT files translated cue by cue, their timing untouched.
 *
 * Only cue text changes: numbering, identifiers, timing lines and their cue settings, WebVTT's header, NOTE,
 * STYLE and REGION blocks, blank lines and line endings are the input's own. A sentence that runs over several
 * cues (no sentence-final mark at a cue's end) is translated whole, then shared out over its cues in proportion
 * to their source lengths, cut at word boundaries (at characters for scripts written without spaces); a cue of
 * several lines keeps its number of lines while the translation has a word for each. Formatting tags that wrap a
 * line's text (`<i>…</i>`, `<v Bob>`, an italic run over several lines) stay where they are; a tag that marks only
 * some of its words goes, with its partner: the translation has no word alignment to put it back by.
 */
import { ServeError } from '../../common/errors.js';

export type SubtitleFormat = 'srt' | 'vtt';

/** Texts to translate (one per sentence group of cues), and the file rebuilt from their translations. */
export interface SubtitlePlan {
  readonly texts: readonly string[];
  render(translations: readonly string[]): string;
}

const SRT_TIMING = /^\s*\d+:\d{2}:\d{2}[,.]\d{1,3}\s*-->\s*\d+:\d{2}:\d{2}[,.]\d{1,3}(?:\s.*)?$/;
const VTT_TIMING = /^(?:\d+:)?\d{2}:\d{2}\.\d{3}[ \t]+-->[ \t]+(?:\d+:)?\d{2}:\d{2}\.\d{3}(?:[ \t].*)?$/;
const VTT_HEADER = /^\uFEFF?WEBVTT(?:[ \t].*)?$/;
const VTT_UNTRANSLATED_BLOCK = /^(?:NOTE|STYLE|REGION)(?:[ \t].*)?$/;
// What ends a tag's name (`v` of `<v Bob>`, `c` of `<c.yellow>`).
const TAG_NAME_END = /[\s.>/]/;
const SENTENCE_END = /[.!?…。！？‼⁇⁈⁉؟।॥][\p{Pe}\p{Pf}"']*$/u;
const WORDS = /\p{L}/u;
// A file without sentence punctuation would otherwise be one group: a group's translation is one engine row
// (or the worker's split of it), so it stays near a sentence's length.
const MAX_CUES_PER_GROUP = 8;

/** One text line of a cue: its formatting tags apart from its words. */
interface CueLine {
  index: number;
  open: string;
  words: string;
  close: string;
}

/**
 * Plan the translation of an SRT or WebVTT file.
 * @throws ServeError BAD_REQUEST naming the cue and line that is not a cue (no timing line), or a WebVTT file
 *   without its `WEBVTT` header.
 */
export function planSubtitles(source: string, format: SubtitleFormat): SubtitlePlan {
  const lines = source.split(/(?<=\n)|(?<=\r)(?!\n)/);
  const body = lines.map((line) => line.replace(/\r?\n$|\r$/, ''));
  const cues = parseCues(body, format);
  const groups: CueLine[][][] = [];
  let open: CueLine[][] | undefined;
  for (const cue of cues) {
    const words = cue.map((line) => line.words).join(' ');
    if (!WORDS.test(words)) {
      open = undefined;
      continue;
    }
    if (open === undefined || open.length >= MAX_CUES_PER_GROUP) groups.push((open = []));
    open.push(cue);
    if (SENTENCE_END.test(words)) open = undefined;
  }
  const cueText = (cue: CueLine[]) => cue.map((line) => line.words).join(' ');
  return {
    texts: groups.map((group) => group.map(cueText).join(' ')),
    render(translations) {
      if (translations.length !== groups.length) {
        throw new RangeError(`planSubtitles: ${translations.length} translations for ${groups.length} groups`);
      }
      const out: (string | null)[] = [...body];
      groups.forEach((group, g) => {
        const perCue = distribute(
          translations[g]!.trim(),
          group.map((cue) => cueText(cue).length),
        );
        group.forEach((cue, c) => {
          // A cue keeps its lines while the translation has a word for each; surplus lines go, whole.
          // Only a translation with fewer characters than its cues leaves one empty: it shows an ellipsis.
          const text = perCue[c]!.trim() || '…';
          const kept = cue.slice(0, Math.max(1, Math.min(cue.length, text.split(' ').length)));
          const perLine = distribute(
            text,
            kept.map((line) => Math.max(1, line.words.length)),
          );
          cue.forEach((line, l) => {
            out[line.index] = l < kept.length ? line.open + (perLine[l]!.trim() || '…') + line.close : null;
          });
        });
      });
      return out.map((line, i) => (line === null ? '' : line + lines[i]!.slice(body[i]!.length))).join('');
    },
  };
}

/** Every cue's text lines, in order. */
function parseCues(lines: readonly string[], format: SubtitleFormat): CueLine[][] {
  const cues: CueLine[][] = [];
  let i = 0;
  const blank = (k: number) => lines[k]!.trim() === '';
  if (format === 'vtt') {
    if (lines.length === 0 || !VTT_HEADER.test(lines[0]!)) {
      throw new ServeError('BAD_REQUEST', 'A WebVTT file must start with a "WEBVTT" line.');
    }
    while (i < lines.length && !blank(i)) i++;
  }
  const timing = format === 'vtt' ? VTT_TIMING : SRT_TIMING;
  let cueNumber = 0;
  while (i < lines.length) {
    if (blank(i)) {
      i++;
      continue;
    }
    const start = i;
    while (i < lines.length && !blank(i)) i++;
    if (format === 'vtt' && VTT_UNTRANSLATED_BLOCK.test(lines[start]!)) continue;
    cueNumber++;
    const at = timing.test(lines[start]!) ? start : start + 1 < i && timing.test(lines[start + 1]!) ? start + 1 : -1;
    if (at < 0) {
      const example = format === 'vtt' ? '00:00:01.000 --> 00:00:02.500' : '00:00:01,000 --> 00:00:02,500';
      throw new ServeError(
        'BAD_REQUEST',
        `Subtitle cue ${cueNumber} (line ${start + 1}) has no timing line such as "${example}": ${JSON.stringify(lines[start]!.slice(0, 80))}.`,
      );
    }
    const cue: CueLine[] = [];
    for (let k = at + 1; k < i; k++) cue.push({ index: k, ...lineParts(lines[k]!) });
    if (cue.length > 0) cues.push(cue);
  }
  return cues;
}

/** A formatting tag of a cue line: `<` to the next `>`. */
interface Tag {
  start: number;
  end: number;
  closing: boolean;
  name: string;
}

/**
 * A line's tags, left to right, in one scan: patterns that look for tags (`<[^>]*>`, `(?:<\/[^>]*>)+$`) start again
 * at every `<` and cost quadratic or cubic time in a run of them (`<` ×6,000 took 50 s).
 */
function tagsOf(line: string): Tag[] {
  const tags: Tag[] = [];
  for (let open = line.indexOf('<'); open >= 0;) {
    const end = line.indexOf('>', open + 1) + 1;
    // No `>` after this `<`, so none after a later one either.
    if (end === 0) break;
    const closing = line[open + 1] === '/';
    const nameStart = open + (closing ? 2 : 1);
    let nameEnd = nameStart;
    while (nameEnd < end - 1 && !TAG_NAME_END.test(line[nameEnd]!)) nameEnd++;
    tags.push({ start: open, end, closing, name: line.slice(nameStart, nameEnd).toLowerCase() });
    open = line.indexOf('<', end);
  }
  return tags;
}

/**
 * A cue line's words, and the tags at its start and end that wrap them all. A start tag closed inside the words, or
 * an end tag opened there, marks only some words and goes with its partner, as every tag inside does; a tag left
 * open or closing an earlier line's (an italic run over several lines, WebVTT's `<v Bob>` without `</v>`) stays.
 */
function lineParts(line: string): Omit<CueLine, 'index'> {
  const tags = tagsOf(line);
  // Regions: 0 the tags the line starts with, 2 the end tags it ends with, 1 those among the words.
  let lead = 0;
  while (lead < tags.length && tags[lead]!.start === (lead === 0 ? 0 : tags[lead - 1]!.end)) lead++;
  let trail = tags.length;
  while (trail > lead && tags[trail - 1]!.closing && tags[trail - 1]!.end === (tags[trail]?.start ?? line.length)) {
    trail--;
  }
  const region = (t: number) => (t < lead ? 0 : t < trail ? 1 : 2);
  // Each end tag pairs with the nearest start tag of its name still open before it (a stack per name: a line of
  // hostile tags costs linear time). Partners by index in a typed array: a Map of tens of thousands of entries
  // costs several times more per entry than one of a few thousand.
  const partner = new Int32Array(tags.length).fill(-1);
  const opened = new Map<string, number[]>();
  tags.forEach((tag, t) => {
    const stack = opened.get(tag.name) ?? [];
    opened.set(tag.name, stack);
    if (!tag.closing) return void stack.push(t);
    const o = stack.pop();
    if (o !== undefined) [partner[t], partner[o]] = [o, t];
  });
  const kept = (r: number) =>
    tags
      .filter((tag, t) => region(t) === r && (partner[t] === -1 || region(partner[t]!) !== 1))
      .map((tag) => line.slice(tag.start, tag.end))
      .join('');
  // The words: the text between the tags from the end of the leading ones to the start of the trailing ones.
  let words = '';
  let at = lead === 0 ? 0 : tags[lead - 1]!.end;
  for (let t = lead; t < trail; t++) {
    words += line.slice(at, tags[t]!.start);
    at = tags[t]!.end;
  }
  words += line.slice(at, trail < tags.length ? tags[trail]!.start : line.length);
  return { open: kept(0), words: words.replace(/\s+/g, ' ').trim(), close: kept(2) };
}

/**
 * `text` cut into `weights.length` non-empty pieces whose lengths follow the weights, at spaces when it has
 * enough words, else between characters. Text too short to give every piece a character leaves the last
 * pieces empty.
 */
export function distribute(text: string, weights: readonly number[]): string[] {
  const n = weights.length;
  if (n === 1) return [text];
  const words = text.split(' ').filter((w) => w !== '');
  const byWords = words.length >= n;
  const units = byWords ? words : Array.from(text);
  const joiner = byWords ? ' ' : '';
  // ends[u] = length of units[0..u] joined.
  const ends: number[] = [];
  let length = 0;
  units.forEach((unit, u) => ends.push((length += unit.length + (u > 0 ? joiner.length : 0))));
  const total = weights.reduce((a, b) => a + b, 0) || n;
  const pieces: string[] = [];
  let from = 0;
  let cumulative = 0;
  for (let k = 0; k < n - 1; k++) {
    cumulative += weights[k]!;
    const target = (length * cumulative) / total;
    // Leave at least one unit for each later piece; take at least one here.
    const last = units.length - (n - 1 - k);
    let cut = Math.min(from + 1, units.length);
    while (cut < last && Math.abs(ends[cut]! - target) < Math.abs(ends[cut - 1]! - target)) cut++;
    pieces.push(units.slice(from, cut).join(joiner));
    from = cut;
  }
  pieces.push(units.slice(from).join(joiner));
  return pieces;
}
