/**
 * @module model-server/protocol — the typed messages between the frontend and its worker processes.
 *
 * Transport: Node IPC (`child_process.fork`, `serialization: 'advanced'`). The frontend sends `init` once,
 * then `batch` (or `round`: several batches at once) messages — many before the first finishes, up to the
 * worker's job cap (wlm/workers/worker-pool.ts): the handler batches everything it holds itself (the translation
 * engine at every step boundary). The worker answers every item of every batch exactly once with an `item`
 * message as soon as that item is done (finished rows leave early), then one `batch-done`. Each item carries its own status, so one bad input fails
 * alone (TorchServe fails the whole batch, pytorch/serve#1329). Errors travel as `{code, message}`.
 */
import type { GenerationSetting, ModelDtypeSetting } from '../common/config.js';
import type { WireError } from '../common/errors.js';
import type { JsonValue } from '../common/strict-utf8.js';

/** Where a worker is asked to run: the seed's setup_config device id, or the CPU. */
export type DeviceRequest =
  | { kind: 'cpu' }
  | { kind: 'cuda'; id: number }
  /**
   * onnxruntime's WebGPU provider (Dawn on Vulkan) for GPU `id`. `software`: a software adapter (lavapipe,
   * SwiftShader) instead of a GPU's, for tests and hosts that allow it (engine/vulkan-drivers.ts).
   */
  | { kind: 'webgpu'; id: number; software?: boolean };

/** Where a worker actually runs; `fallbackReason` says why a GPU request ended on the CPU. */
export interface DeviceInfo {
  kind: 'cpu' | 'cuda' | 'webgpu';
  /** GPU id, or null on the CPU. */
  id: number | null;
  /** onnxruntime execution provider actually used (`cpu`, `cuda`, `webgpu`) or `none` for handlers without one. */
  provider: string;
  /** WebGPU: the adapter is a software one (lavapipe, SwiftShader), asked for explicitly. */
  software?: boolean;
  fallbackReason?: string;
}

/** Options a handler receives at initialize; from config and the registration. */
export interface WorkerOptions {
  intraOpThreads: number;
  numBeams: number;
  maxNewTokens: number;
  /** MIN_NEW_TOKENS: `</s>` is suppressed until this many tokens exist (0: off). */
  minNewTokens?: number;
  /** MODEL_DTYPE: which weights the engine loads (engine/session.ts; absent: `auto`). */
  modelDtype?: ModelDtypeSetting;
  /** GENERATION: in one run per batch or by the step loop (engine/search/load.ts; absent: `auto`). */
  generation?: GenerationSetting;
}

export interface InitMessage {
  type: 'init';
  workerId: string;
  handler: string;
  modelDir: string;
  device: DeviceRequest;
  options: WorkerOptions;
}

/**
 * One sentence for the translation handler, cut by translation/translation-plan.ts from a request the model server
 * checked at its edge (common/translation-contract.ts). The worker trusts it; only the engine may still refuse it
 * (a language it lacks, a glossary term its vocabulary cannot write), which fails this item alone.
 */
export interface SentenceItem {
  /** The source language: the request's, or the one detected for `auto`. */
  srcLang: string;
  /** The sentence (a whole text with `split: "none"`); never blank. */
  text: string;
  /**
   * 1 to MAX_TERMS_PER_SENTENCE glossary entries found in it, `[source, target, spans of text]` (text/glossary.ts):
   * its translation must contain each target, and a part the worker splits off those whose spans lie inside it.
   */
  terms?: [string, string, [number, number][]][];
  /** Alternative translations asked for, 1 to MAX_ALTERNATIVES (the worker's beam runners-up); absent: none. */
  alternatives?: number;
  /**
   * Answer the translation's word alignment too (`alignment`, engine/alignment.ts): the sentence holds inline markup
   * to carry onto the translation (text/markup/inline-tags.ts). Absent: not computed.
   */
  align?: true;
}

