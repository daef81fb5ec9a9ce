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
});
