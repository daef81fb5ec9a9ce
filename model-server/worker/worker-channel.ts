/**
 * @module worker/worker-channel — what the worker loop (run-worker.ts) talks to its frontend through: this process's
 * IPC channel in production (`processChannel`), or any other carrier of the same messages (a test's in-process pair,
 * harness/in-process-worker.ts), so the loop runs the same wherever it is started.
 */
import type { FromWorker, ToWorker } from '../protocol.js';

export interface WorkerChannel {
  /** Reported in `ready`: the process the worker runs in. */
  readonly pid: number;
  /** Send to the frontend; `sent` runs once it is out. False (and dropped) when the frontend is gone. */
  send(message: FromWorker, sent?: () => void): boolean;
  /** Every message from the frontend, in order. */
  onMessage(listener: (message: ToWorker) => void): void;
  /** The frontend is gone or asked this worker to end otherwise (a signal): the loop drains and exits. */
  onClose(listener: () => void): void;
  /** The worker is done: end it with this exit code. */
  exit(code?: number): void;
}

/** This process's IPC channel to the frontend that forked it (worker/main.ts). */
export function processChannel(): WorkerChannel {
  return {
    pid: process.pid,
    send(message, sent) {
      if (!process.connected) return false;
      if (sent === undefined) process.send!(message);
      else process.send!(message, () => sent());
      return true;
    },
    onMessage(listener) {
      process.on('message', listener as (message: unknown) => void);
    },
    onClose(listener) {
      // The frontend crashed or was killed: nobody can use our answers, and an orphan would hold the GPU.
      process.on('disconnect', listener);
      process.on('SIGTERM', listener);
      // pm2 sends SIGINT to the whole process group on stop; the frontend drains us through `shutdown` instead.
      process.on('SIGINT', () => undefined);
    },
    exit(code) {
      process.exit(code);
    },
  };
}
