/**
 * @module router/translate-request — what `POST /` accepts: its content types, and its body parsed against the
 * languages served (the checks themselves are the contract both hops share, common/translation-contract.ts).
 */
import { createRequestParser, type RequestParser, type TranslateInput } from '../common/translation-contract.js';

export { AUTO_LANGUAGE, LANGUAGE_CODE, type TranslateInput } from '../common/translation-contract.js';

/**
 * Content types a JSON body may arrive with. Besides JSON itself: none, `text/plain`, and
 * `application/x-www-form-urlencoded` — what `curl -d '{…}'` sends, and what the seed accepted (it parsed
 * every body as JSON). Anything else (multipart forms, XML, …) is a 415.
 */
export function acceptsContentType(header: string | undefined): boolean {
  if (header === undefined || header.trim() === '') return true;
  const mime = header.split(';')[0]!.trim().toLowerCase();
  return (
    mime === 'application/json' ||
    /^application\/[\w.+-]+\+json$/.test(mime) ||
    mime === 'text/plain' ||
    mime === 'application/x-www-form-urlencoded'
  );
}

const parsers = new WeakMap<readonly string[], RequestParser<TranslateInput>>();

/**
 * Validate a parsed JSON body against the languages served (the keys of setup_config.json), with the parser kept
 * per `languages` array. @throws ServeError BAD_REQUEST naming every bad field, or UNKNOWN_LANGUAGE when only
 * `tgt_lang` is wrong.
 */
export function parseTranslateRequest(body: unknown, languages: readonly string[]): TranslateInput {
  let parse = parsers.get(languages);
  if (parse === undefined) {
    parse = createRequestParser(languages);
    parsers.set(languages, parse);
  }
  return parse(body);
}
