import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { glossaryEntries } from '../text/glossary.js';
import { GlossaryStore } from './glossary-store.js';

describe('GlossaryStore', () => {
  const dirs: string[] = [];
  const folder = () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'glossaries-'));
    dirs.push(dir);
    return dir;
  };
  afterEach(() => dirs.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));
  const fields = { name: 'n', sourceLang: 'en', targetLang: 'de', entries: glossaryEntries([['fox', 'Fuchs']]) };

  it('outlives the process: a new store on the folder has every glossary; a bad file is skipped', () => {
    const dir = folder();
    const store = new GlossaryStore(dir);
    const made = store.put(fields);
    store.put({ ...fields, id: 'second' });
    writeFileSync(path.join(dir, 'broken.json'), '{"glossary_id": "broken", "entr');
    const again = new GlossaryStore(dir);
    expect(again.list().map((g) => g.id)).toEqual([made.id, 'second']);
    expect([...again.get(made.id).entries]).toEqual([['fox', 'Fuchs']]);
    again.delete('second');
    expect(new GlossaryStore(dir).find('second')).toBeUndefined();
    // Atomic writes leave no temp files behind.
    expect(readdirSync(dir).sort()).toEqual(['broken.json', `${made.id}.json`].sort());
  });

  it('the same id again: the same content is a no-op, other content a 409', () => {
    const store = new GlossaryStore(folder());
    store.put({ ...fields, id: 'g' });
    expect(store.put({ ...fields, id: 'g' }).id).toBe('g');
    expect(() => store.put({ ...fields, id: 'g', name: 'other' })).toThrow(/already exists with other content/);
    expect(() => store.put({ ...fields, id: '../x' })).toThrow(/letters, digits and dashes/);
  });

  it('multilingual glossaries: kept on disk beside v2 ones, one id space, v2 ones seen as one dictionary and unchanged', () => {
    const dir = folder();
    const store = new GlossaryStore(dir);
    store.put({ ...fields, id: 'v2', owner: 'a' });
    const dictionary = (sourceLang: string, targetLang: string, pairs: [string, string][]) => ({
      sourceLang,
      targetLang,
      entries: glossaryEntries(pairs),
    });
    const v3 = store.putMultilingual({
      id: 'v3',
      name: 'm',
      owner: 'a',
      dictionaries: [dictionary('en', 'de', [['fox', 'Fuchs']]), dictionary('de', 'en', [['Fuchs', 'fox']])],
    });
    expect(store.putMultilingual({ ...v3 })).toBe(v3);
    expect(() => store.putMultilingual({ ...v3, id: 'v2' })).toThrow(/already exists/);
    expect(() => store.put({ ...fields, id: 'v3', owner: 'a' })).toThrow(/already exists/);
    expect(() =>
      store.putMultilingual({ ...v3, id: 'twice', dictionaries: [v3.dictionaries[0]!, v3.dictionaries[0]!] }),
    ).toThrow('Two dictionaries are for the language pair en-de.');
    store.updateMultilingual('v3', 'a', (g) => ({ name: 'renamed', dictionaries: g.dictionaries.slice(1) }));
    expect(() => store.updateMultilingual('v2', 'a', (g) => g)).toThrow(/made with \/v2\/glossaries/);
    expect(() => store.getMultilingual('v3', 'b')).toThrow(/not found/);

    const again = new GlossaryStore(dir);
    const seen = again
      .listMultilingual('a')
      .map((g) => [g.id, g.name, g.dictionaries.map((d) => [d.sourceLang, [...d.entries]])]);
    expect(seen).toEqual([
      ['v2', 'n', [['en', [['fox', 'Fuchs']]]]],
      ['v3', 'renamed', [['de', [['Fuchs', 'fox']]]]],
    ]);
    // The v2 API sees its own kind only; a delete takes either.
    expect(again.list('a').map((g) => g.id)).toEqual(['v2']);
    again.delete('v3', 'a');
    expect(new GlossaryStore(dir).listMultilingual('a').map((g) => g.id)).toEqual(['v2']);
  });
});
