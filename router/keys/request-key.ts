/**
 * @module router/keys/request-key — API keys on the router's own routes: the key a native `POST /` carries
 * (`Authorization: Bearer <key>`, or DeepL's `DeepL-Auth-Key <key>`), its admission worded as the catalogue's errors,
 * and the admin key that may read every key's use (`GET /metrics`, `apiKeys` in `/status.json`).
 */
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { ApiAccess, ApiKey, Charge } from './api-access.js';

/** The key in an `Authorization` header (`Bearer <key>` or `DeepL-Auth-Key <key>`); undefined when it has none. */
export function secretOf(authorization: string | undefined): string | undefined {
  return /^(?:Bearer|DeepL-Auth-Key)\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1];
}

/** The key of a request. @throws ServeError UNAUTHORIZED without one, or with one the key files do not hold */
export function requireKey(access: ApiAccess, authorization: string | undefined): ApiKey {
  const check = access.check(secretOf(authorization));
  if (check.ok) return check.key;
  throw new ServeError(
    'UNAUTHORIZED',
    check.reason === 'missing'
      ? 'An API key is required: send it as Authorization: Bearer <key>.'
      : 'The API key is not valid.',
  );
}

/** Whether a request carries an admin key (ApiKey `admin`). */
export function isAdmin(access: ApiAccess, authorization: string | undefined): boolean {
  const check = access.check(secretOf(authorization));
  return check.ok && check.key.admin === true;
}

/**
 * Counts a translation of `characters` against the key. @throws ServeError KEY_QUOTA_EXCEEDED (403),
 * KEY_RATE_LIMITED (429 + Retry-After) when the key's limits refuse it, which then counts nothing
 */
export async function admitKey(access: ApiAccess, key: ApiKey, characters: number): Promise<Charge> {
  const admission = await access.admit(key, characters);
  if (admission.ok) return admission.charge;
  if (admission.reason === 'quota')
    throw new ServeError(
      'KEY_QUOTA_EXCEEDED',
      `The character quota of API key "${key.id}" (${admission.limit}) is used up.`,
    );
  throw new ServeError(
    'KEY_RATE_LIMITED',
    admission.reason === 'rate'
      ? `API key "${key.id}" may send ${admission.limit} requests per second.`
      : `API key "${key.id}" may send ${admission.limit} characters per ${key.periodS} s.`,
    // Whole seconds, as Retry-After is written, and never 0: a client told 0 would come back within the same window.
    { retryAfterS: Math.max(1, Math.ceil(admission.retryAfterS)) },
  );
}

/** A request counted against its key: what `billedOnSuccess` gives back when it is not translated. */
export interface Charged {
  access: ApiAccess;
  key: ApiKey;
  charge: Charge;
}

/**
 * `translate()`'s value; when it throws, the characters `charged` counted (keys on) are given back first (nothing is
 * billed for a request the model server refused, or that failed or timed out), and its error passed on. A refund the
 * usage store cannot take is logged: the request's own error is what its client must see.
 */
export async function billedOnSuccess<T>(
  charged: Charged | undefined,
  translate: () => Promise<T>,
  logger?: Logger,
): Promise<T> {
  try {
    return await translate();
  } catch (err) {
    if (charged !== undefined) {
      const { access, key, charge } = charged;
      await access.refund(key, charge).catch((refundErr: unknown) => {
        logger?.error({ key: key.id, characters: charge.characters, err: refundErr }, 'usage refund failed');
      });
    }
    throw err;
  }
}
