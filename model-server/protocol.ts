/**
 * @module model-server/protocol — the typed messages between the frontend and its worker processes.
 *
 * Transport: Node IPC (`child_process.fork`, `serialization: 'advanced'`). The frontend sends `init` once,
 * then `batch` messages — possibly several before the first finishes: a worker whose handler can merge
 * work (the translation engine joins rows at step boundaries) keeps them all in flight. A worker that cannot
 * merge (`ready.mergesWork` false) gets work only while idle, as one `round` of batches handled together. The worker answers
 * every item of every batch exactly once with an `item` message as soon as that item is done (finished
 * rows leave early), then one `batch-done`. Each item carries its own status, so one bad input fails
 * alone (TorchServe fails the whole batch, pytorch/serve#1329). Errors travel as `{code, message}`.
 */
import type { WireError } from '../common/errors.js';

/** Where a worker is asked to run: the seed's setup_config device id, or the CPU. */
export type DeviceRequest = { kind: 'cpu' } | { kind: 'cuda'; id: number };

/** Where a worker actually runs; `fallbackReason` says why a CUDA request ended on the CPU. */
export interface DeviceInfo {
  kind: 'cpu' | 'cuda';
  /** CUDA device id, or null on the CPU. */
  id: number | null;
  /** onnxruntime execution provider actually used (`cpu`, `cuda`) or `none` for handlers without one. */
  provider: string;
  fallbackReason?: string;
}

/** Options a handler receives at initialize; from config and the registration. */
export interface WorkerOptions {
  intraOpThreads: number;
  numBeams: number;
  maxNewTokens: number;
}

export interface InitMessage {
  type: 'init';
  workerId: string;
  handler: string;
  modelDir: string;
  device: DeviceRequest;
  options: WorkerOptions;
  /** For tests and fault drills only: names a fault the worker injects (see worker/main.ts). */
  fault?: string;
}

export interface BatchItem {
  /** Job id, unique within the frontend; replies are matched by it. */
  id: string;
  /** Registered model (language) the job was sent to; the translation handler's tgt_lang. */
  model: string;
  /** The decoded request body (JSON value, or a string for non-JSON bodies). */
  body: unknown;
}

export interface BatchMessage {
  type: 'batch';
  batchId: number;
  items: BatchItem[];
}

/**
 * Several batches that must reach the handler in the same tick (a dispatch *round*, worker-pool.ts): sent as one
 * IPC message because separate messages may be read in separate event-loop turns, and an engine that cannot
 * merge work would then start generating the first before it sees the others.
 */
export interface RoundMessage {
  type: 'round';
  batches: BatchMessage[];
}

export interface ShutdownMessage {
  type: 'shutdown';
}

export type ToWorker = InitMessage | BatchMessage | RoundMessage | ShutdownMessage;

export interface ReadyMessage {
  type: 'ready';
  pid: number;
  device: DeviceInfo;
  loadMs: number;
  /** Languages (or other model names) this handler can serve, when it knows; e.g. the tokenizer's codes. */
  languages?: string[];
  /**
   * True when the handler folds work that arrives during an `inference` call into the running one at no extra
   * per-step cost; false when such work costs its own pass (the frontend then sends it nothing until it is idle).
   */
  mergesWork: boolean;
}

export interface InitFailedMessage {
  type: 'init-failed';
  error: WireError;
}

export type ItemOutcome = { ok: true; value: unknown } | { ok: false; error: WireError };

export interface ItemMessage {
  type: 'item';
  id: string;
  outcome: ItemOutcome;
}

export interface BatchDoneMessage {
  type: 'batch-done';
  batchId: number;
  /** Time the handler spent on this batch, preprocess to last postprocess. */
  handlerMs: number;
}

export type FromWorker = ReadyMessage | InitFailedMessage | ItemMessage | BatchDoneMessage;
