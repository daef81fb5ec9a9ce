/**
 * Issue 6.1 — property tests for the router's request parsing (router/translate-request.ts and the app around
 * it). An independent oracle says which bodies are valid; for any generated body the parser must agree with it,
 * accept a valid body unchanged, and refuse an invalid one with a 400 whose message names every bad field —
 * never another exception. Through the app, any bytes at all get a JSON answer with the right status. (The
 * batcher's bookkeeping property — every accepted job answered exactly once — lives beside the batcher, in
 * model-server/wlm/batcher.test.ts.)
 */
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import { ServeError } from '../../common/errors.js';
import { createLogger } from '../../common/logger.js';
import { createRouterApp } from '../../router/app.js';
import { acceptsContentType, LANGUAGE_CODE, parseTranslateRequest } from '../../router/translate-request.js';
import { Upstream } from '../../router/upstream/upstream.js';
import { freePort } from '../../harness/ports.js';

const LANGS = ['en', 'ko', 'zh', 'fr'];
const FIELDS = ['src_lang', 'src_text', 'tgt_lang'] as const;

/** The oracle: what a field must be, written independently of the zod schema. */
const fieldOk: Record<(typeof FIELDS)[number], (v: unknown) => boolean> = {
  src_lang: (v) => typeof v === 'string' && /^[a-z]{2,3}$/.test(v),
  src_text: (v) =>
    (typeof v === 'string' && v.trim() !== '') ||
    (Array.isArray(v) && v.length > 0 && v.every((t) => typeof t === 'string' && t.trim() !== '')),
  tgt_lang: (v) => typeof v === 'string' && LANGS.includes(v),
};

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Values a field may take: mostly plausible, often subtly wrong. */
const fieldValue = fc.oneof(
  fc.constantFrom(...LANGS, 'EN', 'xx', 'eng', 'e', '', ' en', 'en\u0000', '../ko'),
  fc.string({ maxLength: 12 }),
  fc.constantFrom(' ', '\n\t', '\u3000', 'Hello', '안녕하세요'),
  fc.array(fc.oneof(fc.string({ maxLength: 8 }), fc.constant(''), fc.integer(), fc.constant(null)), { maxLength: 4 }),
  fc.constantFrom(null, true, 0, 42, -1.5, {}, { text: 'hi' }, [[]]),
);

/** A body: an object with each field present or absent, plus stray keys; sometimes not an object at all. */
const bodyArb: fc.Arbitrary<unknown> = fc.oneof(
  {
    weight: 8,
    arbitrary: fc.record(
      { src_lang: fieldValue, src_text: fieldValue, tgt_lang: fieldValue, extra: fc.jsonValue() },
      { requiredKeys: [] },
    ),
  },
  { weight: 1, arbitrary: fc.jsonValue() },
);

