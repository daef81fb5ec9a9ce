/**
 * @module worker/run-worker — a worker's life over a channel (worker-channel.ts), as a function its entries call:
 * worker/main.ts (production) runs it over the process's IPC; harness/fault-worker.ts runs the same loop with hooks
 * that inject faults, and harness/in-process-worker.ts runs it in the test's own process over an in-memory pair.
 *
 * Life: wait for `init` → load the named handler on the requested device → `ready` (or `init-failed`, then exit
 * 1) → answer `batch` messages: every item exactly once (`item`), then `batch-done`. Several batches may be in
 * flight at once; each is passed to `handler.inference` as soon as it arrives and the handler batches them. A
 * `round` message carries several batches: they reach the handler in one synchronous pass, so the engine starts
 * them together (its generation loop begins on a microtask, after this pass). `shutdown` (or the parent going
 * away, SIGTERM) stops intake, lets in-flight batches finish, closes the handler, and exits 0.
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
import { createLogger, type Logger } from '../../common/logger.js';
import type { BatchMessage, CancelMessage, FromWorker, InitMessage, ItemOutcome, ToWorker } from '../protocol.js';
import { runBatch, type Handler } from './handlers/base.js';
import { createHandler } from './handlers/index.js';
import type { WorkerChannel } from './worker-channel.js';

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

export interface RunWorkerOptions {
  /** The worker's log level (default info). */
  logLevel?: string;
  hooks?: WorkerHooks;
}

/** Serve the frontend over `channel` until `shutdown` or the channel closing. */
export function runWorker(channel: WorkerChannel, options: RunWorkerOptions = {}): void {
  const loop = new WorkerLoop(channel, options.hooks ?? {}, createLogger('worker', options.logLevel ?? 'info'));
  channel.onMessage((message) => loop.receive(message));
  channel.onClose(() => void loop.shutdown());
}

/**
 * One worker's state. Everything runs on the worker's event loop: messages arrive through `receive`, batches finish
 * through their promises, and the timer only reads `#inFlight`.
 */
class WorkerLoop {
  readonly #channel: WorkerChannel;
  readonly #hooks: WorkerHooks;
  readonly #log: Logger;
  /** Set once `init` loaded it; batches before that are answered WORKER_DIED. */
  #handler: Handler | undefined;
  #batchesSeen = 0;
  /** When the last progress message went out (performance.now() ms). */
  #progressSentAt = -Infinity;
  /** Set by `shutdown`: no batch is taken after it. */
  #stopping = false;
  readonly #inFlight = new Set<Promise<void>>();
  /** The heartbeat of a handler without steps while it holds work (see `#heartbeatWhileBusy`). */
  #aliveTimer: NodeJS.Timeout | undefined;

  constructor(channel: WorkerChannel, hooks: WorkerHooks, log: Logger) {
    this.#channel = channel;
    this.#hooks = hooks;
    this.#log = log;
  }

