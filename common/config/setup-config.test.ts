import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { deviceOf, entriesOf, entryFor, readSetupConfig, servedPairs, targetOf, targetsOf } from './setup-config.js';

const dir = mkdtempSync(path.join(tmpdir(), 'setup-config-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const write = (value: unknown) => {
  const file = path.join(dir, `${Math.random()}.json`);
  writeFileSync(file, JSON.stringify(value));
  return file;
};

describe('setup_config.json with pairs', () => {
  const setup = readSetupConfig(
    write({
      cuda_id: { ko: '0', de: '1' },
      pairs: {
        'en-de': { model_dir: 'models/opus-mt-en-de', cuda_id: '0' },
        'en-ja': { model_dir: 'm', cuda_id: '1' },
      },
    }),
  );

  it("keeps the seed's cuda_id and reads the pairs, each with its folder and device", () => {
    expect(setup.cuda_id).toEqual({ ko: '0', de: '1' });
    expect(entriesOf(setup)).toEqual(['ko', 'de', 'en-de', 'en-ja']);
    expect(targetsOf(setup)).toEqual(['ko', 'de', 'ja']);
    expect(['ko', 'en-de', 'en-ja', 'fr'].map((e) => deviceOf(setup, e))).toEqual(['0', '0', '1', undefined]);
    expect(targetOf('en-de')).toBe('de');
    expect(targetOf('de')).toBe('de');
  });

  it('routes a pair to its own model, else to its target (any source, auto included), else nowhere', () => {
    expect(entryFor(setup, 'en', 'de')).toBe('en-de');
    expect(entryFor(setup, 'fr', 'de')).toBe('de');
    expect(entryFor(setup, 'auto', 'de')).toBe('de');
    expect(entryFor(setup, 'en', 'ja')).toBe('en-ja');
    expect(entryFor(setup, 'fr', 'ja')).toBeUndefined();
    expect(servedPairs(setup)).toBe('any → ko, any → de, en → de, en → ja');
  });

  it('refuses a bad pair, naming it', () => {
    const bad = (pairs: unknown) => () => readSetupConfig(write({ cuda_id: { ko: '0' }, pairs }));
    expect(bad({ english: { model_dir: 'm', cuda_id: '0' } })).toThrow(/pairs\.english: .*"en-de"/);
    expect(bad({ 'en-de': { model_dir: '', cuda_id: '0' } })).toThrow(/pairs\.en-de\.model_dir: model_dir names/);
    expect(bad({ 'en-de': { model_dir: 'm', cuda_id: 'gpu' } })).toThrow(/pairs\.en-de\.cuda_id: device ids/);
  });

  it("reads the seed's file unchanged (no pairs)", () => {
    const seed = readSetupConfig(write({ cuda_id: { en: '0' } }));
    expect(seed.pairs).toBeUndefined();
    expect(entryFor(seed, 'ko', 'en')).toBe('en');
  });
});
