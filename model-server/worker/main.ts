/**
 * @module worker/main — the worker process entry (forked by the frontend's WorkerHandle, IPC only).
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
 *
 * Fault injection for tests and drills only: `InitMessage.fault`, which the frontend sets only when a test
 * passes it explicitly (never reachable from the HTTP APIs). Faults, comma-separated:
 * - `fail-load`            answer `init-failed` instead of loading
 * - `crash-on-batch[:N]`   exit(70) when the N-th batch (default 1st) arrives
 * - `hang-on-batch[:N]`    block the event loop forever on the N-th batch (a stuck native call)
 * - `slow:<ms>`            wait `ms` before running each batch
 * - `exit-after-ready`     exit(71) right after `ready` (a worker that dies between loads)
 * - `skip-items`           answer `batch-done` without answering the items (a lying worker)
 * - `fail-inference`       the handler's inference throws (a handler bug: its items get PREDICTION_FAILED)
 * - `capacity:<n>`         report a capacity of n jobs whatever the handler says (the pool's job cap, with echo)
 */
import { ServeError, toServeError } from '../../common/errors.js';
import { createLogger } from '../../common/logger.js';
import type { BatchItem, BatchMessage, CancelMessage, FromWorker, InitMessage, ToWorker } from '../protocol.js';
import { runBatch, type Handler } from './handlers/base.js';
import { createHandler } from './handlers/index.js';

interface Faults {
  failLoad: boolean;
  crashOnBatch: number | undefined;
  hangOnBatch: number | undefined;
  slowMs: number;
  exitAfterReady: boolean;
  skipItems: boolean;
  failInference: boolean;
  capacity: number | undefined;
}

/** Parse `InitMessage.fault`; an unknown fault name is a test bug and fails the load loudly. */
export function parseFaults(spec: string | undefined): Faults {
  const faults: Faults = {
    failLoad: false,
    crashOnBatch: undefined,
    hangOnBatch: undefined,
    slowMs: 0,
    exitAfterReady: false,
    skipItems: false,
    failInference: false,
    capacity: undefined,
  };
  for (const part of (spec ?? '').split(',').filter(Boolean)) {
    const [name, arg] = part.split(':') as [string, string | undefined];
    const n = arg === undefined ? 1 : Number(arg);
    if (!Number.isFinite(n) || n < 0) throw new Error(`bad fault argument: ${part}`);
    if (name === 'fail-load') faults.failLoad = true;
    else if (name === 'crash-on-batch') faults.crashOnBatch = n;
    else if (name === 'hang-on-batch') faults.hangOnBatch = n;
    else if (name === 'slow') faults.slowMs = n;
    else if (name === 'exit-after-ready') faults.exitAfterReady = true;
    else if (name === 'skip-items') faults.skipItems = true;
    else if (name === 'fail-inference') faults.failInference = true;
    else if (name === 'capacity') faults.capacity = n;
    else throw new Error(`unknown fault: ${name}`);
  }
  return faults;
}

/**
 * Least time between two progress messages while the handler works (ms): a heartbeat for a watchdog that waits
 * seconds, not a per-step stream (a tiny model steps every millisecond).
 */
const PROGRESS_INTERVAL_MS = 200;

const log = createLogger('worker', process.env.MT_WORKER_LOG_LEVEL ?? 'info');

let handler: Handler | undefined;
let faults = parseFaults(undefined);
let batchesSeen = 0;
/** When the last progress message went out (performance.now() ms). */
let progressSentAt = -Infinity;
let stopping = false;
const inFlight = new Set<Promise<void>>();
/**
 * Items of batches held back before the handler sees them (fault `slow`), with the error of a cancel that named
 * them meanwhile (null: none). Written by `batch` and `cancel` only.
 */
const heldBack = new Map<string, ServeError | null>();

function send(message: FromWorker): void {
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
    faults = parseFaults(message.fault);
    if (faults.failLoad) throw new ServeError('WORKER_START_FAILED', 'Injected fault: fail-load.');
    const instance = await createHandler(message.handler);
    const device = await instance.initialize({
      modelDir: message.modelDir,
      device: message.device,
      options: message.options,
      log: workerLog,
    });
    handler = faults.failInference ? failingInference(instance) : instance;
    instance.onStep?.(stepped);
    const loadMs = performance.now() - started;
    if (device.fallbackReason) workerLog.warn({ device }, 'running on the CPU instead of the requested GPU');
    workerLog.info({ device, loadMs: Math.round(loadMs), modelDir: message.modelDir }, 'worker ready');
    const capacity = faults.capacity ?? instance.capacity?.();
    send({
      type: 'ready',
      pid: process.pid,
      device,
      loadMs,
      languages: instance.languages?.(),
      dtype: instance.dtype?.(),
      capacity,
    });
    if (faults.exitAfterReady) process.exit(71);
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
  if (faults.crashOnBatch !== undefined && batchesSeen >= faults.crashOnBatch) process.exit(70);
  if (faults.hangOnBatch !== undefined && batchesSeen >= faults.hangOnBatch) {
    // Block the event loop for good, as a stuck native call would: only SIGKILL ends this process.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
  }
  const run = (async () => {
    let items: BatchItem[] = message.items;
    if (faults.slowMs > 0) {
      for (const item of items) heldBack.set(item.id, null);
      await new Promise((resolve) => setTimeout(resolve, faults.slowMs));
      items = items.filter((item) => {
        const cancelled = heldBack.get(item.id);
        heldBack.delete(item.id);
        if (cancelled) send({ type: 'item', id: item.id, outcome: { ok: false, error: cancelled.toWire() } });
        return !cancelled;
      });
    }
    const started = performance.now();
    if (handler === undefined) {
      const error = new ServeError('WORKER_DIED', 'Worker received a batch before it was ready.').toWire();
      for (const item of items) send({ type: 'item', id: item.id, outcome: { ok: false, error } });
    } else if (!faults.skipItems && items.length > 0) {
      await runBatch(handler, items, (id, outcome) => send({ type: 'item', id, outcome }), log);
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
  const forHandler = message.ids.filter((id) => {
    if (!heldBack.has(id)) return true;
    heldBack.set(id, error);
    return false;
  });
  if (forHandler.length > 0) handler?.cancel?.(forHandler, error);
}

/** The handler with an inference that throws (fault `fail-inference`). */
function failingInference(inner: Handler): Handler {
  return {
    initialize: (ctx) => inner.initialize(ctx),
    preprocess: (item) => inner.preprocess(item),
    inference: async () => {
      throw new Error('Injected fault: fail-inference.');
    },
    postprocess: (output, item) => inner.postprocess(output, item),
    close: () => inner.close(),
  };
}

async function shutdown(): Promise<void> {
  if (stopping) return;
  stopping = true;
  await Promise.allSettled([...inFlight]);
  await handler?.close().catch((err: unknown) => log.warn({ err }, 'handler close failed'));
  process.exit();
}

function errorText(err: unknown): string {
  return `Worker failed to load: ${err instanceof Error ? err.message : String(err)}`;
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
