/**
 * Registrations outlive the process (wlm/snapshot.ts): every management change is saved, a new model server
 * on the same snapshot folder serves the same models with the same settings, and a corrupt or partial snapshot is
 * never loaded (the previous one is).
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SnapshotStore, type SavedModel } from '../wlm/snapshot.js';
import { archiveModels } from '../tools/archiver.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

let snapshotDir: string;
const servers: TestServer[] = [];

/** `entries`: the store entries there are (default all three); a saved model whose entry is missing cannot register. */
async function start(entries = ['echo', 'other', 'echo-2']): Promise<TestServer> {
  // A second version of "echo" in a store entry of its own, `echo-2` (registered with model_name=echo). The store
  // holds `unsaved` too, an entry no snapshot names: a store is never empty (the archiver refuses no names).
  const t = await startTestServer({
    entries: ['unsaved', ...entries.filter((e) => e !== 'echo-2')],
    versionedEntries: entries.includes('echo-2') ? [{ names: ['echo-2'], version: '2.0' }] : [],
    snapshotDir,
  });
  servers.push(t);
  return t;
}

/** The model server goes away (its snapshot folder stays), as a process restarted by pm2. */
async function stop(t: TestServer): Promise<void> {
  servers.splice(servers.indexOf(t), 1);
  await t.close();
}

async function describeModel(t: TestServer, name: string, version = '') {
  const res = await call(`${t.management}/models/${name}${version ? `/${version}` : ''}`);
  expect(res.status).toBe(200);
  return res.body[0];
}

beforeEach(() => {
  snapshotDir = mkdtempSync(path.join(tmpdir(), 'mt-snapshot-'));
});
afterEach(async () => {
  await Promise.all(servers.splice(0).map((t) => t.close()));
  rmSync(snapshotDir, { recursive: true, force: true });
});

describe('registrations survive a restart', () => {
  it('register, scale, set-default, unregister: a new process serves the same models with the same settings', async () => {
    const first = await start();
    const post = async (query: string) =>
      expect((await call(`${first.management}/models?${query}`, { method: 'POST' })).status).toBe(200);
    await post('url=echo&batch_size=8&max_batch_delay=20&initial_workers=1&response_timeout=30');
    await post('url=echo-2&model_name=echo&batch_size=2&initial_workers=1');
    await post('url=other&initial_workers=1');
    const put = async (route: string) =>
      expect((await call(`${first.management}/models/${route}`, { method: 'PUT' })).status).toBe(200);
    await put('other?min_worker=2&max_worker=3&synchronous=true');
    await put('echo/2.0/set-default');
    const before = [
      await describeModel(first, 'echo', '1.0'),
      await describeModel(first, 'echo', '2.0'),
      await describeModel(first, 'other'),
    ];
    await stop(first);

    const second = await start();
    const listed = await call(`${second.management}/models`);
    expect(listed.body.models.map((m: { modelName: string }) => m.modelName)).toEqual(['echo', 'other']);
    const after = [
      await describeModel(second, 'echo', '1.0'),
      await describeModel(second, 'echo', '2.0'),
      await describeModel(second, 'other'),
    ];
    const settings = [
      'modelVersion',
      'modelUrl',
      'batchSize',
      'maxBatchDelay',
      'responseTimeout',
      'minWorkers',
      'maxWorkers',
      'handler',
    ];
    for (const [i, now] of after.entries()) {
      for (const key of settings) expect(now[key], `${now.modelName} ${key}`).toEqual(before[i][key]);
      expect(now.loadedAtStartup).toBe(true);
    }
    expect(after[2]).toMatchObject({ minWorkers: 2, maxWorkers: 3 });
    // The default version is the one set, not the first registered.
    expect((await describeModel(second, 'echo')).modelVersion).toBe('2.0');
    const reply = await call(`${second.inference}/predictions/echo`, { body: { src_lang: 'en', src_text: 'hi' } });
    expect(reply.status).toBe(200);

    // Unregister is saved too.
    expect((await call(`${second.management}/models/other`, { method: 'DELETE' })).status).toBe(200);
    await stop(second);
    const third = await start();
    expect((await call(`${third.management}/models`)).body.models).toEqual([{ modelName: 'echo', modelUrl: 'echo-2' }]);
  }, 60_000);
});

const model = (name: string, fields: Partial<SavedModel> = {}): SavedModel => ({
  name,
  version: '1.0',
  url: name,
  handler: 'echo',
  runtime: 'node',
  batchSize: 4,
  maxBatchDelayMs: 10,
  responseTimeoutS: 30,
  startupTimeoutS: 60,
  minWorkers: 1,
  maxWorkers: 1,
  isDefault: true,
  ...fields,
});

const names = (models: readonly SavedModel[] | undefined) => models?.map((m) => `${m.name}/${m.version}`);
const listed = async (t: TestServer) =>
  (await call(`${t.management}/models`)).body.models.map((m: { modelName: string }) => m.modelName);

