/**
 * @module worker/main — the worker process entry (forked by the frontend's WorkerHandle, IPC only): the worker loop
 * of run-worker.ts over this process's IPC channel, with no hooks. Tests that need a crashing, hanging, slow or lying
 * worker fork their own entry (harness/fault-worker.ts: the same loop with fault hooks) through the server's `spawn`
 * seam; nothing in this entry, the protocol or the frontend's config can turn a fault on.
 */
import { runWorker } from './run-worker.js';
import { processChannel } from './worker-channel.js';

runWorker(processChannel(), { logLevel: process.env.MT_WORKER_LOG_LEVEL });
