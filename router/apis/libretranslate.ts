/**
 * @module router/apis/libretranslate — LibreTranslate's API on the public port, for its clients (any that take a
 * server URL): `POST /translate`, `GET|POST /languages`, `POST /detect`, `GET /frontend/settings`, `POST /suggest`
 * (403 as LibreTranslate answers with suggestions off, its default). Texts go through
 * the router's translation path (./translate-texts.ts); answers and errors take LibreTranslate's shapes:
 * `{"translatedText", "detectedLanguage": {"language", "confidence"}, "alternatives"}`, errors `{"error"}` with
 * 400, 403 (key), 429 (`Slowdown: …`, + Retry-After), 5xx.
 *
 * Parameters of `/translate`: `q` (a string or an array) honoured; `source` (`auto` detected per text) and `target`
 * mapped to the served languages; `format` `text` and `html` (only the text translated, tags kept) honoured;
 * `alternatives` honoured up to MAX_ALTERNATIVES (beam search's runners-up, plain text only); `api_key` honoured.
 *
 * Files: `POST /translate_file` (multipart `file`, `source`, `target`, `api_key`; the types of ./document-files.ts)
 * answers once the file is translated (./documents.ts) with `{"translatedFileUrl"}`: a `GET /download_file/…` URL on
 * PUBLIC_URL (never on request headers) that holds the document's id and key (the key its only credential, as
 * LibreTranslate's URL is) and works until the document expires. A file that fails is removed and not billed.
 */
import type { Context, Hono } from 'hono';
import type { ServeError } from '../../common/errors.js';
import { MAX_ALTERNATIVES } from '../../common/translation-contract.js';
import { DETECTABLE_LANGUAGES, detectLanguage } from '../../model-server/text/detect-language.js';
import type { RouterEnv } from '../router-env.js';
import { AUTO_LANGUAGE } from '../translate-request.js';
import type { ApiKey, Charge } from '../keys/api-access.js';
import { billedOnSuccess, type Charged } from '../keys/request-key.js';
import { checkFilename, DOCUMENT_TYPES, documentType, download, ownerOf } from './document-files.js';
import {
  apiAnswerer,
  ApiAnswerError,
  type ApiContext,
  characterCount,
  isJsonType,
  param,
  type Params,
  readParams,
  readUpload,
  translateTexts,
} from './translate-texts.js';

/** LibreTranslate's answer: a status and `{"error"}`. */
export class LibreTranslateError extends ApiAnswerError {}

/** LibreTranslate's codes where they differ from M2M100's. */
const LISTED_CODES: Readonly<Record<string, string>> = { zh: 'zh-Hans' };
/** Codes LibreTranslate clients send for a served language (any case). */
const ALIASES: Readonly<Record<string, string>> = { 'zh-hans': 'zh', 'zh-cn': 'zh', pb: 'pt', 'pt-br': 'pt' };

const displayNames = new Intl.DisplayNames(['en'], { type: 'language' });

const missing = (name: string) => new LibreTranslateError(400, `Invalid request: missing ${name} parameter`);