describe('a snapshot never goes backwards (issue 40, item 6)', () => {
  it('a start with the store unreadable keeps the snapshot: the next start, store back, restores every model', async () => {
    const store = new SnapshotStore(snapshotDir);
    store.save([model('echo')]);
    store.save([model('echo'), model('other')]);

    const away = await start([]);
    expect(await listed(away)).toEqual([]);
    await stop(away);
    // What the failed start could not register is still the snapshot, and the previous file a good copy of it, never
    // emptied: a torn current file falls back to the same models.
    expect(names(new SnapshotStore(snapshotDir).load()?.models)).toEqual(['echo/1.0', 'other/1.0']);
    const previous = JSON.parse(readFileSync(path.join(snapshotDir, 'models.prev.json'), 'utf8'));
    expect(names(previous.models)).toEqual(['echo/1.0', 'other/1.0']);

    const back = await start();
    expect(await listed(back)).toEqual(['echo', 'other']);
  }, 30_000);

  it('a model that could not be restored is retried, kept in every save meanwhile, and keeps its default', async () => {
    new SnapshotStore(snapshotDir).save([
      model('echo', { isDefault: false }),
      model('echo', { version: '2.0', url: 'echo-2' }),
      model('other'),
    ]);
    const t = await start(['echo']);
    expect(await listed(t)).toEqual(['echo']);
    // A management change while two models are pending saves them too, as they were.
    expect(
      (await call(`${t.management}/models/echo?min_worker=1&max_worker=2&synchronous=true`, { method: 'PUT' })).status,
    ).toBe(200);
    const saved = new SnapshotStore(snapshotDir).load()!.models;
    expect(saved.map((m) => [m.name, m.version, m.isDefault])).toEqual([
      ['echo', '1.0', false],
      ['echo', '2.0', true],
      ['other', '1.0', true],
    ]);

    // The store comes back: the retry registers them, without a restart.
    archiveModels({ modelDir: t.modelDir, store: t.store, names: ['other'], handler: 'echo' });
    archiveModels({ modelDir: t.modelDir, store: t.store, names: ['echo-2'], handler: 'echo', version: '2.0' });
    await until('the pending models registered', async () => (await listed(t)).length === 2, 20_000);
    await until('echo 2.0 registered', async () => (await call(`${t.management}/models/echo/2.0`)).status === 200);
    expect((await describeModel(t, 'echo')).modelVersion).toBe('2.0');
    expect(names(new SnapshotStore(snapshotDir).load()!.models)).toEqual(['echo/1.0', 'echo/2.0', 'other/1.0']);
    expect((await call(`${t.inference}/predictions/other`, { body: { src_lang: 'en', src_text: 'hi' } })).status).toBe(
      200,
    );
  }, 40_000);

  it('unregistering a pending model takes it out of the snapshot', async () => {
    new SnapshotStore(snapshotDir).save([model('echo'), model('other')]);
    const t = await start(['echo']);
    expect((await call(`${t.management}/models/other`, { method: 'DELETE' })).status).toBe(200);
    expect(names(new SnapshotStore(snapshotDir).load()!.models)).toEqual(['echo/1.0']);
    expect((await call(`${t.management}/models/other`, { method: 'DELETE' })).status).toBe(404);
  }, 30_000);

  it('saving nothing twice keeps the last registrations as the previous file', () => {
    const store = new SnapshotStore(snapshotDir);
    store.save([model('echo')]);
    store.save([]);
    store.save([]);
    rmSync(path.join(snapshotDir, 'models.json'));
    expect(names(store.load()?.models)).toEqual(['echo/1.0']);
  });
});

describe('a corrupt or partial snapshot is never loaded', () => {
  it.each([
    ['truncated (a write cut short)', (text: string) => text.slice(0, text.length / 2)],
    ['garbage', () => '\u0000\u0000\u0000'],
    ['empty', () => ''],
    ['valid JSON, wrong checksum', (text: string) => text.replace('"other"', '"otter"')],
    ['valid JSON, bad shape', () => JSON.stringify({ format: 'mt-serve-models/1', models: 'x' })],
  ])(
    '%s: the previous snapshot is loaded and the bad one set aside',
    async (_, corrupt) => {
      const store = new SnapshotStore(snapshotDir);
      store.save([model('echo')]);
      store.save([model('echo'), model('other')]);
      const current = path.join(snapshotDir, 'models.json');
      writeFileSync(current, corrupt(readFileSync(current, 'utf8')));

      const t = await start();
      expect((await call(`${t.management}/models`)).body.models.map((m: { modelName: string }) => m.modelName)).toEqual(
        ['echo'],
      );
      expect((await call(`${t.inference}/predictions/echo`, { body: { src_lang: 'en', src_text: 'hi' } })).status).toBe(
        200,
      );
      const files = readdirSync(snapshotDir);
      expect(files.some((f) => f.startsWith('models.json.corrupt-'))).toBe(true);
      // The restored state was saved again: a good current file, loadable.
      expect(new SnapshotStore(snapshotDir).load()!.models.map((m) => m.name)).toEqual(['echo']);
    },
    30_000,
  );

  it('a save cut between its renames (no current file, a leftover temp file) restores the previous one', () => {
    const store = new SnapshotStore(snapshotDir);
    store.save([model('echo')]);
    store.save([model('echo'), model('other')]);
    rmSync(path.join(snapshotDir, 'models.json'));
    writeFileSync(path.join(snapshotDir, 'models.json.tmp-1'), '{"format":');
    expect(store.load()!.models.map((m) => m.name)).toEqual(['echo']);
  });

  it('both files corrupt: starts with no model and says so', async () => {
    writeFileSync(path.join(snapshotDir, 'models.json'), '{');
    writeFileSync(path.join(snapshotDir, 'models.prev.json'), '{');
    const t = await start();
    expect((await call(`${t.management}/models`)).body.models).toEqual([]);
    expect(readdirSync(snapshotDir).filter((f) => f.includes('.corrupt-'))).toHaveLength(2);
  });
});
