/**
 * Dispatch to workers (worker-pool.ts): the job cap per worker (sum of the attached models' batch sizes, bounded
 * by the worker's capacity) and rounds (everything one pass gives a worker, in one message). Real server, real
 * echo worker processes (slowed and capped through test-only faults). The spawner wraps the real fork only to
 * record the IPC traffic: what was sent, and how many jobs were in flight at that moment.
 */
import { describe, expect, it } from 'vitest';
import { forkWorker } from '../http/server.js';
import type { WorkerSpawner } from '../wlm/workers/worker-handle.js';
import type { FromWorker, ToWorker } from '../protocol.js';
import { faultSpawner } from '../../harness/fault-spawner.js';
import { call, metricValue } from '../../harness/http.js';
import { registerModel, startPerTest, type TestServer } from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';

/** One dispatch as the worker received it: the models of its batches (one per batch) and their sizes. */
interface Dispatch {
  type: 'batch' | 'round';
  batches: { model: string; size: number }[];
  /** Jobs of this worker sent and not yet in a `batch-done` when this one was sent. */
  inFlightBefore: number;
}

/** `spawn` (the real worker, or one with faults), recording every dispatch its workers carry. */
function recordingSpawner(dispatches: Dispatch[], spawn: WorkerSpawner = forkWorker('warn')): WorkerSpawner {
  return (workerId, engine) => {
    const worker = spawn(workerId, engine);
    const inFlight = new Map<number, number>();
    const send = worker.send.bind(worker);
    worker.send = (message: ToWorker) => {
      if (message.type === 'batch' || message.type === 'round') {
        const batches = message.type === 'batch' ? [message] : message.batches;
        dispatches.push({
          type: message.type,
          batches: batches.map((b) => ({ model: b.items[0]!.model, size: b.items.length })),
          inFlightBefore: [...inFlight.values()].reduce((a, b) => a + b, 0),
        });
        for (const b of batches) inFlight.set(b.batchId, b.items.length);
      }
      send(message);
    };
    worker.onMessage((message: FromWorker) => {
      if (message.type === 'batch-done') inFlight.delete(message.batchId);
    });
    return worker;
  };
}

const predict = (t: TestServer, model: string, text: string | string[]) =>
  call(`${t.inference}/predictions/${model}`, { body: { src_lang: 'en', src_text: text } });

async function queued(t: TestServer, model: string): Promise<number> {
  return (await call(`${t.management}/models/${model}`)).body[0].jobQueueStatus.pendingRequests as number;
}

