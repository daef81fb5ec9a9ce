/**
 * @module router/apis/document-pieces — how a document job gets its file translated (`translateInPieces`): whole, or
 * when the model server finds it too large or too slow, cut in two and each half so; refusals under load waited out.
 * Where a file may be cut, and how the translated pieces join again (`cutDocument`): plain text where the model
 * server's segmentation parts it, between paragraphs, else lines, else sentences; SRT and WebVTT between cues (each piece a subtitle file of its own,
 * WebVTT's header lent to the second). Markup is never cut: a piece of an element would not parse.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { ServeError, toServeError } from '../../common/errors.js';
import { cutNearMiddle } from '../../model-server/text/segment.js';

/** What a document is, as the model server's `format` names it. */
export type DocumentFormat = 'text' | 'html' | 'srt' | 'vtt';

/**
 * A document cut in two: each piece translated alone, then `join` of their translations is the document's. A piece is
 * a text, or a batch of an Office file's units (./document-office.ts).
 */
export interface Cut<T = string> {
  pieces: [T, T];
  join(translated: readonly [T, T]): T;
}

const VTT_HEADER = 'WEBVTT\n\n';

// A line break (LF, CRLF or CR: Windows and old Mac files too, as planSubtitles reads them), a line of spaces or
// tabs, and another line break. A CR is never read as a break of its own before an LF: CRLF is one line break.
const BLANK_LINE = /(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r(?!\n)|\n)/;
// Before a cue: a blank line, then the block's first character.
const BLOCK_START = /(?:\r\n|\r(?!\n)|\n)[ \t]*(?:\r\n|\r(?!\n)|\n)(?=\S)/g;

/** Waits between tries while the model servers refuse or are away: doubled from 1 s up to this, ms. */
export const MAX_RETRY_WAIT_MS = 30_000;

export interface PieceTranslation<T = string> {
  /** One request for one piece: its translation, or the router's error for it. */
  translate(piece: T): Promise<T>;
  /** The piece cut in two, or null when it cannot be (`cutDocument` for a text of a format). */
  cut(piece: T): Cut<T> | null;
  /** Past this (epoch ms) the document has failed. */
  deadlineMs: number;
  /** Aborted: no more tries (the router is closing). */
  signal: AbortSignal;
  /** Requests made so far, for the log. */
  requests: { count: number };
}

/**
 * `text` translated: whole, or cut in two and each half so when the model server finds it too large (413) or too
 * slow (504); a refusal or a model server away (502, 503) waited out, by its Retry-After or doubling from 1 s.
 * @throws ServeError the error that ended it: a piece that cannot be cut, a client error, REQUEST_TIMEOUT past the
 *   deadline
 */
export async function translateInPieces<T>(piece: T, job: PieceTranslation<T>): Promise<T> {
  for (let waitMs = 1_000; ; waitMs = Math.min(2 * waitMs, MAX_RETRY_WAIT_MS)) {
    if (Date.now() > job.deadlineMs)
      throw new ServeError('REQUEST_TIMEOUT', 'The document was not translated in time.');
    try {
      job.requests.count += 1;
      return await job.translate(piece);
    } catch (err) {
      if (job.signal.aborted) throw err;
      const error = toServeError(err);
      if (error.code === 'PAYLOAD_TOO_LARGE' || error.code === 'REQUEST_TIMEOUT') {
        const cut = job.cut(piece);
        if (cut === null) throw error;
        const first = await translateInPieces(cut.pieces[0], job);
        return cut.join([first, await translateInPieces(cut.pieces[1], job)]);
      }
      if (error.status !== 502 && error.status !== 503) throw error;
      const wait = error.retryAfterS === undefined ? waitMs : Math.min(error.retryAfterS * 1000, MAX_RETRY_WAIT_MS);
      const left = Math.max(0, Math.min(wait, job.deadlineMs - Date.now()));
      await sleep(left, undefined, { signal: job.signal }).catch(() => undefined);
    }
  }
}

/**
 * Cut `text` in two near its middle where its format allows it; null when it cannot be (markup, or no place to
 * cut). The pieces, joined as they are, are `text` (for WebVTT, once the lent header is taken off the second).
 * `lang`: the text's language, whose abbreviations end no sentence ('auto': none known).
 */
export function cutDocument(text: string, format: DocumentFormat, lang: string): Cut | null {
  const concat = ([a, b]: readonly [string, string]) => a + b;
  switch (format) {
    case 'html':
      return null;
    case 'text': {
      const at = cutNearMiddle(text, lang);
      return at === null ? null : { pieces: [text.slice(0, at), text.slice(at)], join: concat };
    }
    case 'srt':
    case 'vtt': {
      // Cues are blocks between blank lines; a cut before a block's first line leaves two whole files. WebVTT's
      // first block is its header, which the second piece needs too: the cut must come after it.
      const first = format === 'vtt' ? firstBlockEnd(text) : 0;
      if (first === null) return null;
      const at = nearestMiddle(text, BLOCK_START, first);
      if (at === null) return null;
      if (format === 'srt') return { pieces: [text.slice(0, at), text.slice(at)], join: concat };
      return {
        pieces: [text.slice(0, at), VTT_HEADER + text.slice(at)],
        join: ([a, b]) => a + (b.startsWith(VTT_HEADER) ? b.slice(VTT_HEADER.length) : b),
      };
    }
  }
}

/** The end of the first match of `boundary` closest to the middle of `text` (after `from`), inside it; null if none. */
function nearestMiddle(text: string, boundary: RegExp, from = 0): number | null {
  const middle = text.length / 2;
  let best: number | null = null;
  for (const match of text.matchAll(boundary)) {
    const at = match.index + match[0].length;
    if (match.index < from || at <= 0 || at >= text.length) continue;
    if (best === null || Math.abs(at - middle) < Math.abs(best - middle)) best = at;
    // Matches come in order: once past the middle, later ones are only farther.
    if (at > middle) break;
  }
  return best;
}

/** Where WebVTT's header block ends (its blank line), or null when the file is only a header. */
function firstBlockEnd(text: string): number | null {
  const match = BLANK_LINE.exec(text);
  return match === null ? null : match.index + match[0].length;
}
