/**
 * Dispatch rounds for workers whose handler cannot merge work (worker-pool.ts): real server, real worker
 * processes (echo reporting `mergesWork: false` through the test-only `no-merge` fault). The spawner wraps the
 * real fork only to record the IPC traffic: what was sent, and how many batches were in flight at that moment.
 */
import type { ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { forkWorker } from '../frontend/server.js';
import type { FromWorker, ToWorker } from '../protocol.js';
import { call, metricValue, startTestServer, until, type TestServer } from './helpers.js';

/** One dispatch as the worker received it: the models of its batches (one per batch) and their sizes. */
interface Dispatch {
  type: 'batch' | 'round';
  batches: { model: string; size: number }[];
  /** Batches of this worker sent and not yet `batch-done` when this one was sent. */
  inFlightBefore: number;
}

/** The real worker spawner, recording every dispatch it carries. */
function recordingSpawner(dispatches: Dispatch[]): (workerId: string) => ChildProcess {
  const fork = forkWorker('warn');
  return (workerId) => {
    const child = fork(workerId);
    const inFlight = new Set<number>();
    const send = child.send.bind(child) as (message: ToWorker) => boolean;
    child.send = ((message: ToWorker) => {
      if (message.type === 'batch' || message.type === 'round') {
        const batches = message.type === 'batch' ? [message] : message.batches;
        dispatches.push({
          type: message.type,
          batches: batches.map((b) => ({ model: b.items[0]!.model, size: b.items.length })),
          inFlightBefore: inFlight.size,
        });
        for (const b of batches) inFlight.add(b.batchId);
      }
      return send(message);
    }) as typeof child.send;
    child.on('message', (message: FromWorker) => {
      if (message.type === 'batch-done') inFlight.delete(message.batchId);
    });
    return child;
  };
}

const predict = (t: TestServer, model: string, text: string | string[]) =>
  call(`${t.inference}/predictions/${model}`, { body: { src_lang: 'en', src_text: text } });

async function register(t: TestServer, query: string): Promise<void> {
  const res = await call(`${t.management}/models?${query}`, { method: 'POST' });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

async function queued(t: TestServer, model: string): Promise<number> {
  return (await call(`${t.management}/models/${model}`)).body[0].jobQueueStatus.pendingRequests as number;
}

describe('dispatch rounds (non-merging workers)', () => {
  let t: TestServer | undefined;
  afterEach(async () => {
    await t?.close();
    t = undefined;
  });

  /**
   * One ko job keeps the (slow) worker busy; 3 ko and 2 ru jobs arrive meanwhile. Returns what the worker got.
   * `fault` decides whether the worker merges work.
   */
  async function busyWorkerScenario(fault: string): Promise<Dispatch[]> {
    const dispatches: Dispatch[] = [];
    const server = await startTestServer({
      config: { batchPolicy: 'immediate' },
      entries: ['ko', 'ru'],
      faults: { ko: fault, ru: fault },
      spawn: recordingSpawner(dispatches),
    });
    t = server;
    // Same fault on both: one engine (one worker) serves both models.
    await register(server, 'url=ko&batch_size=8&max_batch_delay=5');
    await register(server, 'url=ru&batch_size=8&max_batch_delay=5');
    const first = predict(server, 'ko', 'k0');
    await until('the first batch on the worker', () => dispatches.length === 1);
    const later = [predict(server, 'ko', ['k1', 'k2', 'k3']), predict(server, 'ru', 'r0'), predict(server, 'ru', 'r1')];
    const answers = await Promise.all([first, ...later]);
    expect(answers.map((a) => a.body)).toEqual([
      { translated: 'k0' },
      { translated: ['k1', 'k2', 'k3'] },
      { translated: 'r0' },
      { translated: 'r1' },
    ]);
    return dispatches;
  }

  it('a non-merging worker never has two batches in flight; when it frees, every waiting model leaves in one round', async () => {
    const dispatches = await busyWorkerScenario('no-merge,slow:1500');
    // Every dispatch reached an idle worker.
    for (const d of dispatches) expect(d.inFlightBefore).toBe(0);
    // The first job ran alone; everything that arrived meanwhile left together, one batch per model, in ONE message.
    expect(dispatches[0]).toEqual({ type: 'batch', batches: [{ model: 'ko', size: 1 }], inFlightBefore: 0 });
    expect(dispatches.slice(1)).toEqual([
      {
        type: 'round',
        batches: expect.arrayContaining([
          { model: 'ko', size: 3 },
          { model: 'ru', size: 2 },
        ]) as unknown,
        inFlightBefore: 0,
      },
    ]);
    expect(dispatches[1]!.batches).toHaveLength(2);
  });

  it('a merging worker still takes batches while it works (up to max(2, models) in flight)', async () => {
    const dispatches = await busyWorkerScenario('slow:1500');
    expect(dispatches.every((d) => d.type === 'batch')).toBe(true);
    expect(Math.max(...dispatches.map((d) => d.inFlightBefore))).toBe(1);
    expect(dispatches.some((d) => d.inFlightBefore > 0)).toBe(true);
  });

  it('torchserve policy: a due batch takes the other models’ waiting jobs along, window or not', async () => {
    const dispatches: Dispatch[] = [];
    const server = await startTestServer({
      config: { batchPolicy: 'torchserve' },
      entries: ['ko', 'ru'],
      faults: { ko: 'no-merge', ru: 'no-merge' },
      spawn: recordingSpawner(dispatches),
    });
    t = server;
    await register(server, 'url=ko&batch_size=4&max_batch_delay=30000');
    await register(server, 'url=ru&batch_size=4&max_batch_delay=30000');
    const ru = [predict(server, 'ru', 'r0'), predict(server, 'ru', 'r1')];
    // ru's window is 30 s: its jobs wait. ko fills its batch, which is due at once.
    await until('2 ru jobs queued', async () => (await queued(server, 'ru')) === 2);
    const ko = predict(server, 'ko', ['k0', 'k1', 'k2', 'k3']);
    const answers = await Promise.all([...ru, ko]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(dispatches).toEqual([
      {
        type: 'round',
        batches: [
          { model: 'ko', size: 4 },
          { model: 'ru', size: 2 },
        ],
        inFlightBefore: 0,
      },
    ]);
  });

  it('torchserve policy: 64 concurrent requests to batch_size 64 still leave as ONE batch', async () => {
    const dispatches: Dispatch[] = [];
    const server = await startTestServer({
      config: { batchPolicy: 'torchserve' },
      faults: { echo: 'no-merge' },
      spawn: recordingSpawner(dispatches),
    });
    t = server;
    await register(server, 'url=echo&batch_size=64&max_batch_delay=30000');
    const first = Array.from({ length: 63 }, (_, i) => predict(server, 'echo', `t${i}`));
    await until('63 queued jobs', async () => (await queued(server, 'echo')) === 63);
    const answers = await Promise.all([...first, predict(server, 'echo', 't63')]);
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, body: { translated: `t${i}` } }));
    expect(dispatches).toEqual([{ type: 'batch', batches: [{ model: 'echo', size: 64 }], inFlightBefore: 0 }]);
    const labels = { model_name: 'echo', model_version: '1.0' };
    const text = (await call(`${server.metrics}/metrics`)).body as string;
    expect(metricValue(text, 'mt_batch_size_count', labels)).toBe(1);
    expect(metricValue(text, 'mt_batch_size_sum', labels)).toBe(64);
  });
});
