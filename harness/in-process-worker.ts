/**
 * @module harness/in-process-worker — a `spawn` seam whose workers run the real worker loop
 * (model-server/worker/run-worker.ts) in the test's own process, over an in-memory channel pair, instead of a forked
 * process that loads tsx, the handler and onnxruntime again for each worker. For integration tests that are no crash,
 * hang or SIGKILL drills: such a worker shares the test's process, so it cannot crash alone, and `kill()` only cuts
 * its channel (its handler finishes what it holds, unheard). Production always forks (http/server.ts `forkWorker`).
 *
 * The pair behaves as IPC does where tests could tell: messages are structured clones (what 'advanced'
 * serialization sends), delivered in order on a later turn of the event loop, never to a side that is gone; the
 * frontend learns of the worker's end after every message it sent before.
 */
import type { FromWorker, ToWorker } from '../model-server/protocol.js';
import { runWorker } from '../model-server/worker/run-worker.js';
import type { WorkerChannel } from '../model-server/worker/worker-channel.js';
import type { WorkerConnection } from '../model-server/wlm/workers/worker-connection.js';
import type { WorkerSpawner } from '../model-server/wlm/workers/worker-handle.js';

/** A spawner of in-process workers logging at `logLevel`. */
export function inProcessSpawner(logLevel = 'warn'): WorkerSpawner {
  return () => {
    const pair = new ChannelPair();
    runWorker(pair.worker, { logLevel });
    return pair.frontend;
  };
}

type ExitListener = (code: number | null, signal: NodeJS.Signals | null) => void;

/** Both ends of one worker's channel. */
class ChannelPair {
  #open = true;
  #toWorker: ((message: ToWorker) => void)[] = [];
  #toFrontend: ((message: FromWorker) => void)[] = [];
  #closeListeners: (() => void)[] = [];
  #exitListeners: ExitListener[] = [];

  readonly frontend: WorkerConnection;
  readonly worker: WorkerChannel;

  constructor() {
    const pair = this;
    this.frontend = {
      pid: undefined,
      get connected() {
        return pair.#open;
      },
      send: (message) => this.#deliver(message, this.#toWorker),
      kill: () => this.#end(null, 'SIGKILL'),
      onMessage: (listener) => void this.#toFrontend.push(listener),
      onExit: (listener) => void this.#exitListeners.push(listener),
    };
    this.worker = {
      pid: process.pid,
      send: (message, sent) => {
        if (!this.#open) return false;
        this.#deliver(message, this.#toFrontend, sent);
        return true;
      },
      onMessage: (listener) => void this.#toWorker.push(listener),
      onClose: (listener) => void this.#closeListeners.push(listener),
      exit: (code = 0) => this.#end(code, null),
    };
  }

  #deliver<M>(message: M, listeners: ((message: M) => void)[], sent?: () => void): void {
    if (!this.#open) throw new Error('the worker is gone');
    const copy = structuredClone(message);
    setImmediate(() => {
      if (this.#open) for (const listener of listeners) listener(copy);
      sent?.();
    });
  }

  /** The worker is gone (it exited, or its frontend killed it): both sides hear it once, after what was sent. */
  #end(code: number | null, signal: NodeJS.Signals | null): void {
    if (!this.#open) return;
    setImmediate(() => {
      if (!this.#open) return;
      this.#open = false;
      for (const listener of this.#closeListeners) listener();
      for (const listener of this.#exitListeners) listener(code, signal);
    });
  }
}
