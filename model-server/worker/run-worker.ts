/**
 * @module worker/run-worker — the worker process's life, as a function its entries call: worker/main.ts (production)
 * runs it as is; a test entry (harness/fault-worker.ts) runs the same loop with hooks that inject faults.
 *
 * Life: wait for `init` → load the named handler on the requested device → `ready` (or `init-failed`, then exit
 * 1) → answer `batch` messages: every item exactly once (`item`), then `batch-done`. Several batches may be in
 * flight at once; each is passed to `handler.inference` as soon as it arrives and the handler batches them. A
 * `round` message carries several batches: they reach the handler in one synchronous pass, so the engine starts
 * them together (its generation loop begins on a microtask, after this pass). `shutdown` (or the parent going
 * away) stops intake, lets in-flight batches finish, closes the handler, and exits 0.
 *
 * `cancel` names jobs the frontend gave up on: the handler stops each one it holds and answers it with
 * REQUEST_TIMEOUT (reason `deadline`) or CLIENT_CLOSED (`client-gone`) through the batch's usual `item` reply, so
 * every job is still answered exactly once. Ids already answered are ignored; a handler without `cancel` lets its
 * jobs run to their end.
 *
 * Progress: a handler that steps in batches (`onStep`) makes the worker send `progress` after its steps, at most
 * every PROGRESS_INTERVAL_MS, and once more when its last batch is done (idle); for a handler without steps the
 * worker sends it on a timer while it holds work (its event loop is alive). The frontend's watchdog recycles a
 * worker that holds jobs and sent no progress for its response timeout: a slow job alone never trips it.
 */
import { ServeError, toServeError } from '../../common/errors.js';
import { createLogger } from '../../common/logger.js';
import type { BatchMessage, CancelMessage, FromWorker, InitMessage, ToWorker } from '../protocol.js';
import { runBatch, type Handler } from './handlers/base.js';
import { createHandler } from './handlers/index.js';

/**
 * Points where a test entry changes what the worker does (fault drills). The production entry sets none; each
 * runs at the moment named, in the worker process.
 */
export interface WorkerHooks {
  /** As `init` arrives, before the handler loads; a throw fails the load (`init-failed`, exit 1). */
  beforeLoad?(init: InitMessage): void;
  /** The handler the worker uses in place of the one created (before `initialize`, so the wrapper sees it). */
  wrapHandler?(handler: Handler): Handler;
  /** Right after `ready` went out. */
  afterReady?(): void;
  /** As a batch arrives, before the handler sees it; `n` counts the batches this worker received, from 1. */
  beforeBatch?(batch: BatchMessage, n: number): void;
  /** Every message to the frontend passes here first; false drops it. */
  filterReply?(message: FromWorker): boolean;
}

/**
 * Least time between two progress messages while the handler works (ms): a heartbeat for a watchdog that waits
 * seconds, not a per-step stream (a tiny model steps every millisecond).
 */
const PROGRESS_INTERVAL_MS = 200;

