/**
 * @module router/apis/deepl-dialect — how DeepL's routes read a request (its parameters, its key in
 * `Authorization: DeepL-Auth-Key`, its characters admitted) and word their answers: `DeepLError`, `{"message"}`.
 */
import type { Context } from 'hono';
import type { ServeError } from '../../common/errors.js';
import type { RouterEnv } from '../router-env.js';
import type { ApiKey, Charge } from '../keys/api-access.js';
import { apiAnswerer, ApiAnswerError, type ApiContext, type Params, readParams } from './translate-texts.js';

/** DeepL's answer: a status and `{"message"}`. */
export class DeepLError extends ApiAnswerError {}

/** DeepL's 400 for a value it does not support. */
export const unsupported = (name: string) => new DeepLError(400, `Value for '${name}' not supported.`);

/** The request's parameters: its query string's, then its body's. */
export async function requestParams(c: Context<RouterEnv>, context: ApiContext): Promise<Params> {
  const body = await context.readBody(c);
  return readParams(c.req.url, c.req.header('content-type'), body);
}

/**
 * The request's key when keys are on (undefined when off). DeepL takes the key in `Authorization: DeepL-Auth-Key`
 * only: a legacy `auth_key` parameter is refused with DeepL's 403 whether keys are on or off.
 */
export function authorize(c: Context<RouterEnv>, params: Params, context: ApiContext): ApiKey | undefined {
  const header = c.req.header('authorization');
  if (header === undefined && params.has('auth_key')) {
    const where = new URL(c.req.url).searchParams.has('auth_key') ? 'query parameter' : 'form body';
    throw new DeepLError(
      403,
      `Legacy authentication method '${where}' is no longer supported. Please update to header-based authentication.`,
    );
  }
  if (context.access === undefined) return undefined;
  const match = /^DeepL-Auth-Key\s+(\S+)\s*$/i.exec(header ?? '');
  const check = context.access.check(match?.[1]);
  if (!check.ok) throw new DeepLError(403, 'Forbidden');
  c.set('keyId', check.key.id);
  return check.key;
}

/**
 * Admits a request under its key's limits: a translation of `characters`, or (null) a call that translates nothing
 * (ApiAccess `admit`). Returns what it was counted. @throws DeepLError 456 (quota), 429 (rate)
 */
export async function admit(context: ApiContext, key: ApiKey, characters: number | null): Promise<Charge> {
  const admission = await context.access!.admit(key, characters);
  if (admission.ok) return admission.charge;
  throw admission.reason === 'quota'
    ? new DeepLError(456, 'Quota Exceeded')
    : new DeepLError(429, 'Too many requests', admission.retryAfterS);
}

/** Runs a route and answers its value, or its error in DeepL's shape. */
export const answer = apiAnswerer({ name: 'DEEPL', errorBody: (message) => ({ message }), fromServeError });

/** The router's own errors as DeepL answers them: a refusal under load is DeepL's 429, a client error its 400. */
function fromServeError(error: ServeError): DeepLError {
  if (error.status === 503 && error.retryAfterS !== undefined)
    return new DeepLError(429, `Too many requests: ${error.message}`, error.retryAfterS);
  if (error.status === 401 || error.status === 403) return new DeepLError(403, error.message);
  if (error.code === 'GLOSSARY_NOT_FOUND') return new DeepLError(404, error.message);
  if (error.status === 404) return new DeepLError(503, error.message, error.retryAfterS);
  if (error.status === 415) return new DeepLError(400, error.message);
  return new DeepLError(error.status, error.message, error.retryAfterS);
}
