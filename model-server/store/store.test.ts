import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveEntry } from '../../common/entry.js';
import { archiveModels, archiveSetupConfig, ARCHIVER_VERSION } from '../tools/archiver.js';
import { formatCreatedOn, manifestPath, resolveStoreEntry } from './manifest.js';

describe('store: archiver, manifests, url resolution', () => {
  let dir: string;
  let store: string;
  let modelDir: string;
  beforeEach(() => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-store-'));
    store = path.join(dir, 'model_store');
    modelDir = path.join(dir, 'models', 'tiny');
    mkdirSync(modelDir, { recursive: true });
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('writes TorchServe’s no-archive layout, one small manifest per name, referring to the one model folder', () => {
    const files = archiveModels({
      modelDir,
      store,
      names: ['ko', 'en'],
      handler: 'translation',
      version: '1.0',
      now: new Date(2024, 0, 2, 3, 4, 5),
    });
    expect(files).toEqual([manifestPath(path.join(store, 'ko')), manifestPath(path.join(store, 'en'))]);
    expect(JSON.parse(readFileSync(files[0]!, 'utf8'))).toEqual({
      createdOn: '02/01/2024 03:04:05',
      runtime: 'node',
      model: { modelName: 'ko', modelVersion: '1.0', handler: 'translation', modelDir },
      archiverVersion: ARCHIVER_VERSION,
    });
    expect(resolveStoreEntry(store, 'en').manifest.model.modelName).toBe('en');
    // The seed registers `ko.mar`: the same entry.
    expect(resolveStoreEntry(store, 'ko.mar').dir).toBe(path.join(store, 'ko'));
  });

  it("archives setup_config.json: its languages on the model folder, each pair on the pair's own", () => {
    const opus = path.join(dir, 'models', 'opus-mt-en-de');
    mkdirSync(opus, { recursive: true });
    const setup = { cuda_id: { ko: '0', de: '1' }, pairs: { 'en-de': { model_dir: opus, cuda_id: '0' } } };
    const files = archiveSetupConfig(setup, { modelDir, store, handler: 'translation' });
    expect(files).toEqual(['ko', 'de', 'en-de'].map((name) => manifestPath(path.join(store, name))));
    const dirOf = (name: string) => resolveStoreEntry(store, name).manifest.model.modelDir;
    expect(['ko', 'de', 'en-de'].map(dirOf)).toEqual([modelDir, modelDir, opus]);
  });

  it('refuses bad options naming them', () => {
    const base = { modelDir, store, names: ['ko'], handler: 'translation' };
    expect(() => archiveModels({ ...base, modelDir: path.join(dir, 'nope') })).toThrow(
      /--model-dir .* is not a folder/,
    );
    expect(() => archiveModels({ ...base, handler: 'pytorch' })).toThrow(/--handler "pytorch" is not one of/);
    expect(() => archiveModels({ ...base, version: '../1' })).toThrow(/--version/);
    expect(() => archiveModels({ ...base, names: ['../evil'] })).toThrow(/model name "..\/evil"/);
  });

  it.each([
    '..',
    '.',
    '../model_store/ko',
    '/etc/passwd',
    'ko/../../x',
    'file:ko',
    'http://x/ko.mar',
    's3://b/ko',
    'a\\b',
  ])('refuses url %j with 400', (url) => {
    archiveModels({ modelDir, store, names: ['ko'], handler: 'echo' });
    expect(() => resolveStoreEntry(store, url)).toThrow(
      expect.objectContaining({ code: 'BAD_REQUEST', status: 400 }) as Error,
    );
  });

  it('refuses an entry that is a symlink out of the store', () => {
    const outside = path.join(dir, 'outside');
    archiveModels({ modelDir, store: outside, names: ['ko'], handler: 'echo' });
    mkdirSync(store, { recursive: true });
    symlinkSync(path.join(outside, 'ko'), path.join(store, 'ko'));
    expect(() => resolveStoreEntry(store, 'ko')).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }) as Error);
  });

  it('answers 404 for a missing entry and 400 for an invalid manifest; a missing version means 1.0', () => {
    mkdirSync(store, { recursive: true });
    expect(() => resolveStoreEntry(store, 'ko')).toThrow(
      expect.objectContaining({ code: 'MODEL_NOT_FOUND', message: 'Model not found at: ko' }) as Error,
    );
    const file = manifestPath(path.join(store, 'ko'));
    mkdirSync(path.dirname(file), { recursive: true });
    writeFileSync(
      file,
      JSON.stringify({
        createdOn: 'x',
        runtime: 'node',
        model: { modelName: 'ko', handler: 'echo', modelDir },
        archiverVersion: '1',
      }),
    );
    expect(resolveStoreEntry(store, 'ko').manifest.model.modelVersion).toBe('1.0');
    writeFileSync(file, JSON.stringify({ runtime: 'python' }));
    expect(() => resolveStoreEntry(store, 'ko')).toThrow(expect.objectContaining({ code: 'BAD_REQUEST' }) as Error);
  });

  it('formats createdOn as dd/mm/YYYY HH:MM:SS', () => {
    expect(formatCreatedOn(new Date(2026, 10, 22, 9, 5, 7))).toBe('22/11/2026 09:05:07');
  });

  it('cli archive: one entry per language of setup_config.json, or the named ones; usage errors exit 2', () => {
    const cli = resolveEntry(import.meta.url, '../cli');
    const run = (...args: string[]) =>
      spawnSync(process.execPath, [...cli.execArgv, cli.file, ...args], { cwd: dir, encoding: 'utf8' });
    const setup = path.join(dir, 'setup_config.json');
    writeFileSync(setup, JSON.stringify({ cuda_id: { ko: '0', en: '0', ru: '1' } }));
    const all = run(
      'archive',
      '--model-dir',
      'models/tiny',
      '--store',
      'model_store',
      '--setup-config',
      'setup_config.json',
    );
    expect(all.status, all.stderr).toBe(0);
    expect(all.stdout.trim().split('\n')).toHaveLength(3);
    for (const name of ['ko', 'en', 'ru'])
      expect(resolveStoreEntry(store, name).manifest.model.handler).toBe('translation');

    const one = run(
      'archive',
      '--model-dir',
      'models/tiny',
      '--store',
      'model_store',
      '--name',
      'echo',
      '--handler',
      'echo',
      '--version',
      '2.0',
    );
    expect(one.status, one.stderr).toBe(0);
    expect(resolveStoreEntry(store, 'echo').manifest.model).toMatchObject({
      handler: 'echo',
      modelVersion: '2.0',
      modelDir,
    });

    expect(run('archive', '--bogus').status).toBe(2);
    expect(run('frobnicate').status).toBe(2);
    const bad = run('archive', '--model-dir', 'missing', '--name', 'x');
    expect(bad.status).toBe(1);
    expect(bad.stderr).toMatch(/--model-dir .*missing is not a folder/);
    expect(execFileSync(process.execPath, [...cli.execArgv, cli.file, 'help'], { encoding: 'utf8' })).toMatch(
      /usage: model-server archive/,
    );
  });
});
