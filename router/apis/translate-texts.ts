/**
 * @module router/apis/translate-texts — what the DeepL and LibreTranslate rooms share: their parameters read from a
 * form or JSON body, and their texts translated through the router's own path (`parseTranslateRequest`, then
 * `UpstreamClient.translate`), so a compatible API is validated, routed, balanced and refused exactly like `POST /`.
 */
import type { Context } from 'hono';
import { ServeError, toServeError } from '../../common/errors.js';
import type { TextFormat } from '../../common/translation-contract.js';
import { decodeUtf8, parseJsonBody } from '../../common/strict-utf8.js';
import type { Logger } from '../../common/logger.js';
import { AUTO_LANGUAGE, parseTranslateRequest } from '../translate-request.js';
import type { RouterEnv } from '../router-env.js';
import type { UpstreamClient } from '../upstream/upstream.js';
import type { ApiAccess } from '../keys/api-access.js';
import type { GlossaryClient } from '../glossaries.js';
import type { DocumentJobs } from './documents.js';
import type { LanguageRoutes } from '../language-routes.js';

/** What the compatible APIs need from the router app. */
export interface ApiContext {
  /** Languages served by the default model (setup_config.json's `cuda_id` keys). */
  languages: readonly string[];
  /** Which entry serves a pair, and what every model can do (../language-routes.ts); absent: `languages` only. */
  routes?: LanguageRoutes | undefined;
  upstream: UpstreamClient;
  /** The router's body reader: at most ROUTER_MAX_BODY_BYTES, else ServeError PAYLOAD_TOO_LARGE. */
  readBody(c: Context<RouterEnv>): Promise<Uint8Array>;
  /** API keys, limits and usage; absent: keys are off (anyone may translate, nothing is counted). */
  access?: ApiAccess | undefined;
  /** Where a failure that is no API answer (a bug, a usage store that cannot be reached) is logged. */
  logger?: Logger | undefined;
  /** Largest number of characters one request may carry (the model server's MAX_REQUEST_CHARS), for clients. */
  maxRequestChars?: number | undefined;
  /** The model servers' glossaries; absent: glossary requests are answered as unavailable. */
  glossaries?: GlossaryClient | undefined;
  /** Document translation (./documents.ts); absent: document uploads are answered as unavailable. */
  documents?: DocumentJobs | undefined;
  /** PUBLIC_URL, which download URLs are built on; absent: the request's own origin (in-process tests). */
  publicUrl?: string | undefined;
}

/** One request's parameters: each name with its values in order (a repeated form field, or a JSON array). */
export type Params = ReadonlyMap<string, readonly unknown[]>;

/**
 * The parameters of a request: the query string's, then the body's (a JSON object, or a form), as both APIs take
 * them. @throws ServeError BAD_REQUEST / INVALID_JSON with what is wrong.
 */
export function readParams(url: string, contentType: string | undefined, body: Uint8Array): Map<string, unknown[]> {
  const params = new Map<string, unknown[]>();
  const add = (name: string, value: unknown) => {
    const values = params.get(name);
    if (values === undefined) params.set(name, [value]);
    else values.push(value);
  };
  for (const [name, value] of new URL(url).searchParams) add(name, value);
  if (body.byteLength === 0) return params;
  const text = decodeUtf8(body);
  if (isJsonType(contentType)) {
    const json = parseJsonBody(text);
    if (typeof json !== 'object' || json === null || Array.isArray(json))
      throw new ServeError('BAD_REQUEST', 'Request body must be a JSON object.');
    for (const [name, value] of Object.entries(json)) {
      if (Array.isArray(value)) params.set(name, [...(params.get(name) ?? []), ...(value as unknown[])]);
      else add(name, value);
    }
    return params;
  }
  for (const [name, value] of new URLSearchParams(text)) add(name, value);
  return params;
}

/**
 * Whether a body of `contentType` is read as JSON: `application/json` and `…+json`, as LibreTranslate's Flask
 * (`request.is_json`) reads them; any other type (`text/json` too) is read as a form.
 */
export function isJsonType(contentType: string | undefined): boolean {
  const mime = (contentType ?? '').split(';')[0]!.trim().toLowerCase();
  return mime === 'application/json' || mime.endsWith('+json');
}

/**
 * A file upload's parameters (the query string's, then the form's fields) and its `file` part, when the body is
 * multipart/form-data; any other body is read as `readParams` reads it, with no file.
 * @throws ServeError BAD_REQUEST when the multipart body does not parse
 */
