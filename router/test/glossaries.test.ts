import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call, startTestServer, type TestServer } from '../../model-server/test/helpers.js';
import { GlossaryClient } from '../glossaries.js';

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
});
