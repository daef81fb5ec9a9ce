import { spawn } from 'node:child_process';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createLogger } from '../../../common/logger.js';
import type { ItemBody } from '../../protocol.js';
import { Job, newJobId } from '../job.js';
import type { BatchReport } from './worker-batches.js';
import { WorkerHandle } from './worker-handle.js';
import { childConnection } from './worker-connection.js';

/**
 * A real worker process that holds every batch until a cancel arrives, then answers each item: a cancelled one
 * with its reason's error, unless its body says `{ "finished": true }` (its rows finished before the cancel reached
 * them: it is answered ok), and the others ok; then `batch-done`.
 */
const RACING_WORKER = `
const held = [];
process.on('message', (m) => {
  if (m.type === 'init') {
    process.send({ type: 'ready', pid: process.pid, device: { kind: 'cpu', id: null, provider: 'none' }, loadMs: 0 });
  } else if (m.type === 'batch') {
    held.push(m);
  } else if (m.type === 'cancel') {
    for (const batch of held.splice(0)) {
      for (const item of batch.items) {
        const cancelled = m.ids.includes(item.id) && item.body.finished !== true;
        const outcome = cancelled
          ? { ok: false, error: { code: 'CLIENT_CLOSED', message: 'cancelled' } }
          : { ok: true, value: item.body };
        process.send({ type: 'item', id: item.id, outcome });
      }
      process.send({ type: 'batch-done', batchId: batch.batchId, handlerMs: 1 });
    }
  } else if (m.type === 'shutdown') {
    process.exit(0);
  }
});
`;

function job(body: ItemBody): Job {
  return new Job({ id: newJobId(), model: 'm', version: '1', body, responseTimeoutMs: 30_000 });
}

describe('worker handle: a job abandoned while its rows run', () => {
  it('is counted when the worker answers it ok after all (mt_jobs_finished_after_abandon_total), and only then', async () => {
    let reported!: (report: BatchReport) => void;
    const report = new Promise<BatchReport>((resolve) => (reported = resolve));
    const worker = new WorkerHandle({
      id: 'w1',
      init: { handler: 'echo', modelDir: '.', device: { kind: 'cpu' }, options: {} as never },
      spawn: () =>
        childConnection(
          spawn(process.execPath, ['-e', RACING_WORKER], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] }),
        ),
      log: createLogger('test', 'silent'),
      startupTimeoutMs: 10_000,
      stopTimeoutMs: 5_000,
      events: { batchDone: (_w, r) => reported(r), exited: () => undefined },
    });
    onTestFinished(() => worker.stop());
    await worker.start();
    const finished = job({ finished: true });
    const cancelled = job({ finished: false });
    const kept = job({ kept: true });
    expect(worker.sendRound([{ jobs: [finished, cancelled, kept], model: 'm', version: '1' }])).toBe(true);
    finished.abandon('client-gone');
    cancelled.abandon('client-gone');
    await expect(kept.promise).resolves.toMatchObject({ value: { kept: true }, workerId: 'w1' });
    await expect(finished.promise).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
    await expect(cancelled.promise).rejects.toMatchObject({ code: 'CLIENT_CLOSED' });
    expect(await report).toMatchObject({ model: 'm', size: 3, finishedAfterAbandon: 1 });
    expect(worker.inFlightJobs).toBe(0);
  });
});