describe('router request parsing (fast-check)', () => {
  it('property: accepts exactly the valid bodies, unchanged; refuses the rest with a 400 naming every bad field', () => {
    fc.assert(
      fc.property(bodyArb, (body) => {
        const valid = isObject(body) && FIELDS.every((f) => fieldOk[f](body[f]));
        let result: unknown;
        let error: unknown;
        try {
          result = parseTranslateRequest(body, LANGS);
        } catch (err) {
          error = err;
        }
        if (valid) {
          expect(error).toBeUndefined();
          const b = body as Record<string, unknown>;
          expect(result).toEqual({ src_lang: b.src_lang, src_text: b.src_text, tgt_lang: b.tgt_lang });
          expect((result as { src_lang: string }).src_lang).toMatch(LANGUAGE_CODE);
          return;
        }
        expect(error).toBeInstanceOf(ServeError);
        const e = error as ServeError;
        expect(e.status).toBe(400);
        expect(e.type).toBe('BadRequestException');
        if (!isObject(body)) {
          expect(e.message).toMatch(/^Request body must be a JSON object/);
          return;
        }
        const bad = FIELDS.filter((f) => !fieldOk[f](body[f]));
        for (const f of bad) expect(e.message).toContain(`"${f}`);
        for (const f of FIELDS.filter((f) => !bad.includes(f))) expect(e.message).not.toContain(`"${f}"`);
        // Only a wrong target language alone is "unknown language"; anything else is a plain bad request.
        const onlyTarget = bad.length === 1 && bad[0] === 'tgt_lang' && typeof body.tgt_lang === 'string';
        expect(e.code).toBe(onlyTarget ? 'UNKNOWN_LANGUAGE' : 'BAD_REQUEST');
      }),
      { numRuns: 3000 },
    );
  });

  it('property: content types — JSON (any +json, any parameters, any case), text/plain, form, or none; nothing else', () => {
    const mime = fc.oneof(
      fc.constantFrom(
        'application/json',
        'APPLICATION/JSON',
        'application/problem+json',
        'text/plain',
        'application/x-www-form-urlencoded',
      ),
      fc.constantFrom(
        'application/xml',
        'text/html',
        'multipart/form-data',
        'image/png',
        'application/jsonp',
        'json',
        'text/json',
      ),
      fc.stringMatching(/^[a-z]{1,8}\/[a-z+.-]{1,12}$/),
    );
    const params = fc.constantFrom('', '; charset=utf-8', ';charset=latin1', '; boundary=x');
    fc.assert(
      fc.property(mime, params, fc.constantFrom('', ' '), (m, p, pad) => {
        const lower = m.toLowerCase();
        const expected =
          lower === 'application/json' ||
          /^application\/[\w.+-]+\+json$/.test(lower) ||
          lower === 'text/plain' ||
          lower === 'application/x-www-form-urlencoded';
        expect(acceptsContentType(`${pad}${m}${p}`)).toBe(expected);
      }),
      { numRuns: 2000 },
    );
    expect(acceptsContentType(undefined)).toBe(true);
    expect(acceptsContentType('')).toBe(true);
  });

  describe('through the app (in-process, the real undici upstream to a port where nothing listens)', () => {
    const logger = createLogger('test', 'silent');
    let upstream: Upstream;
    afterAll(() => upstream?.close());

    it('property: any bytes get a JSON error with the right status — 400/413/415, or 502 once valid (the upstream is down)', async () => {
      upstream = new Upstream({ url: `http://127.0.0.1:${await freePort()}`, connections: 4, timeoutMs: 2_000 });
      const app = createRouterApp({ maxBodyBytes: 2048, languages: LANGS, logBodies: false }, { upstream, logger });
      const payload = fc.oneof(
        bodyArb.map((b) => Buffer.from(JSON.stringify(b) ?? 'undefined')),
        fc.uint8Array({ maxLength: 64 }).map((a) => Buffer.from(a)),
        fc.string({ maxLength: 64 }).map((s) => Buffer.from(s)),
        fc.integer({ min: 2049, max: 6000 }).map((n) => Buffer.alloc(n, 0x61)),
      );
      await fc.assert(
        fc.asyncProperty(
          payload,
          fc.constantFrom('application/json', 'text/plain', 'text/xml'),
          async (bytes, type) => {
            const res = await app.request('/', { method: 'POST', body: bytes, headers: { 'content-type': type } });
            const answer = (await res.json()) as { code: number; type: string; message: string };
            expect(answer.code).toBe(res.status);
            expect(Object.keys(answer).sort()).toEqual(['code', 'message', 'type']);
            expect(answer.message).not.toMatch(/\n\s+at /);
            if (bytes.length > 2048) {
              expect(res.status).toBe(413);
              return;
            }
            if (type === 'text/xml') {
              expect(res.status).toBe(415);
              return;
            }
            let parsed: unknown;
            let decodable = true;
            try {
              parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
            } catch {
              decodable = false;
            }
            const valid = decodable && isObject(parsed) && FIELDS.every((f) => fieldOk[f](parsed[f]));
            expect(res.status).toBe(valid ? 502 : 400);
          },
        ),
        { numRuns: 400 },
      );
    });
  });
});
