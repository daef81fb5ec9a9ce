/**
 * @module model-server/wlm/workers/worker-connection — a worker as its handle (worker-handle.ts) sees it: a channel
 * for the protocol's messages and a way to end it. Production's workers are child processes (`childConnection`:
 * a crash, a hang or a leak stays in the worker); tests that are no crash drills may run the same worker loop in
 * their own process (harness/in-process-worker.ts).
 */
import type { ChildProcess } from 'node:child_process';
import type { FromWorker, ToWorker } from '../../protocol.js';

export interface WorkerConnection {
  /** The worker's own process (memory, describe); undefined when it has none of its own. */
  readonly pid: number | undefined;
  /** False once the worker cannot be reached: sends would be lost. */
  readonly connected: boolean;
  /** Throws when the channel fails (the handle treats that as not sent). */
  send(message: ToWorker): void;
  /** End the worker now, whatever it is doing (SIGKILL for a process); `onExit` follows. */
  kill(): void;
  onMessage(listener: (message: FromWorker) => void): void;
  /**
   * `listener` is called once, when the worker is gone: its exit code or signal, or why it never started; `error`
   * for each failure that leaves it running (a message that could not go out).
   */
  onExit(
    listener: (code: number | null, signal: NodeJS.Signals | null, err?: Error) => void,
    error: (err: Error) => void,
  ): void;
}

/** A forked worker process (IPC). */
export function childConnection(child: ChildProcess): WorkerConnection {
  return {
    get pid() {
      return child.pid;
    },
    get connected() {
      return child.connected;
    },
    send(message) {
      child.send(message);
    },
    kill() {
      child.kill('SIGKILL');
    },
    onMessage(listener) {
      child.on('message', listener as (message: unknown) => void);
    },
    onExit(listener, error) {
      let done = false;
      const gone = (code: number | null, signal: NodeJS.Signals | null, err?: Error) => {
        if (done) return;
        done = true;
        listener(code, signal, err);
      };
      child.once('exit', (code, signal) => gone(code, signal));
      // A spawn failure may emit 'error' without 'exit'.
      child.on('error', (err) => {
        if (child.pid === undefined || child.exitCode !== null) gone(null, null, err);
        else error(err);
      });
    },
  };
}