/** Registers LibreTranslate's routes on the router app. */
export function mountLibreTranslate(app: Hono<RouterEnv>, context: ApiContext): void {
  const sources = context.routes?.sources ?? context.languages;
  const targets = context.routes?.targets ?? context.languages;
  const servedIn = (served: readonly string[]) => (code: string) => {
    const lower = code.toLowerCase();
    const lang = ALIASES[lower] ?? lower;
    return served.includes(lang) ? lang : undefined;
  };
  const sourceOf = servedIn(sources);
  const servedOf = servedIn(targets);
  const listed = (langs: readonly string[]) => [...langs].sort().map((lang) => LISTED_CODES[lang] ?? lang);
  const codes = listed(sources);
  const languageList = [...sources].sort().map((lang) => ({
    code: LISTED_CODES[lang] ?? lang,
    name: displayNames.of(lang) ?? lang,
    targets: listed(context.routes?.targetsFrom(lang) ?? context.languages),
  }));
  /** LibreTranslate's refusal of a pair no model serves, before anything is counted. */
  const checkPair = (srcLang: string, tgtLang: string) => {
    if (context.routes === undefined || context.routes.serves(srcLang, tgtLang)) return;
    const name = (lang: string) => `${displayNames.of(lang) ?? lang} (${LISTED_CODES[lang] ?? lang})`;
    throw new LibreTranslateError(400, `${name(tgtLang)} is not available as a target language from ${name(srcLang)}`);
  };

  app.post('/translate', (c) =>
    answer(context, c, async () => {
      const { params, batch } = await requestParams(c, context);
      const key = authorize(c, params, context);
      const q = params.get('q');
      if (q === undefined || q.length === 0 || q[0] === '') throw missing('q');
      const source = param(params, 'source');
      if (source === undefined) throw missing('source');
      const target = param(params, 'target');
      if (target === undefined) throw missing('target');
      const alternatives = Number(param(params, 'alternatives') ?? '0');
      if (!Number.isInteger(alternatives))
        throw new LibreTranslateError(400, 'Invalid request: alternatives parameter is not a number');
      const format = param(params, 'format') ?? 'text';
      if (!q.every((t): t is string => typeof t === 'string')) throw missing('q');
      const srcLang = source === AUTO_LANGUAGE ? AUTO_LANGUAGE : sourceOf(source);
      if (srcLang === undefined) throw new LibreTranslateError(400, `${source} is not supported`);
      const tgtLang = servedOf(target);
      if (tgtLang === undefined) throw new LibreTranslateError(400, `${target} is not supported`);
      checkPair(srcLang, tgtLang);
      if (format !== 'text' && format !== 'html')
        throw new LibreTranslateError(400, `${format} format is not supported`);
      if (alternatives > MAX_ALTERNATIVES)
        throw new LibreTranslateError(400, `Invalid request: alternatives parameter must be <= ${MAX_ALTERNATIVES}`);
      // LibreTranslate counts line breaks as one character each.
      const texts = q.map((text) => text.split(/\r\n|\r|\n/).join('\n'));
      c.set('tgtLang', tgtLang);
      c.set('texts', texts.length);
      const charged = key && { access: context.access!, key, charge: await admit(context, key, characterCount(texts)) };
      const reply = await billedOnSuccess(
        charged,
        () =>
          translateTexts(context, {
            texts,
            format,
            // As LibreTranslate: alternatives for plain text only (an HTML answer has none).
            ...(format === 'text' && alternatives > 0 ? { alternatives } : {}),
            srcLang,
            tgtLang,
            requestId: c.get('requestId'),
            signal: c.req.raw.signal,
          }),
        context.logger,
      );
      const detected = reply.sourceLangs.map((language, i) => ({
        confidence: Math.round(detectLanguage(texts[i]!, DETECTABLE_LANGUAGES).confidence * 1000) / 10,
        language: LISTED_CODES[language] ?? language,
      }));
      return {
        translatedText: batch ? reply.translated : reply.translated[0],
        ...(srcLang === AUTO_LANGUAGE ? { detectedLanguage: batch ? detected : detected[0] } : {}),
        ...(alternatives > 0 ? { alternatives: batch ? reply.alternatives : reply.alternatives[0] } : {}),
      };
    }),
  );

  app.post('/translate_file', (c) =>
    answer(context, c, async () => {
      const documents = context.documents;
      if (documents === undefined) throw new LibreTranslateError(403, 'Files translation are disabled on this server.');
      const { params, file } = await readUpload(c, context);
      const key = authorize(c, params, context);
      if (file === undefined) throw missing('file');
      const source = param(params, 'source');
      if (source === undefined) throw missing('source');
      const target = param(params, 'target');
      if (target === undefined) throw missing('target');
      const srcLang = source === AUTO_LANGUAGE ? AUTO_LANGUAGE : sourceOf(source);
      if (srcLang === undefined) throw new LibreTranslateError(400, `${source} is not supported`);
      const tgtLang = servedOf(target);
      if (tgtLang === undefined) throw new LibreTranslateError(400, `${target} is not supported`);
      checkPair(srcLang, tgtLang);
      if (documentType(file.name) === undefined)
        throw new LibreTranslateError(400, 'Invalid request: file format not supported');
      checkFilename(file.name);
      c.set('tgtLang', tgtLang);
      c.set('texts', 1);
      const content = await documents.read(file.name, new Uint8Array(await file.arrayBuffer()));
      let charged: Charged | undefined;
      const made = await documents.submit(
        { ...content, filename: file.name, srcLang, tgtLang, api: 'libretranslate', owner: key && ownerOf(key) },
        key &&
          (async () => {
            charged = { access: context.access!, key, charge: await admit(context, key, content.characters) };
          }),
      );
      const translated = async () => {
        await documents.settled(made.id);
        const view = documents.view(made.id, { key: made.key, owner: key?.id });
        if (view?.state === 'done') return;
        // Nobody can ask about it again: its answer is this error.
        documents.remove(made.id);
        const error = view?.error ?? { status: 500, message: 'The file was not translated.' };
        throw error.status === 400 || error.status === 413
          ? new LibreTranslateError(400, `Invalid request: ${error.message}`)
          : new LibreTranslateError(error.status >= 500 ? error.status : 500, error.message);
      };
      await billedOnSuccess(charged, translated, context.logger);
      const base = context.publicUrl ?? new URL(c.req.url).origin;
      return { translatedFileUrl: `${base}/download_file/${made.id}.${made.key}.${encodeURIComponent(file.name)}` };
    }),
  );

  app.get('/download_file/:name', (c) =>
    answer(context, c, () => {
      const [id = '', key = ''] = (c.req.param('name') ?? '').split('.', 2);
      const file = context.documents?.download(id, key);
      if (file === undefined)
        return Promise.reject(new LibreTranslateError(404, 'File not found: never made, or expired'));
      return Promise.resolve(download(file.bytes, file.filename, c.get('requestId')));
    }),
  );

  const languages = (c: Context<RouterEnv>) => answer(context, c, () => Promise.resolve(languageList));
  app.get('/languages', languages);
  app.post('/languages', languages);

  app.post('/detect', (c) =>
    answer(context, c, async () => {
      const { params } = await requestParams(c, context);
      const key = authorize(c, params, context);
      const q = param(params, 'q');
      if (q === undefined || q === '') throw missing('q');
      if (key !== undefined) await admit(context, key, null);
      const guess = detectLanguage(q, DETECTABLE_LANGUAGES);
      // Nothing to tell by (digits, punctuation): LibreTranslate's own fallback, English, when served.
      if (guess.lang === null) return [{ confidence: 0, language: codes.includes('en') ? 'en' : (codes[0] ?? 'en') }];
      return [
        { confidence: Math.round(guess.confidence * 1000) / 10, language: LISTED_CODES[guess.lang] ?? guess.lang },
      ];
    }),
  );

  // LibreTranslate's default (--suggestions off), after its key check as its access_check runs first: there is no
  // store of users' corrections to keep them in.
  app.post('/suggest', (c) =>
    answer(context, c, async () => {
      const { params } = await requestParams(c, context);
      const key = authorize(c, params, context);
      if (key !== undefined) await admit(context, key, null);
      throw new LibreTranslateError(403, 'Suggestions are disabled on this server.');
    }),
  );

  app.get('/frontend/settings', (c) =>
    answer(context, c, () =>
      Promise.resolve({
        charLimit: context.maxRequestChars ?? -1,
        frontendTimeout: 500,
        apiKeys: context.access !== undefined,
        keyRequired: context.access !== undefined,
        suggestions: false,
        filesTranslation: context.documents !== undefined,
        supportedFilesFormat: context.documents === undefined ? [] : Object.keys(DOCUMENT_TYPES).map((e) => `.${e}`),
        language: {
          source: { code: 'auto', name: 'Auto Detect' },
          target: languageList[0] === undefined ? {} : { code: languageList[0].code, name: languageList[0].name },
        },
      }),
    ),
  );
}

