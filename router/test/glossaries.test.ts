import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { pino } from 'pino';
import { createRouterApp } from '../app.js';
import { GlossaryClient } from '../glossaries.js';
import { hashKey } from '../keys/key-ring.js';
import { KeyedAccess } from '../keys/keyed-access.js';

/** An upstream that records what the router sends it and answers every translation `x`. */
function recordingUpstream() {
  const sent: unknown[] = [];
  const upstream = {
    translate: async (request: { body: unknown }) => {
      sent.push(request.body);
      return { body: new TextEncoder().encode('{"translated":"x"}') as Uint8Array<ArrayBuffer>, headers: {} };
    },
    ping: async () => true,
  };
  return { sent, upstream };
}

/** The router's glossary client over two real model servers (echo models: glossaries need no engine). */
describe('GlossaryClient over several model servers', () => {
  let a: TestServer;
  let b: TestServer;
  const hosts: string[] = [];
  const client = new GlossaryClient({ origins: () => hosts, authorizationHeader: () => undefined }, 5_000);
  const fields = {
    name: 'animals',
    source_lang: 'en',
    target_lang: 'de',
    entries: 'fox\tFuchs',
    entries_format: 'tsv' as const,
  };

  beforeAll(async () => {
    [a, b] = await Promise.all([startTestServer(), startTestServer()]);
    hosts.push(a.inference, b.inference);
  });
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
  });

  it('a new glossary is written to every model server under one id, and resolves to its entries', async () => {
    const made = await client.create(fields, undefined);
    for (const host of [a, b]) {
      expect((await call(`${host.inference}/glossaries/${made.glossary_id}`)).body.name).toBe('animals');
    }
    expect(await client.resolve(made.glossary_id, undefined)).toEqual({ info: made, entries: { fox: 'Fuchs' } });
  });

  it('a host that lacks a glossary does not hide it: reads take the first host that has it', async () => {
    const made = await client.create(fields, 'key-1');
    await call(`${a.inference}/glossaries/${made.glossary_id}`, {
      method: 'DELETE',
      headers: { 'x-glossary-owner': 'key-1' },
    });
    expect((await client.info(made.glossary_id, 'key-1'))?.glossary_id).toBe(made.glossary_id);
    expect(await client.entries(made.glossary_id, 'key-1')).toBe('fox\tFuchs');
    expect((await client.list('key-1')).map((g) => g.glossary_id)).toEqual([made.glossary_id]);
    // Another owner sees nothing of it.
    expect(await client.info(made.glossary_id, 'key-2')).toBeUndefined();
    expect(await client.list('key-2')).toEqual([]);
    expect(await client.delete(made.glossary_id, 'key-2')).toBe(false);
    expect(await client.delete(made.glossary_id, 'key-1')).toBe(true);
    expect(await client.info(made.glossary_id, 'key-1')).toBeUndefined();
  });

  it('bad entries are the model server’s 400; no reachable model server is a 502', async () => {
    await expect(client.create({ ...fields, entries: 'fox' }, undefined)).rejects.toMatchObject({
      code: 'BAD_REQUEST',
      message: expect.stringMatching(/entry 1 must be a source and a target term/),
    });
    const nowhere = new GlossaryClient(
      { origins: () => ['http://127.0.0.1:9'], authorizationHeader: () => undefined },
      1_000,
    );
    await expect(nowhere.list(undefined)).rejects.toMatchObject({ code: 'UPSTREAM_UNAVAILABLE' });
  });

  it('POST / with a glossary_id sends its entries inline; an unknown id or another pair is a 400', async () => {
    const made = await client.create({ ...fields, target_lang: 'ko' }, undefined);
    const { sent, upstream } = recordingUpstream();
    const app = createRouterApp(
      { maxBodyBytes: 4096, languages: ['ko', 'de'], logBodies: false },
      { upstream, logger: pino({ level: 'silent' }), glossaries: client },
    );
    const post = (body: object) => app.request('/', { method: 'POST', body: JSON.stringify(body) });
    const res = await post({ src_lang: 'en', src_text: 'a fox', tgt_lang: 'ko', glossary_id: made.glossary_id });
    expect(res.status).toBe(200);
    expect(sent).toEqual([{ src_lang: 'en', src_text: 'a fox', glossary: { fox: 'Fuchs' } }]);
    for (const [body, message] of [
      [{ src_lang: 'en', src_text: 'a fox', tgt_lang: 'ko', glossary_id: 'nope' }, /Unknown glossary_id "nope"/],
      [{ src_lang: 'en', src_text: 'a fox', tgt_lang: 'de', glossary_id: made.glossary_id }, /not en → de/],
      [{ src_lang: 'fr', src_text: 'un renard', tgt_lang: 'ko', glossary_id: made.glossary_id }, /not fr → ko/],
    ] as const) {
      const refused = await post(body);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { message: string }).message).toMatch(message);
    }
    expect(sent).toHaveLength(1);
  });

  it("DeepL's /v2/translate with a glossary for another pair: DeepL's 400, which its clients match on", async () => {
    const made = await client.create(fields, undefined);
    const { sent, upstream } = recordingUpstream();
    const app = createRouterApp(
      { maxBodyBytes: 4096, languages: ['en', 'de'], logBodies: false },
      { upstream, logger: pino({ level: 'silent' }), glossaries: client },
    );
    const translate = (source: string, target: string) =>
      app.request('/v2/translate', {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          text: ['Test'],
          source_lang: source,
          target_lang: target,
          glossary_id: made.glossary_id,
        }),
      });
    const refused = await translate('DE', 'EN-US');
    expect([refused.status, await refused.json()]).toEqual([
      400,
      { message: `No dictionary found for language pair de-en in glossary ${made.glossary_id}.` },
    ]);
    expect(sent).toEqual([]);
    await translate('EN', 'DE'); // the recording upstream's answer is no DeepL answer: only what was sent is read
    expect(sent).toEqual([{ src_lang: 'en', src_text: ['Test'], glossary: { fox: 'Fuchs' } }]);
  });

  it('with keys on: a key keeps at most its max_glossaries, every glossary call counts, POST / uses its own', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'mt-glossary-keys-'));
    try {
      const keys = [
        { id: 'few', sha256: hashKey('secret-few'), max_glossaries: 2 },
        { id: 'other', sha256: hashKey('secret-other') },
        { id: 'slow', sha256: hashKey('secret-slow'), requests_per_second: 1 },
      ];
      writeFileSync(path.join(dir, 'keys.json'), JSON.stringify({ keys }));
      const access = new KeyedAccess({
        keys: path.join(dir, 'keys.json'),
        store: { kind: 'file', dir: path.join(dir, 'usage') },
      });
      const { sent, upstream } = recordingUpstream();
      const app = createRouterApp(
        { maxBodyBytes: 4096, languages: ['en', 'de'], logBodies: false },
        { upstream, logger: pino({ level: 'silent' }), glossaries: client, access },
      );
      const create = (secret: string, name: string) =>
        app.request('/v2/glossaries', {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `DeepL-Auth-Key ${secret}` },
          body: JSON.stringify({
            name,
            source_lang: 'en',
            target_lang: 'de',
            entries: 'fox\tFuchs',
            entries_format: 'tsv',
          }),
        });
      const first = (await (await create('secret-few', 'one')).json()) as { glossary_id: string };
      expect((await create('secret-few', 'two')).status).toBe(201);
      const third = await create('secret-few', 'three');
      expect([third.status, await third.json()]).toEqual([
        456,
        { message: 'Quota Exceeded: this key keeps 2 glossaries, the most it may.' },
      ]);
      expect((await create('secret-other', 'mine')).status).toBe(201);

      let refused: Response | undefined;
      for (let i = 0; i < 20 && refused === undefined; i++) {
        const res = await app.request('/v2/glossaries', { headers: { authorization: 'DeepL-Auth-Key secret-slow' } });
        if (res.status !== 200) refused = res;
      }
      expect([refused?.status, refused?.headers.get('retry-after')]).toEqual([429, '1']);
      expect((await access.report()).find((k) => k.id === 'few')).toMatchObject({ requests: 3, characters: 0 });

      // The native API resolves a glossary_id as its key's: another key's glossary is unknown to it.
      const translate = (secret: string) =>
        app.request('/', {
          method: 'POST',
          headers: { authorization: `Bearer ${secret}` },
          body: JSON.stringify({ src_lang: 'en', src_text: 'a fox', tgt_lang: 'de', glossary_id: first.glossary_id }),
        });
      expect((await translate('secret-few')).status).toBe(200);
      expect((await translate('secret-other')).status).toBe(400);
      expect(sent).toEqual([{ src_lang: 'en', src_text: 'a fox', glossary: { fox: 'Fuchs' } }]);
      await access.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