export async function readUpload(
  c: Context<RouterEnv>,
  context: ApiContext,
): Promise<{ params: Map<string, unknown[]>; file: File | undefined }> {
  const body = await context.readBody(c);
  const contentType = c.req.header('content-type') ?? '';
  if (!/^multipart\/form-data\s*;/i.test(contentType))
    return { params: readParams(c.req.url, contentType, body), file: undefined };
  let form: FormData;
  try {
    // The body was read whole into its own buffer (readBody), an ArrayBuffer.
    form = await new Response(body as Uint8Array<ArrayBuffer>, { headers: { 'content-type': contentType } }).formData();
  } catch {
    throw new ServeError('BAD_REQUEST', 'Request body is not valid multipart/form-data.');
  }
  const params = readParams(c.req.url, undefined, new Uint8Array(0));
  let file: File | undefined;
  for (const [name, value] of form) {
    if (typeof value !== 'string') {
      if (name === 'file') file ??= value;
    } else params.set(name, [...(params.get(name) ?? []), value]);
  }
  return { params, file };
}

/** One string parameter: the first value, as a string (numbers and booleans of a JSON body as they print). */
export function param(params: Params, name: string): string | undefined {
  const value = params.get(name)?.[0];
  return value === undefined || value === null ? undefined : String(value);
}

export interface TextsRequest {
  texts: readonly string[];
  /** What the texts are (plain text when absent): `html`/`xml` have only their text translated. */
  format?: TextFormat;
  /** Markup elements whose content is kept as it is. */
  ignoreTags?: string[];
  /** XML texts may be fragments (DeepL's tag_handling=xml). */
  fragment?: boolean;
  /** XML: elements inside a sentence, elements that end one, and whether the others are told apart by content. */
  nonSplittingTags?: string[];
  splittingTags?: string[];
  outlineDetection?: boolean;
  /** Other translations wanted per text (plain text only). */
  alternatives?: number;
  /** Glossary entries (source term → target term) the translation must follow. */
  glossary?: Record<string, string>;
  /** A served language code, or `auto`. */
  srcLang: string;
  tgtLang: string;
  split?: 'sentences' | 'none';
  /**
   * Ask for each text's links to its translation (plain text only): `TextsReply.alignments`, word by word in the
   * sentences the text's edges (offsets where its formatting changes) cut, each other sentence linked whole.
   */
  alignmentEdges?: readonly (readonly number[])[];
  /**
   * A text whose source language (given or detected) is the target: `as-is` answers it as it is, `refuse` fails the
   * request (DeepL's answers to a text and to a document); absent, it is translated like any other.
   */
  sameLanguage?: 'as-is' | 'refuse';
  requestId: string;
  signal?: AbortSignal;
}

export interface TextsReply {
  translated: string[];
  /** Each text's other translations, best first (`alternatives` asked; a blank text has none). */
  alternatives: string[][];
  /**
   * Each text's source language: `srcLang`, or for `auto` the model server's detection (a blank text: the first
   * language detected in the request; nothing detected: the first served language).
   */
  sourceLangs: string[];
  /**
   * Each text's links to its translation (`alignmentEdges` given), as the model server answers it; absent for a
   * text answered as it is (blank, or already in the target language).
   */
  alignments: (number[] | undefined)[];
}

/**
 * Translates `texts` through the router's path. Blank texts are answered as they are (the model server refuses
 * them, and both APIs translate them to themselves), and never sent.
 * @throws ServeError as `POST /` would answer (validation, upstream refusal, timeout).
 */