  receive(message: ToWorker): void {
    switch (message.type) {
      case 'init':
        void this.#init(message);
        break;
      case 'batch':
        if (!this.#stopping) this.#batch(message);
        break;
      case 'round':
        // Synchronously, one after the other: every batch's rows reach the handler before it starts any of them.
        if (!this.#stopping) for (const one of message.batches) this.#batch(one);
        break;
      case 'cancel':
        this.#cancel(message);
        break;
      case 'shutdown':
        void this.shutdown();
        break;
    }
  }

  async shutdown(): Promise<void> {
    if (this.#stopping) return;
    this.#stopping = true;
    await Promise.allSettled([...this.#inFlight]);
    await this.#handler?.close().catch((err: unknown) => this.#log.warn({ err }, 'handler close failed'));
    this.#channel.exit();
  }

  #send(message: FromWorker): void {
    if (this.#hooks.filterReply?.(message) === false) return;
    // A frontend that is gone cannot be answered; the channel closing ends this worker.
    this.#channel.send(message);
  }

  /** Send the handler's progress now; a handler without step counters reports zeros (the worker is alive). */
  #sendProgress(): void {
    const handler = this.#handler;
    if (handler === undefined) return;
    this.#progressSentAt = performance.now();
    this.#send({
      type: 'progress',
      steps: handler.steps?.() ?? { runs: 0, rows: 0 },
      liveRows: handler.liveRows?.() ?? 0,
    });
  }

  /**
   * A handler without steps has no step loop to report from: while it holds work the worker reports on a timer
   * instead, so its heartbeat says the event loop runs (a blocked one, a stuck native call, still goes quiet).
   */
  #heartbeatWhileBusy(): void {
    if (this.#handler === undefined || this.#handler.onStep !== undefined || this.#aliveTimer !== undefined) return;
    this.#aliveTimer = setInterval(() => {
      if (this.#inFlight.size > 0) return this.#sendProgress();
      clearInterval(this.#aliveTimer);
      this.#aliveTimer = undefined;
    }, PROGRESS_INTERVAL_MS);
  }

  /** The handler stepped: report it unless a progress message went out less than PROGRESS_INTERVAL_MS ago. */
  #stepped(): void {
    if (performance.now() - this.#progressSentAt >= PROGRESS_INTERVAL_MS) this.#sendProgress();
  }

  async #init(message: InitMessage): Promise<void> {
    const started = performance.now();
    const workerLog = this.#log.child({ workerId: message.workerId, handler: message.handler });
    try {
      this.#hooks.beforeLoad?.(message);
      const created = await createHandler(message.handler);
      const instance = this.#hooks.wrapHandler ? this.#hooks.wrapHandler(created) : created;
      const device = await instance.initialize({
        modelDir: message.modelDir,
        device: message.device,
        options: message.options,
        log: workerLog,
      });
      this.#handler = instance;
      instance.onStep?.(() => this.#stepped());
      const loadMs = performance.now() - started;
      if (device.fallbackReason) workerLog.warn({ device }, 'running on the CPU instead of the requested GPU');
      workerLog.info({ device, loadMs: Math.round(loadMs), modelDir: message.modelDir }, 'worker ready');
      this.#send({
        type: 'ready',
        pid: this.#channel.pid,
        device,
        loadMs,
        languages: instance.languages?.(),
        dtype: instance.dtype?.(),
        model: instance.model?.(),
        capacity: instance.capacity?.(),
      });
      this.#hooks.afterReady?.();
    } catch (err) {
      workerLog.error({ err }, 'worker failed to load');
      const serveError = err instanceof ServeError ? err : new ServeError('WORKER_START_FAILED', errorText(err));
      // Exit only once the message is out: the frontend must learn why, not just that we died.
      const exit = () => this.#channel.exit(1);
      if (!this.#channel.send({ type: 'init-failed', error: serveError.toWire() }, exit)) exit();
    }
  }

  #batch(message: BatchMessage): void {
    this.#batchesSeen += 1;
    this.#hooks.beforeBatch?.(message, this.#batchesSeen);
    const run = this.#answer(message).catch((err: unknown) => {
      // runBatch answers every item itself; reaching here means the channel failed.
      this.#log.error({ err: toServeError(err) }, 'batch failed outside the handler');
    });
    this.#inFlight.add(run);
    this.#heartbeatWhileBusy();
    void run.finally(() => {
      this.#inFlight.delete(run);
      // Idle: the last word the watchdog gets until new work arrives.
      if (this.#inFlight.size === 0) this.#sendProgress();
    });
  }

  /** Every item of the batch exactly once, then `batch-done`. */
  async #answer(message: BatchMessage): Promise<void> {
    const started = performance.now();
    const handler = this.#handler;
    const reply = (id: string, outcome: ItemOutcome) => this.#send({ type: 'item', id, outcome });
    if (handler === undefined) {
      const error = new ServeError('WORKER_DIED', 'Worker received a batch before it was ready.').toWire();
      for (const item of message.items) reply(item.id, { ok: false, error });
    } else if (message.items.length > 0) {
      await runBatch(handler, message.items, reply, this.#log);
    }
    this.#send({
      type: 'batch-done',
      batchId: message.batchId,
      handlerMs: performance.now() - started,
      steps: handler?.steps?.(),
    });
  }

  /** Stop the named jobs (see the module doc); each is answered through its batch, not here. */
  #cancel(message: CancelMessage): void {
    const error =
      message.reason === 'deadline'
        ? new ServeError('REQUEST_TIMEOUT', 'Request timed out: cancelled in the worker.')
        : new ServeError('CLIENT_CLOSED');
    this.#handler?.cancel?.(message.ids, error);
  }
}

function errorText(err: unknown): string {
  return `Worker failed to load: ${err instanceof Error ? err.message : String(err)}`;
}