/**
 * The request's parameters, and whether `q` is a batch (a JSON array, or a form field given more than once), which
 * decides the answer's shape.
 */
async function requestParams(c: Context<RouterEnv>, context: ApiContext): Promise<{ params: Params; batch: boolean }> {
  const body = await context.readBody(c);
  const contentType = c.req.header('content-type');
  const params = readParams(c.req.url, contentType, body);
  // A JSON body is read as JSON by the same rule as readParams (which has parsed it already); any other as a form.
  const batch =
    isJsonType(contentType) && body.byteLength > 0
      ? Array.isArray((JSON.parse(Buffer.from(body).toString('utf8')) as { q?: unknown }).q)
      : (params.get('q')?.length ?? 0) > 1;
  return { params, batch };
}

/** The request's key when keys are on (undefined when off), from its `api_key` parameter, as LibreTranslate reads it. */
function authorize(c: Context<RouterEnv>, params: Params, context: ApiContext): ApiKey | undefined {
  if (context.access === undefined) return undefined;
  const secret = param(params, 'api_key');
  const check = context.access.check(secret === '' ? undefined : secret);
  if (!check.ok) {
    throw check.reason === 'missing'
      ? new LibreTranslateError(400, 'Please contact the server operator to get an API key')
      : new LibreTranslateError(403, 'Invalid API key');
  }
  c.set('keyId', check.key.id);
  return check.key;
}

/** Admits a request under its key's limits (ApiAccess `admit`); returns what it was counted. */
async function admit(context: ApiContext, key: ApiKey, characters: number | null): Promise<Charge> {
  const admission = await context.access!.admit(key, characters);
  if (admission.ok) return admission.charge;
  if (admission.reason === 'quota') throw new LibreTranslateError(403, 'Character quota exceeded for this API key');
  const what =
    admission.reason === 'rate'
      ? `${admission.limit} per 1 second`
      : `${admission.limit} characters per ${key.periodS} seconds`;
  throw new LibreTranslateError(429, `Slowdown: ${what}`, admission.retryAfterS);
}

/** Runs a route and answers its value, or its error in LibreTranslate's shape. */
const answer = apiAnswerer({ name: 'LIBRETRANSLATE', errorBody: (message) => ({ error: message }), fromServeError });

/** The router's own errors as LibreTranslate answers them: a refusal under load is its 429, a client error its 400. */
function fromServeError(error: ServeError): LibreTranslateError {
  if (error.status === 503 && error.retryAfterS !== undefined)
    return new LibreTranslateError(429, `Slowdown: ${error.message}`, error.retryAfterS);
  if (error.status === 415 || error.status === 413)
    return new LibreTranslateError(400, `Invalid request: ${error.message}`);
  return new LibreTranslateError(error.status, error.message, error.retryAfterS);
}
