/**
 * @module common/translation-contract — what the router and the model server agree a translation request's
 * fields may hold: language codes, and what `format` may say a text is (plain text, a markup document whose text
 * alone is translated, or a subtitle file whose cue text alone is). The router checks them; the model server's
 * translation plan acts on them.
 */

/** Language codes as the model server and setup_config.json spell them (`en`, `ko`, `zh`, …). */
export const LANGUAGE_CODE = /^[a-z]{2,3}$/;

/** Most alternative translations a sentence may ask for: each is a beam, and beams are decoder rows. */
export const MAX_ALTERNATIVES = 8;

export const TEXT_FORMATS = ['text', 'html', 'xml', 'srt', 'vtt'] as const;
export type TextFormat = (typeof TEXT_FORMATS)[number];
