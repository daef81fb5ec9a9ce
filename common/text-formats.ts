/**
 * @module common/text-formats — what a translation request's `format` may say its texts are: plain text, a
 * markup document (only its text is translated) or a subtitle file (only its cue text). The router checks the
 * field, the model server's translation plan acts on it.
 */
export const TEXT_FORMATS = ['text', 'html', 'xml', 'srt', 'vtt'] as const;
export type TextFormat = (typeof TEXT_FORMATS)[number];