/**
 * What a job carries: a sentence for the translation handler; for the others (echo) the client's body as it came,
 * JSON or the text of a body that is not JSON.
 */
export type ItemBody = SentenceItem | JsonValue;

export interface BatchItem<Body extends ItemBody = ItemBody> {
  /** Job id, unique within the frontend; replies are matched by it. */
  id: string;
  /** Registered model (language) the job was sent to; the translation handler's target language. */
  model: string;
  body: Body;
  /** Part of a large request (a long document): the engine schedules it as bulk work (engine/loop/generate.ts). */
  bulk?: boolean;
}

export interface BatchMessage {
  type: 'batch';
  batchId: number;
  items: BatchItem[];
}

/**
 * Every batch the pool gives one worker in one dispatch pass (a *round*, worker-pool.ts), as one IPC message:
 * separate messages may be read in separate event-loop turns, and the engine would then start the first at once
 * and the others at its next step boundary, as a cohort that must catch up with the first.
 */
export interface RoundMessage {
  type: 'round';
  batches: BatchMessage[];
}

export interface ShutdownMessage {
  type: 'shutdown';
}

/**
 * The frontend no longer wants these jobs (their client went away, or their deadline passed). A job still waiting
 * in the worker is dropped; a job whose rows are generating leaves the engine batch at the next step boundary.
 * The worker still answers each id exactly once (an `item` with the `reason` error), so every sent job is
 * accounted for; ids it no longer holds are ignored.
 */
export interface CancelMessage {
  type: 'cancel';
  ids: string[];
  reason: 'client-gone' | 'deadline';
}

export type ToWorker = InitMessage | BatchMessage | RoundMessage | CancelMessage | ShutdownMessage;

export interface ReadyMessage {
  type: 'ready';
  pid: number;
  device: DeviceInfo;
  loadMs: number;
  /** Languages (or other model names) this handler can serve, when it knows; e.g. the tokenizer's codes. */
  languages?: string[];
  /** The type of the weights the handler loaded (`fp32`, `fp16`, `int8`, …), when it has weights. */
  dtype?: string;
  /** The model it loaded, when it has one: its family, and the bytes of the weight files it read. */
  model?: LoadedModel;
  /**
   * Most jobs the handler runs at once (the translation engine: its decoder rows ÷ beams); the frontend never has
   * more in flight on this worker. Absent: no bound of the handler's own.
   */
  capacity?: number;
}

/** A handler's model as the status page and `GET /models/{name}` show it. */
export interface LoadedModel {
  /** `M2M100`, `NLLB-200`, `mBART-50`, `Marian` (engine/tokens/tokenizer.ts, from tokenizer_config.json). */
  family: string;
  weightsBytes: number;
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
  /** The handler's step counters since it loaded (handlers that batch in steps, e.g. the translation engine). */
  steps?: StepCounters;
}

/** Cumulative counts of a handler's batched steps: runs, and the rows they carried (mean batch = rows ÷ runs). */
export interface StepCounters {
  runs: number;
  rows: number;
  /** Rows that left the batch unfinished because their job was cancelled (deadline, client gone). */
  cancelledRows?: number;
  /** Rows that stopped at their token cap before `</s>` (the translation may be cut short). */
  cappedRows?: number;
  /** Rows a model run failed on alone (an onnxruntime error on their input). */
  failedRows?: number;
}

/**
 * Heartbeat of a worker that holds work: sent while its handler makes progress (the engine: after decoder steps),
 * at most every few hundred ms. The frontend recycles a worker only when it holds jobs and no progress came for
 * the response timeout — a hung engine — never because one job was slow.
 */
export interface ProgressMessage {
  type: 'progress';
  /** The handler's step counters since it loaded; they only grow while it makes progress. */
  steps: StepCounters;
  /** Rows generating now (after cancellations and finished rows left). */
  liveRows: number;
}

export type FromWorker = ReadyMessage | InitFailedMessage | ItemMessage | BatchDoneMessage | ProgressMessage;
