/**
 * Issue 6.2 — faults, with real processes (router → model server → workers) and traffic running: a SIGKILLed
 * worker, a hung worker, the model server stopped and started again, a model that cannot load. Every request
 * sent is tallied (2xx / which error / unanswered); unanswered must be 0, and the errors must be exactly the ones
 * the fault explains.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { archiveModels } from '../../model-server/tools/archiver.js';
import { background, drive, send, Tally, type Outcome } from '../../harness/load.js';
import { stopAll } from '../../harness/process-registry.js';
import { until } from '../../harness/polling.js';
import { startStack, translateBody, type Stack } from '../../harness/stack.js';

interface Worker {
  id: string;
  pid: number;
  status: string;
}
const workerOf = async (stack: Stack, model: string): Promise<Worker | undefined> => {
  const res = await fetch(`${stack.management}/models/${model}`);
  const [described] = (await res.json()) as [{ workers: Worker[] }];
  return described.workers[0];
};

afterAll(stopAll);

describe('faults under load (router → model server with fault-injected workers)', () => {
  let stack: Stack;
  beforeAll(async () => {
    // An engine (one worker) per language: en's and ko's slow, fr's hangs on every batch.
    stack = await startStack({
      languages: ['en', 'ko', 'fr'],
      handler: 'echo',
      faults: { en: 'slow:100', ko: 'slow:100', fr: 'hang-on-batch' },
      env: { ENGINE_SHARING: 'language' },
      register: false,
    });
    for (const [lang, responseTimeoutS] of [
      ['en', 20],
      ['ko', 20],
      ['fr', 1],
    ] as const) {
      const res = await stack.register(lang, { batchSize: 4, maxBatchDelayMs: 5, responseTimeoutS });
      expect(res.status).toBe(200);
    }
  });
  afterAll(() => stack?.stop());

  it('SIGKILL of a worker under load: only its in-flight jobs fail (500 "Worker died."), it restarts, traffic recovers', async () => {
    const router = stack.routerUrls[0]!;
    const before = (await workerOf(stack, 'en'))!;
    expect(before.status).toBe('READY');
    const log: { at: number; o: Outcome }[] = [];
    const load = background({
      url: () => router,
      body: (i) => translateBody(i % 2 ? 'en' : 'ko', `text ${i}`),
      concurrency: 12,
      onOutcome: (o) => log.push({ at: performance.now(), o }),
    });
    await until('traffic to flow', () => log.filter((l) => l.o.status === 200).length >= 20);
    const killedAt = performance.now();
    process.kill(before.pid, 'SIGKILL');
    const after = await until('a restarted worker', async () => {
      const w = await workerOf(stack, 'en');
      return w?.status === 'READY' && w.pid !== before.pid ? w : undefined;
    });
    const restartedAt = performance.now();
    await until(
      '40 answers after the restart',
      () => log.filter((l) => l.at > restartedAt && l.o.status === 200).length >= 40,
    );
    const tally = await load.stop();

    expect(tally.unanswered, tally.toString()).toBe(0);
    expect(tally.malformed).toBe(0);
    // The only failures are the jobs the dead worker held: at most 2 batches of 4 in flight on it.
    const failed = log.filter((l) => l.o.status !== 200);
    expect(failed.length, tally.toString()).toBeGreaterThan(0);
    expect(
      failed.length,
      JSON.stringify(failed.map((f) => [Math.round(f.at - killedAt), f.o.status, f.o.message])),
    ).toBeLessThanOrEqual(8);
    for (const f of failed)
      expect(f.o).toMatchObject({ status: 500, kind: 'InternalServerException', message: 'Worker died.' });
    expect(failed.every((f) => f.at >= killedAt && f.at < restartedAt)).toBe(true);
    // Recovered without operator action: everything answered after the restart succeeded.
    expect(log.filter((l) => l.at > restartedAt).every((l) => l.o.status === 200)).toBe(true);
    expect(after.id).not.toBe(before.id);
    expect(tally.ok + failed.length).toBe(tally.sent);
  });

  it('a hung worker: its jobs get 504 at response_timeout (1 s), it is killed and replaced; other languages keep serving', async () => {
    const router = stack.routerUrls[0]!;
    const hung = (await workerOf(stack, 'fr'))!;
    const good = background({ url: () => router, body: (i) => translateBody('ko', `fine ${i}`), concurrency: 4 });
    const stuck = await drive({
      url: () => router,
      body: (i) => translateBody('fr', `stuck ${i}`),
      concurrency: 3,
      count: 6,
    });
    const replacement = await until('the hung worker to be replaced', async () => {
      const w = await workerOf(stack, 'fr');
      return w !== undefined && w.pid !== hung.pid && w.pid > 0 ? w : undefined;
    });
    const others = await good.stop();

    expect(stuck.toJSON(), stuck.toString() + JSON.stringify([...stuck.messages])).toMatchObject({
      sent: 6,
      ok: 0,
      errors: { '504 RequestTimeoutException': 6 },
      unanswered: 0,
    });
    // Bounded by the timeout: ~1 s each (a job queued behind a hung batch also expires at its own 1 s).
    for (const l of [...stuck.messages.keys()]) expect(l).toMatch(/^Request timed out\b/);
    expect(replacement.id).not.toBe(hung.id);
    expect(() => process.kill(hung.pid, 0)).toThrow();
    expect(others.toJSON()).toMatchObject({ errors: {}, unanswered: 0 });
    expect(others.ok).toBe(others.sent);
    expect(others.ok).toBeGreaterThan(5);
  });

  it('the hung requests took about response_timeout, not longer', async () => {
    const o = await send(stack.routerUrls[0]!, { body: translateBody('fr', 'once more'), deadlineMs: 10_000 });
    expect(o).toMatchObject({ status: 504, kind: 'RequestTimeoutException' });
    expect(o.latencyMs).toBeGreaterThanOrEqual(950);
    expect(o.latencyMs).toBeLessThan(3_000);
  });
});

describe('model server stopped and restarted; a model that cannot load (real model-server/main)', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({
      languages: ['en', 'ko'],
      handler: 'echo',
      register: { batchSize: 8, maxBatchDelayMs: 2 },
    });
  });
  afterAll(() => stack?.stop());

  it('stopped: the router answers 503 + Retry-After within a second; started again: it restores its models and recovers on its own', async () => {
    const router = stack.routerUrls[0]!;
    expect((await send(router, { body: translateBody('ko', 'before') })).status).toBe(200);
    const exit = await stack.modelServer.stop();
    expect(exit.code).toBe(0); // a clean drain

    const down = new Tally();
    const latencies: number[] = [];
    for (let i = 0; i < 20; i++) {
      const o = await send(router, { body: translateBody('en', `down ${i}`), deadlineMs: 5_000 });
      down.add(o);
      latencies.push(o.latencyMs);
    }
    // The router knew it served en: unavailable for now (a restart, as far as it can tell), not a bad gateway.
    expect(down.toJSON()).toMatchObject({
      sent: 20,
      ok: 0,
      errors: { '503 ServiceUnavailableException': 20 },
      unanswered: 0,
    });
    expect(down.messages.get('Model en is unavailable now, no model server has it ready: 1 down; retry later.')).toBe(
      20,
    );
    expect(Math.max(...latencies)).toBeLessThan(1_000);
    const health = await send(`${router}/health`, { method: 'GET' });
    expect(health.status).toBe(503);

    const started = performance.now();
    await stack.restartModelServer();
    const recovered = await until('the router to recover', async () => {
      const o = await send(router, { body: translateBody('ko', 'after'), deadlineMs: 5_000 });
      return o.status === 200 ? o : undefined;
    });
    expect(JSON.parse(recovered.body)).toEqual({ translated: 'after' });
    expect(performance.now() - started).toBeLessThan(30_000);
    const after = await drive({
      url: () => router,
      body: (i) => translateBody(i % 2 ? 'en' : 'ko', `t${i}`),
      concurrency: 8,
      count: 80,
    });
    expect(after.toJSON()).toMatchObject({ sent: 80, ok: 80, unanswered: 0 });
  });

  it('a model folder that holds no model: registration is refused naming the missing file, nothing is left registered, the others keep serving', async () => {
    // A store entry whose model folder holds no model: the registration's check of the export refuses it.
    const empty = path.join(stack.dir, 'empty-model');
    mkdirSync(empty);
    archiveModels({ modelDir: empty, store: stack.store, names: ['broken'], handler: 'translation' });
    const router = stack.routerUrls[0]!;
    const traffic = background({
      url: () => router,
      body: (i) => translateBody('ko', `meanwhile ${i}`),
      concurrency: 4,
    });
    const res = await stack.register('broken');
    const tally = await traffic.stop();

    expect(res).toEqual({
      status: 400,
      body: {
        code: 400,
        type: 'BadRequestException',
        message: `Model ${path.join(empty, 'config.json')} is missing.`,
      },
    });
    expect((await fetch(`${stack.management}/models/broken`)).status).toBe(404);
    expect(tally.toJSON()).toMatchObject({ errors: {}, unanswered: 0 });
    expect(tally.ok).toBe(tally.sent);
    expect((await send(`${stack.inference}/ping`)).status).toBe(200);
  });
});