/** Serve the frontend over this process's IPC channel until `shutdown`, the parent going away, or SIGTERM. */
export function runWorker(hooks: WorkerHooks = {}): void {
  const log = createLogger('worker', process.env.MT_WORKER_LOG_LEVEL ?? 'info');

  let handler: Handler | undefined;
  let batchesSeen = 0;
  /** When the last progress message went out (performance.now() ms). */
  let progressSentAt = -Infinity;
  let stopping = false;
  const inFlight = new Set<Promise<void>>();

  function send(message: FromWorker): void {
    if (hooks.filterReply?.(message) === false) return;
    // A parent that is gone cannot be answered; 'disconnect' below ends this process.
    if (process.connected) process.send!(message);
  }

  /** Send the handler's progress now; a handler without step counters reports zeros (the worker is alive). */
  function sendProgress(): void {
    if (handler === undefined) return;
    progressSentAt = performance.now();
    send({ type: 'progress', steps: handler.steps?.() ?? { runs: 0, rows: 0 }, liveRows: handler.liveRows?.() ?? 0 });
  }

  /**
   * A handler without steps has no step loop to report from: while it holds work the worker reports on a timer
   * instead, so its heartbeat says the event loop runs (a blocked one, a stuck native call, still goes quiet).
   */
  let aliveTimer: NodeJS.Timeout | undefined;
  function heartbeatWhileBusy(): void {
    if (handler === undefined || handler.onStep !== undefined || aliveTimer !== undefined) return;
    aliveTimer = setInterval(() => {
      if (inFlight.size > 0) return sendProgress();
      clearInterval(aliveTimer);
      aliveTimer = undefined;
    }, PROGRESS_INTERVAL_MS);
  }

  /** The handler stepped: report it unless a progress message went out less than PROGRESS_INTERVAL_MS ago. */
  function stepped(): void {
    if (performance.now() - progressSentAt >= PROGRESS_INTERVAL_MS) sendProgress();
  }

  async function init(message: InitMessage): Promise<void> {
    const started = performance.now();
    const workerLog = log.child({ workerId: message.workerId, handler: message.handler });
    try {
      hooks.beforeLoad?.(message);
      const created = await createHandler(message.handler);
      const instance = hooks.wrapHandler ? hooks.wrapHandler(created) : created;
      const device = await instance.initialize({
        modelDir: message.modelDir,
        device: message.device,
        options: message.options,
        log: workerLog,
      });
      handler = instance;
      instance.onStep?.(stepped);
      const loadMs = performance.now() - started;
      if (device.fallbackReason) workerLog.warn({ device }, 'running on the CPU instead of the requested GPU');
      workerLog.info({ device, loadMs: Math.round(loadMs), modelDir: message.modelDir }, 'worker ready');
      send({
        type: 'ready',
        pid: process.pid,
        device,
        loadMs,
        languages: instance.languages?.(),
        dtype: instance.dtype?.(),
        model: instance.model?.(),
        capacity: instance.capacity?.(),
      });
      hooks.afterReady?.();
    } catch (err) {
      workerLog.error({ err }, 'worker failed to load');
      const serveError = err instanceof ServeError ? err : new ServeError('WORKER_START_FAILED', errorText(err));
      // Exit only once the message is out: the frontend must learn why, not just that we died.
      if (process.connected)
        process.send!({ type: 'init-failed', error: serveError.toWire() } satisfies FromWorker, () => process.exit(1));
      else process.exit(1);
    }
  }

  function batch(message: BatchMessage): void {
    batchesSeen += 1;
    hooks.beforeBatch?.(message, batchesSeen);
    const run = (async () => {
      const started = performance.now();
      if (handler === undefined) {
        const error = new ServeError('WORKER_DIED', 'Worker received a batch before it was ready.').toWire();
        for (const item of message.items) send({ type: 'item', id: item.id, outcome: { ok: false, error } });
      } else if (message.items.length > 0) {
        await runBatch(handler, message.items, (id, outcome) => send({ type: 'item', id, outcome }), log);
      }
      send({
        type: 'batch-done',
        batchId: message.batchId,
        handlerMs: performance.now() - started,
        steps: handler?.steps?.(),
      });
    })().catch((err: unknown) => {
      // runBatch answers every item itself; reaching here means the IPC channel failed.
      log.error({ err: toServeError(err) }, 'batch failed outside the handler');
    });
    inFlight.add(run);
    heartbeatWhileBusy();
    void run.finally(() => {
      inFlight.delete(run);
      // Idle: the last word the watchdog gets until new work arrives.
      if (inFlight.size === 0) sendProgress();
    });
  }

  /** Stop the named jobs (see the module doc); each is answered through its batch, not here. */
  function cancel(message: CancelMessage): void {
    const error =
      message.reason === 'deadline'
        ? new ServeError('REQUEST_TIMEOUT', 'Request timed out: cancelled in the worker.')
        : new ServeError('CLIENT_CLOSED');
    handler?.cancel?.(message.ids, error);
  }

  async function shutdown(): Promise<void> {
    if (stopping) return;
    stopping = true;
    await Promise.allSettled([...inFlight]);
    await handler?.close().catch((err: unknown) => log.warn({ err }, 'handler close failed'));
    process.exit();
  }

  process.on('message', (message: ToWorker) => {
    switch (message.type) {
      case 'init':
        void init(message);
        break;
      case 'batch':
        if (!stopping) batch(message);
        break;
      case 'round':
        // Synchronously, one after the other: every batch's rows reach the handler before it starts any of them.
        if (!stopping) for (const one of message.batches) batch(one);
        break;
      case 'cancel':
        cancel(message);
        break;
      case 'shutdown':
        void shutdown();
        break;
    }
  });
  // The frontend is gone (crashed, killed): nobody can use our answers, and an orphan would hold the GPU.
  process.on('disconnect', () => void shutdown());
  process.on('SIGTERM', () => void shutdown());
  // pm2 sends SIGINT to the whole process group on stop; the frontend drains us through `shutdown` instead.
  process.on('SIGINT', () => undefined);
}

function errorText(err: unknown): string {
  return `Worker failed to load: ${err instanceof Error ? err.message : String(err)}`;
}
