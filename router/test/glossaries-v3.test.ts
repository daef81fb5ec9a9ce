/**
 * DeepL's v3 multilingual glossaries through the router app in process, over two real model servers (echo models:
 * glossaries need no engine): made with dictionaries from a form (deepl-node's fields) or JSON, read, listed beside
 * v2 ones, changed on every model server, and used by /v2/translate for the pair a translation asks for.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { createRouterApp } from '../app.js';
import { GlossaryClient } from '../glossaries.js';
import { hashKey } from '../keys/key-ring.js';
import { KeyedAccess } from '../keys/keyed-access.js';

let a: TestServer;
let b: TestServer;
const hosts: string[] = [];
const client = new GlossaryClient({ origins: () => hosts, authorizationHeader: () => undefined }, 5_000);
const sent: unknown[] = [];
const upstream = {
  translate: async (request: { body: unknown }) => {
    sent.push(request.body);
    return { body: new TextEncoder().encode('{"translated":["x"]}') as Uint8Array<ArrayBuffer>, headers: {} };
  },
  ping: async () => true,
};
const app = createRouterApp(
  { maxBodyBytes: 1 << 20, languages: ['en', 'de', 'fr'], logBodies: false },
  { upstream, logger: pino({ level: 'silent' }), glossaries: client },
);

beforeAll(async () => {
  [a, b] = await Promise.all([startTestServer(), startTestServer()]);
  hosts.push(a.inference, b.inference);
});
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
});

const form = (method: string, path: string, fields: Record<string, string> = {}) =>
  app.request(path, {
    method,
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams(fields).toString(),
  });
const answer = async (res: Response | Promise<Response>) => {
  const done = await res;
  const text = await done.text();
  return [done.status, text === '' ? null : JSON.parse(text)];
};
const translate = (id: string, source: string, target: string) =>
  answer(form('POST', '/v2/translate', { text: 'x', source_lang: source, target_lang: target, glossary_id: id }));

describe('DeepL /v3/glossaries', () => {
  it('made with two dictionaries from form fields, read, listed, and each pair used by /v2/translate', async () => {
    const [status, made] = await answer(
      form('POST', '/v3/glossaries', {
        name: 'chess',
        'dictionaries[0].source_lang': 'EN',
        'dictionaries[0].target_lang': 'de',
        'dictionaries[0].entries': 'knight\tSpringer',
        'dictionaries[0].entries_format': 'tsv',
        'dictionaries[1].source_lang': 'de',
        'dictionaries[1].target_lang': 'EN-US',
        'dictionaries[1].entries': 'Läufer,bishop\n"Turm, alt",rook',
        'dictionaries[1].entries_format': 'csv',
      }),
    );
    expect(status).toBe(201);
    const id = made.glossary_id as string;
    expect(made).toEqual({
      glossary_id: id,
      name: 'chess',
      dictionaries: [
        { source_lang: 'en', target_lang: 'de', entry_count: 1 },
        { source_lang: 'de', target_lang: 'en', entry_count: 2 },
      ],
      creation_time: made.creation_time,
    });
    expect(await answer(app.request(`/v3/glossaries/${id}`))).toEqual([200, made]);
    expect(await answer(app.request(`/v3/glossaries/${id}/entries?source_lang=de&target_lang=en`))).toEqual([
      200,
      {
        dictionaries: [
          { source_lang: 'de', target_lang: 'en', entries: 'Läufer\tbishop\nTurm, alt\trook', entries_format: 'tsv' },
        ],
      },
    ]);
    // Every model server keeps it: the second answers alone.
    hosts.shift();
    try {
      expect((await answer(app.request(`/v3/glossaries/${id}`)))[0]).toBe(200);
    } finally {
      hosts.unshift(a.inference);
    }
    const v2 = await client.create(
      { name: 'old', source_lang: 'en', target_lang: 'fr', entries: 'fox\trenard', entries_format: 'tsv' },
      undefined,
    );
    const [, listed] = await answer(app.request('/v3/glossaries'));
    const ids = (listed.glossaries as { glossary_id: string }[]).map((g) => g.glossary_id);
    expect(ids).toEqual(expect.arrayContaining([id, v2.glossary_id]));
    expect(
      listed.glossaries.find((g: { glossary_id: string }) => g.glossary_id === v2.glossary_id).dictionaries,
    ).toEqual([{ source_lang: 'en', target_lang: 'fr', entry_count: 1 }]);

    sent.length = 0;
    expect((await translate(id, 'EN', 'DE'))[0]).toBe(200);
    expect((await translate(id, 'DE', 'EN-GB'))[0]).toBe(200);
    expect((await translate(v2.glossary_id, 'EN', 'FR'))[0]).toBe(200);
    expect(sent.map((body) => (body as { glossary: unknown }).glossary)).toEqual([
      { knight: 'Springer' },
      { Läufer: 'bishop', 'Turm, alt': 'rook' },
      { fox: 'renard' },
    ]);
    expect(await translate(id, 'EN', 'FR')).toEqual([
      400,
      { message: `No dictionary found for language pair en-fr in glossary ${id}.` },
    ]);
  });

  it('changes on every model server: renamed, a dictionary merged, replaced, deleted; then the glossary deleted', async () => {
    const [, made] = await answer(
      app.request('/v3/glossaries', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          name: 'fruit',
          dictionaries: [
            { source_lang: 'en', target_lang: 'de', entries: 'Hello\tHallo\nPear\tBirne', entries_format: 'tsv' },
          ],
        }),
      }),
    );
    const id = made.glossary_id as string;
    expect((await translate(id, 'EN', 'DE'))[0]).toBe(200);
    const [, patched] = await answer(
      form('PATCH', `/v3/glossaries/${id}`, {
        name: 'renamed',
        'dictionaries[0].source_lang': 'en',
        'dictionaries[0].target_lang': 'de',
        'dictionaries[0].entries': 'Hello\tGuten Tag\nApple\tApfel',
        'dictionaries[0].entries_format': 'tsv',
      }),
    );
    expect(patched).toMatchObject({
      name: 'renamed',
      dictionaries: [{ source_lang: 'en', target_lang: 'de', entry_count: 3 }],
    });
    sent.length = 0;
    await translate(id, 'EN', 'DE'); // what this router kept of it was dropped by the change
    // Merged: a term given again takes its new target, the others stay.
    expect(sent).toMatchObject([{ glossary: { Hello: 'Guten Tag', Pear: 'Birne', Apple: 'Apfel' } }]);

    const replaced = await answer(
      form('PUT', `/v3/glossaries/${id}/dictionaries`, {
        source_lang: 'en',
        target_lang: 'de',
        entries: 'Pear,Birne',
        entries_format: 'csv',
      }),
    );
    expect(replaced).toEqual([200, { source_lang: 'en', target_lang: 'de', entry_count: 1 }]);
    for (const host of [a, b]) {
      const res = await fetch(`${host.inference}/multilingual-glossaries/${id}/entries`);
      expect(await res.json()).toEqual({
        dictionaries: [{ source_lang: 'en', target_lang: 'de', entries: 'Pear\tBirne', entries_format: 'tsv' }],
      });
    }
    expect(
      await answer(
        app.request(`/v3/glossaries/${id}/dictionaries?source_lang=en&target_lang=de`, { method: 'DELETE' }),
      ),
    ).toEqual([204, null]);
    expect((await answer(app.request(`/v3/glossaries/${id}`)))[1].dictionaries).toEqual([]);
    expect((await answer(app.request(`/v3/glossaries/${id}`, { method: 'DELETE' })))[0]).toBe(204);
    expect(await answer(app.request(`/v3/glossaries/${id}`))).toEqual([404, { message: 'Glossary not found' }]);
    expect((await translate(id, 'EN', 'DE'))[0]).toBe(404);
  });

  it("refuses in DeepL's words: a pair not served, no entries, a v2 glossary changed, a pair missing", async () => {
    const v2 = await client.create(
      { name: 'old', source_lang: 'en', target_lang: 'de', entries: 'fox\tFuchs', entries_format: 'tsv' },
      undefined,
    );
    const cases: [Promise<Response> | Response, number, string][] = [
      [form('POST', '/v3/glossaries', {}), 400, "Parameter 'name' not specified."],
      [
        form('POST', '/v3/glossaries', {
          name: 'n',
          'dictionaries[0].source_lang': 'en',
          'dictionaries[0].target_lang': 'xx',
          'dictionaries[0].entries': 'a\tb',
        }),
        400,
        'Unsupported glossary source and target language pair.',
      ],
      [
        form('POST', '/v3/glossaries', {
          name: 'n',
          'dictionaries[0].source_lang': 'en',
          'dictionaries[0].target_lang': 'de',
          'dictionaries[0].entries': '',
        }),
        400,
        "Parameter 'dictionaries[0].entries' not specified.",
      ],
      [
        form('PATCH', `/v3/glossaries/${v2.glossary_id}`, { name: 'x' }),
        400,
        `Glossary "${v2.glossary_id}" was made with /v2/glossaries: it does not change.`,
      ],
      [app.request(`/v3/glossaries/${v2.glossary_id}/entries`), 400, "Parameter 'source_lang' not specified."],
      [
        app.request(`/v3/glossaries/${v2.glossary_id}/entries?source_lang=de&target_lang=en`),
        404,
        'Glossary not found',
      ],
      [
        app.request('/v3/glossaries/96ab91fd-e715-41a1-adeb-5d701f84a483', { method: 'DELETE' }),
        404,
        'Glossary not found',
      ],
      [app.request('/v3/style_rules'), 404, 'Not found'],
    ];
    for (const [res, status, message] of cases) expect(await answer(res)).toEqual([status, { message }]);
  });

  it('with keys on: a glossary is its key’s (others get 404 and do not list it), and counts against max_glossaries', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-glossary-v3-keys-'));
    try {
      const keys = [
        { id: 'owner', sha256: hashKey('secret-owner'), max_glossaries: 2 },
        { id: 'other', sha256: hashKey('secret-other') },
      ];
      writeFileSync(path.join(dir, 'keys.json'), JSON.stringify({ keys }));
      const access = new KeyedAccess({
        keys: path.join(dir, 'keys.json'),
        store: { kind: 'file', dir: path.join(dir, 'usage') },
      });
      const keyed = createRouterApp(
        { maxBodyBytes: 1 << 20, languages: ['en', 'de'], logBodies: false },
        { upstream, logger: pino({ level: 'silent' }), glossaries: client, access },
      );
      const call = (secret: string, method: string, route: string, fields?: Record<string, string>) =>
        answer(
          keyed.request(route, {
            method,
            headers: {
              'content-type': 'application/x-www-form-urlencoded',
              authorization: `DeepL-Auth-Key ${secret}`,
            },
            ...(fields === undefined ? {} : { body: new URLSearchParams(fields).toString() }),
          }),
        );
      const dictionary = {
        'dictionaries[0].source_lang': 'en',
        'dictionaries[0].target_lang': 'de',
        'dictionaries[0].entries': 'fox\tFuchs',
      };
      const [, mine] = await call('secret-owner', 'POST', '/v3/glossaries', { name: 'one', ...dictionary });
      const id = mine.glossary_id as string;
      // A v2 glossary of the same key takes the second slot: both kinds count together.
      const v2 = { name: 'two', source_lang: 'en', target_lang: 'de', entries: 'fox\tFuchs' };
      expect((await call('secret-owner', 'POST', '/v2/glossaries', v2))[0]).toBe(201);
      expect(await call('secret-owner', 'POST', '/v3/glossaries', { name: 'three', ...dictionary })).toEqual([
        456,
        { message: 'Quota Exceeded: this key keeps 2 glossaries, the most it may.' },
      ]);
      expect(await call('secret-other', 'GET', `/v3/glossaries/${id}`)).toEqual([
        404,
        { message: 'Glossary not found' },
      ]);
      expect((await call('secret-other', 'GET', '/v3/glossaries'))[1]).toEqual({ glossaries: [] });
      expect((await call('secret-other', 'PATCH', `/v3/glossaries/${id}`, { name: 'taken' }))[0]).toBe(404);
      const translate = (secret: string) =>
        call(secret, 'POST', '/v2/translate', { text: 'x', source_lang: 'EN', target_lang: 'DE', glossary_id: id });
      expect(await translate('secret-other')).toEqual([404, { message: 'Glossary not found' }]);
      expect((await translate('secret-owner'))[0]).toBe(200);
      await access.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
