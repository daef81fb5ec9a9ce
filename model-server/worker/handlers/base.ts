/**
 * @module worker/handlers/base — the handler contract, in the spirit of TorchServe's BaseHandler
 * (initialize / preprocess / inference / postprocess), and `runBatch`, which drives one batch through it
 * with per-item outcomes.
 */
import { ServeError, toServeError } from '../../../common/errors.js';
import type { Logger } from '../../../common/logger.js';
import type {
  BatchItem,
  DeviceInfo,
  InitMessage,
  ItemBody,
  ItemOutcome,
  LoadedModel,
  StepCounters,
} from '../../protocol.js';

/** What `init` named to load, and the worker's logger. */
export interface HandlerContext extends Pick<InitMessage, 'modelDir' | 'device' | 'options'> {
  log: Logger;
}

/**
 * A model handler. One instance per worker process; it owns the engine (weights, sessions).
 *
 * Concurrency: `inference` may be called again before an earlier call has resolved (the worker keeps
 * several batches in flight). A handler that can merge work does so (the translation engine joins new
 * rows at its next step boundary); one that cannot must queue internally. Either way each input is
 * answered exactly once through `emit`.
 *
 * `Body` is what its items carry (protocol.ts): the frontend sends each handler the bodies it plans for it.
 */
export interface Handler<Input = unknown, Output = unknown, Body extends ItemBody = ItemBody> {
  /** Load the model on the requested device; resolve with where it really runs (never fall back silently). */
  initialize(ctx: HandlerContext): Promise<DeviceInfo>;
  /** Languages/models this handler can serve, if it knows (after initialize). */
  languages?(): string[];
  /** The type of the weights it loaded (after initialize), for handlers with weights. */
  dtype?(): string;
  /** The model it loaded (after initialize): family and weight bytes, for handlers with a model. */
  model?(): LoadedModel;
  /**
   * Most inputs this handler runs at once, across `inference` calls (absent: no bound, e.g. a handler that
   * answers at once). The frontend keeps at most this many jobs in flight on the worker (wlm/workers/worker-pool.ts).
   */
  capacity?(): number;
  /** Decoder runs and the rows they carried since load, for handlers that batch in steps (the engine's real batch). */
  steps?(): StepCounters;
  /** Rows the handler is working on now (the engine: decoder rows generating), for progress messages. */
  liveRows?(): number;
  /**
   * Have `listener` called after every batched step (the engine: each step boundary where the decoder ran),
   * unthrottled; the worker decides how often that becomes a `progress` message. Called once, after initialize.
   */
  onStep?(listener: () => void): void;
  /**
   * The frontend gave up on these jobs (worker/run-worker.ts, protocol `cancel`): stop the work of each one this handler
   * holds and answer it through its `emit` with `error`, exactly once, as soon as its work has stopped. Ids it
   * does not hold (answered already, or never seen) are ignored. It holds a job from the moment `preprocess` is
   * called: the worker's IPC delivers the messages of one read back to back, so a cancel sent just after its batch
   * can come before the batch's `inference` starts. Absent: jobs run to their end.
   */
  cancel?(ids: readonly string[], error: ServeError): void;
  /**
   * Decode one request. Throw (or reject with) a ServeError to fail this request alone. Long work returns a
   * promise and yields to the event loop as it goes: the engine's step loop shares this thread.
   */
  preprocess(item: BatchItem<Body>): Input | Promise<Input>;
  /**
   * Run the decoded inputs. Call `emit(i, output)` for input i as soon as it is done (or `emit(i, error)`
   * to fail it alone); resolve once every input has been emitted.
   */
  inference(inputs: Input[], emit: (index: number, result: Output | ServeError) => void): Promise<void>;
  /** Turn one output into the JSON value sent back for its request. */
  postprocess(output: Output, item: BatchItem<Body>): unknown;
  /** Release sessions and memory. */
  close(): Promise<void>;
}

/**
 * Drive one batch through a handler. `reply` is called exactly once per item, in completion order.
 * Items that fail preprocess never reach inference; if inference throws, every item it had not
 * answered fails with PREDICTION_FAILED (what TorchServe answers a handler exception with).
 */
export async function runBatch(
  handler: Handler,
  items: BatchItem[],
  reply: (id: string, outcome: ItemOutcome) => void,
  log: Logger,
): Promise<void> {
  const inputs: unknown[] = [];
  const owners: BatchItem[] = [];
  const prepared = await Promise.allSettled(items.map(async (item) => handler.preprocess(item)));
  prepared.forEach((outcome, i) => {
    const item = items[i]!;
    if (outcome.status === 'rejected') return reply(item.id, failure(outcome.reason, log));
    inputs.push(outcome.value);
    owners.push(item);
  });
  if (inputs.length === 0) return;
  const answered = new Array<boolean>(inputs.length).fill(false);
  const emit = (index: number, result: unknown) => {
    const item = owners[index];
    if (item === undefined || answered[index]) return; // a handler bug must not answer twice
    answered[index] = true;
    if (result instanceof Error) {
      reply(item.id, failure(result, log));
      return;
    }
    try {
      reply(item.id, { ok: true, value: handler.postprocess(result, item) });
    } catch (err) {
      reply(item.id, failure(err, log));
    }
  };
  try {
    await handler.inference(inputs, emit);
  } catch (err) {
    log.error({ err }, 'handler inference failed');
  }
  answered.forEach((done, index) => {
    if (!done) emit(index, new ServeError('PREDICTION_FAILED'));
  });
}

function failure(err: unknown, log: Logger): ItemOutcome {
  const serveError = toServeError(err);
  if (!(err instanceof ServeError)) log.error({ err }, 'unexpected handler error');
  return { ok: false, error: serveError.toWire() };
}