describe('dispatch to workers', () => {
  let t: TestServer | undefined;
  const startServer = startPerTest();

  async function server(policy: 'immediate' | 'torchserve', fault: string, dispatches: Dispatch[]) {
    t = await startServer({
      config: { batchPolicy: policy },
      entries: ['ko', 'ru'],
      // Same fault on both: one engine (one worker) serves both models.
      spawn: recordingSpawner(dispatches, faultSpawner({ ko: fault, ru: fault })),
    });
    return t;
  }

  it('immediate: a worker with room takes each job at once; what arrives while it is full leaves in ONE round', async () => {
    const dispatches: Dispatch[] = [];
    const s = await server('immediate', 'slow:1500', dispatches);
    // Cap: 4 + 1 = 5 jobs on the worker.
    await registerModel(s, 'url=ko&batch_size=4&max_batch_delay=5');
    await registerModel(s, 'url=ru&batch_size=1&max_batch_delay=5');
    // One after the other: sent at once, the two requests could reach the server in either order.
    const first = [predict(s, 'ko', ['k0', 'k1', 'k2', 'k3'])];
    await until('4 jobs on the worker', () => dispatches.length === 1);
    first.push(predict(s, 'ru', 'r0'));
    await until('5 jobs on the worker', () => dispatches.length === 2);
    const later = [predict(s, 'ko', 'k4'), predict(s, 'ru', 'r1'), predict(s, 'ru', 'r2')];
    await until('3 jobs queued', async () => (await queued(s, 'ko')) + (await queued(s, 'ru')) === 3);
    const answers = await Promise.all([...first, ...later]);
    expect(answers.map((a) => a.body)).toEqual([
      { translated: ['k0', 'k1', 'k2', 'k3'] },
      { translated: 'r0' },
      { translated: 'k4' },
      { translated: 'r1' },
      { translated: 'r2' },
    ]);
    expect(dispatches.slice(0, 2)).toEqual([
      { type: 'batch', batches: [{ model: 'ko', size: 4 }], inFlightBefore: 0 },
      { type: 'batch', batches: [{ model: 'ru', size: 1 }], inFlightBefore: 4 },
    ]);
    // The ko batch finishing opens room for 4: the three waiting jobs leave together, one batch per model and
    // batch size, in one message.
    expect(dispatches.slice(2)).toEqual([
      {
        type: 'round',
        batches: [
          { model: 'ko', size: 1 },
          { model: 'ru', size: 1 },
          { model: 'ru', size: 1 },
        ],
        inFlightBefore: expect.any(Number) as unknown,
      },
    ]);
    expect(dispatches[2]!.inFlightBefore).toBeLessThanOrEqual(1);
  });

  it('the worker’s own capacity bounds its jobs below the models’ batch sizes', async () => {
    const dispatches: Dispatch[] = [];
    const s = await server('immediate', 'slow:300,capacity:3', dispatches);
    await registerModel(s, 'url=ko&batch_size=8&max_batch_delay=5');
    await registerModel(s, 'url=ru&batch_size=8&max_batch_delay=5');
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => predict(s, i % 2 ? 'ko' : 'ru', `x${i}`)));
    answers.forEach((a, i) => expect(a.body).toEqual({ translated: `x${i}` }));
    for (const d of dispatches)
      expect(d.inFlightBefore + d.batches.reduce((n, b) => n + b.size, 0)).toBeLessThanOrEqual(3);
    expect(Math.max(...dispatches.map((d) => d.inFlightBefore))).toBeGreaterThan(0);
  });

  it('torchserve policy: a due batch leaves while another model’s jobs wait for their window', async () => {
    const dispatches: Dispatch[] = [];
    const s = await server('torchserve', '', dispatches);
    await registerModel(s, 'url=ko&batch_size=4&max_batch_delay=30000');
    // ru's window is long enough for the polling below and the ko request to land inside it on a loaded machine.
    await registerModel(s, 'url=ru&batch_size=4&max_batch_delay=1000');
    const ru = [predict(s, 'ru', 'r0'), predict(s, 'ru', 'r1')];
    await until('2 ru jobs queued', async () => (await queued(s, 'ru')) === 2);
    const ko = predict(s, 'ko', ['k0', 'k1', 'k2', 'k3']);
    const answers = await Promise.all([...ru, ko]);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(dispatches).toEqual([
      { type: 'batch', batches: [{ model: 'ko', size: 4 }], inFlightBefore: 0 },
      { type: 'batch', batches: [{ model: 'ru', size: 2 }], inFlightBefore: expect.any(Number) as unknown },
    ]);
  });

  it('torchserve policy: 64 concurrent requests to batch_size 64 leave as ONE batch', async () => {
    const dispatches: Dispatch[] = [];
    t = await startServer({ config: { batchPolicy: 'torchserve' }, spawn: recordingSpawner(dispatches) });
    const s = t;
    await registerModel(s, 'url=echo&batch_size=64&max_batch_delay=30000');
    const first = Array.from({ length: 63 }, (_, i) => predict(s, 'echo', `t${i}`));
    await until('63 queued jobs', async () => (await queued(s, 'echo')) === 63);
    const answers = await Promise.all([...first, predict(s, 'echo', 't63')]);
    answers.forEach((a, i) => expect(a).toMatchObject({ status: 200, body: { translated: `t${i}` } }));
    expect(dispatches).toEqual([{ type: 'batch', batches: [{ model: 'echo', size: 64 }], inFlightBefore: 0 }]);
    const labels = { model_name: 'echo', model_version: '1.0' };
    const text = (await call(`${s.metrics}/metrics`)).body as string;
    expect(metricValue(text, 'mt_batch_size_count', labels)).toBe(1);
    expect(metricValue(text, 'mt_batch_size_sum', labels)).toBe(64);
  });
});
