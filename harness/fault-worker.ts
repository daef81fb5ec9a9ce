/**
 * @module harness/fault-worker — a worker process entry for fault drills: the real worker loop
 * (model-server/worker/run-worker.ts) with hooks that inject the faults named in `MT_TEST_FAULT`, comma-separated.
 * Forked by `faultSpawner` (fault-spawner.ts) through the model server's `spawn` seam; production never starts it.
 *
 * - `fail-load`            answer `init-failed` instead of loading
 * - `crash-on-batch[:N]`   exit(70) when the N-th batch (default 1st) arrives
 * - `hang-on-batch[:N]`    block the event loop forever on the N-th batch (a stuck native call)
 * - `slow:<ms>`            wait `ms` before running each batch; a `cancel` meanwhile still answers the job once
 * - `exit-after-ready`     exit(71) right after `ready` (a worker that dies between loads)
 * - `skip-items`           answer `batch-done` without answering the items (a lying worker)
 * - `fail-inference`       the handler's inference throws (a handler bug: its items get PREDICTION_FAILED)
 * - `capacity:<n>`         report a capacity of n jobs whatever the handler says (the pool's job cap, with echo)
 */
import { ServeError, toServeError } from '../common/errors.js';
import type { Handler } from '../model-server/worker/handlers/base.js';
import { runWorker, type WorkerHooks } from '../model-server/worker/run-worker.js';
import { processChannel } from '../model-server/worker/worker-channel.js';

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

/** Parse a fault list; an unknown name or a bad argument is a test bug and throws. */
function parseFaults(spec: string | undefined): Faults {
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

/** The worker hooks that inject `faults`. */
function faultHooks(faults: Faults): WorkerHooks {
  return {
    beforeLoad() {
      if (faults.failLoad) throw new ServeError('WORKER_START_FAILED', 'Injected fault: fail-load.');
    },
    wrapHandler(handler) {
      let wrapped = handler;
      if (faults.failInference) wrapped = failingInference(wrapped);
      if (faults.slowMs > 0) wrapped = slowed(wrapped, faults.slowMs);
      if (faults.capacity !== undefined) wrapped = withCapacity(wrapped, faults.capacity);
      return wrapped;
    },
    afterReady() {
      if (faults.exitAfterReady) process.exit(71);
    },
    beforeBatch(_batch, n) {
      if (faults.crashOnBatch !== undefined && n >= faults.crashOnBatch) process.exit(70);
      if (faults.hangOnBatch !== undefined && n >= faults.hangOnBatch) {
        // Block the event loop for good, as a stuck native call would: only SIGKILL ends this process.
        Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0);
      }
    },
    ...(faults.skipItems ? { filterReply: (message) => message.type !== 'item' } : {}),
  };
}

/** `inner` with `overrides` in place of some of its methods; every other member reads through to it. */
function delegate(inner: Handler, overrides: Partial<Handler>): Handler {
  return new Proxy(inner, {
    get(target, key) {
      if (Object.hasOwn(overrides, key)) return overrides[key as keyof Handler];
      const value: unknown = Reflect.get(target, key);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

/** `fail-inference`: inference throws. */
function failingInference(inner: Handler): Handler {
  return delegate(inner, {
    inference: async () => {
      throw new Error('Injected fault: fail-inference.');
    },
  });
}

/** `capacity:<n>`: the worker reports `capacity` whatever the handler says. */
function withCapacity(inner: Handler, capacity: number): Handler {
  return delegate(inner, { capacity: () => capacity });
}

/**
 * `slow:<ms>`: each batch waits `ms` before the handler sees it (its items are not even preprocessed). A cancel
 * that names a held item is recorded, and at the end of the wait the item is answered with the cancel's error
 * instead of running; cancels for items already handed on go to the handler.
 */
function slowed(inner: Handler, ms: number): Handler {
  type Held = { item: Parameters<Handler['preprocess']>[0] };
  /** Items waiting, by id, with the error of a cancel that named them meanwhile (null: none). */
  const heldBack = new Map<string, ServeError | null>();
  return delegate(inner, {
    preprocess: (item): Held => {
      heldBack.set(item.id, null);
      return { item };
    },
    inference: async (inputs, emit) => {
      const held = inputs as Held[];
      await new Promise((resolve) => setTimeout(resolve, ms));
      const innerInputs: unknown[] = [];
      const positions: number[] = [];
      for (const [index, { item }] of held.entries()) {
        const cancelled = heldBack.get(item.id);
        heldBack.delete(item.id);
        if (cancelled) {
          emit(index, cancelled);
          continue;
        }
        try {
          innerInputs.push(await inner.preprocess(item));
          positions.push(index);
        } catch (err) {
          emit(index, toServeError(err));
        }
      }
      if (innerInputs.length === 0) return;
      await inner.inference(innerInputs, (i, result) => emit(positions[i]!, result));
    },
    cancel: (ids, error) => {
      const forHandler = ids.filter((id) => {
        if (!heldBack.has(id)) return true;
        heldBack.set(id, error);
        return false;
      });
      if (forHandler.length > 0) inner.cancel?.(forHandler, error);
    },
  });
}

/** A fault list this entry cannot parse fails every load with the reason (a test bug, reported where it shows). */
function hooksFromEnv(): WorkerHooks {
  try {
    return faultHooks(parseFaults(process.env.MT_TEST_FAULT));
  } catch (err) {
    return {
      beforeLoad() {
        throw err;
      },
    };
  }
}

runWorker(processChannel(), { logLevel: process.env.MT_WORKER_LOG_LEVEL, hooks: hooksFromEnv() });