export async function translateTexts(
  context: Pick<ApiContext, 'languages' | 'upstream' | 'routes'>,
  request: TextsRequest,
): Promise<TextsReply> {
  const sent = request.texts.flatMap((text, i) => (text.trim() === '' ? [] : [i]));
  const translated = [...request.texts];
  const alternatives = request.texts.map((): string[] => []);
  const fallback = request.srcLang === AUTO_LANGUAGE ? (context.languages[0] ?? 'en') : request.srcLang;
  const sourceLangs = request.texts.map(() => fallback);
  const alignments = request.texts.map((): number[] | undefined => undefined);
  if (request.sameLanguage !== undefined && request.srcLang === request.tgtLang) {
    if (request.sameLanguage === 'refuse') throw sameLanguageError();
    return { translated, alternatives, sourceLangs, alignments };
  }
  if (sent.length === 0) return { translated, alternatives, sourceLangs, alignments };
  const sentTexts = sent.map((i) => request.texts[i]!);
  const input = parseTranslateRequest(
    {
      src_lang: request.srcLang,
      src_text: sentTexts,
      tgt_lang: request.tgtLang,
      ...(request.split === undefined ? {} : { split: request.split }),
      // Both services always name a source language, however short the text: a best guess, not a 400.
      ...(request.srcLang === AUTO_LANGUAGE ? { detect: 'guess' } : {}),
      ...(request.format === undefined ? {} : { format: request.format }),
      ...(request.ignoreTags === undefined ? {} : { ignore_tags: request.ignoreTags }),
      ...(request.fragment ? { fragment: true } : {}),
      ...(request.nonSplittingTags === undefined ? {} : { non_splitting_tags: request.nonSplittingTags }),
      ...(request.splittingTags === undefined ? {} : { splitting_tags: request.splittingTags }),
      ...(request.outlineDetection === undefined ? {} : { outline_detection: request.outlineDetection }),
      ...(request.alternatives ? { alternatives: request.alternatives } : {}),
      ...(request.alignmentEdges === undefined
        ? {}
        : { alignment: true, alignment_edges: sent.map((i) => [...request.alignmentEdges![i]!]) }),
      ...(request.glossary === undefined ? {} : { glossary: request.glossary }),
    },
    context.routes?.targets ?? context.languages,
  );
  const { tgt_lang: tgtLang, ...body } = input;
  const entry = context.routes === undefined ? tgtLang : context.routes.entryFor(body.src_lang, tgtLang, sentTexts);
  if (entry === undefined) throw context.routes!.unserved(body.src_lang, tgtLang);
  const reply = await context.upstream.translate({
    tgtLang: entry,
    body,
    requestId: request.requestId,
    signal: request.signal,
  });
  const answer = JSON.parse(Buffer.from(reply.body).toString('utf8')) as {
    translated?: unknown;
    detected_src_lang?: unknown;
    alternatives?: { translated: string }[][];
    alignment?: unknown[];
  };
  const texts = answer.translated;
  if (!Array.isArray(texts) || texts.length !== sent.length || !texts.every((t) => typeof t === 'string'))
    throw new ServeError('INTERNAL', 'The model server answered a different number of texts.');
  const detected = Array.isArray(answer.detected_src_lang) ? answer.detected_src_lang : undefined;
  sent.forEach((at, k) => {
    translated[at] = texts[k] as string;
    alternatives[at] = answer.alternatives?.[k]?.map((alternative) => alternative.translated) ?? [];
    const links = answer.alignment?.[k];
    if (Array.isArray(links)) alignments[at] = links as number[];
    const lang = detected?.[k];
    if (typeof lang === 'string') sourceLangs[at] = lang;
    if (request.sameLanguage !== undefined && lang === request.tgtLang) {
      if (request.sameLanguage === 'refuse') throw sameLanguageError();
      translated[at] = request.texts[at]!;
      alternatives[at] = [];
      alignments[at] = undefined;
    }
  });
  // A blank text has no language of its own: it takes the first one detected in the request.
  const first = typeof detected?.[0] === 'string' ? detected[0] : undefined;
  if (first !== undefined)
    for (const [i, text] of request.texts.entries()) if (text.trim() === '') sourceLangs[i] = first;
  return { translated, alternatives, sourceLangs, alignments };
}

/** DeepL's refusal of a document already in its target language. */
const sameLanguageError = () => new ServeError('BAD_REQUEST', 'Source and target language are equal.');

/** Characters a text is counted as (Unicode code points, as both services count them). */
export function characterCount(texts: readonly string[]): number {
  return texts.reduce((count, text) => count + [...text].length, 0);
}

/** `Retry-After` of a refusal, when it has one. */
export function retryAfterHeader(seconds: number | undefined): Record<string, string> {
  return seconds === undefined ? {} : { 'retry-after': String(Math.max(1, Math.ceil(seconds))) };
}

/** An answer a compatible API gives in its own shape: a status, a message and, for a refusal, `Retry-After`. */
export class ApiAnswerError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly retryAfterS?: number,
  ) {
    super(message);
  }
}

/** How one compatible API words its errors. */
export interface ApiDialect {
  /** Prefix of the log's error code for the API's own answers (`DEEPL_403`). */
  name: string;
  /** The error body (`{"message"}` for DeepL, `{"error"}` for LibreTranslate). */
  errorBody(message: string): object;
  /** The router's own error as the API answers it. */
  fromServeError(error: ServeError): ApiAnswerError;
}

/** One API's route runner: a route's value answered as JSON (a Response as it is), its error as `dialect` words it. */
export const apiAnswerer =
  (dialect: ApiDialect) =>
  async (context: ApiContext, c: Context<RouterEnv>, run: () => Promise<unknown>): Promise<Response> => {
    const headers = { 'content-type': 'application/json', 'x-request-id': c.get('requestId') };
    try {
      const value = await run();
      if (value instanceof Response) return value;
      return new Response(JSON.stringify(value), { status: 200, headers });
    } catch (err) {
      const own = err instanceof ApiAnswerError;
      if (!own && !(err instanceof ServeError) && !c.req.raw.signal.aborted)
        context.logger?.error({ reqId: c.get('requestId'), err }, 'unhandled error');
      const error = own ? err : dialect.fromServeError(toServeError(err));
      c.set('errorCode', own ? `${dialect.name}_${error.status}` : toServeError(err).code);
      return new Response(JSON.stringify(dialect.errorBody(error.message)), {
        status: error.status,
        headers: { ...headers, ...retryAfterHeader(error.retryAfterS) },
      });
    }
  };
