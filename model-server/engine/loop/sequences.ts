/**
 * @module engine/sequences — the sequences submitted to the generator, from `submit` to their one answer: the
 * queue of those waiting for room, those generating (their rows live in cohorts), and those cancelled while
 * generating, whose rows the loop gathers out at the next step boundary (generate.ts).
 *
 * Who writes what: `add` and abort listeners append (a waiting sequence cancelled leaves the queue at once);
 * everything else is called by the generation loop between runs. Every sequence is answered exactly once.
 */
import { type Hypothesis, SearchState, type SearchSettings } from '../decoding.js';
import type { Admitted } from './encode.js';
import type { GeneratorStats } from './generator-stats.js';

export interface GenerationRequest {
  /** Encoder input: `[__src__] tokens </s>`. */
  inputIds: readonly number[];
  settings: SearchSettings;
}

/** How a caller may end a submitted sequence early. */
export interface SubmitOptions {
  /**
   * Aborting it cancels the sequence: one still waiting leaves the queue at once, one generating leaves its
   * cohort at the next step boundary (all its beams together). Either way the promise rejects with the
   * signal's reason (an Error; anything else is wrapped in one), unless the sequence finished in the run the
   * abort came during: it resolves with its answer then.
   */
  signal?: AbortSignal;
  /**
   * Bulk work (a long document's sentences, a big batch): it shares the engine with interactive work but never
   * holds it up — generate.ts gives it a bounded share of decoder time while interactive rows generate.
   */
  bulk?: boolean;
  /**
   * Called with the sequence's encoder states (`[S, d_model]` floats, its own copy) once the encoder has run on it:
   * for a row whose word alignment will be asked for, so that the alignment pass need not run the encoder again
   * (engine/alignment.ts). Rows that give none pay nothing. Only the host path's step loop calls it (encode.ts).
   */
  onEncoded?: (states: Float32Array) => void;
  /**
   * Called as the sequence finishes, before its answer, with the cross-attention its best hypothesis was written
   * with (per generated token, in order, its `[S]` row: the decoder graph's `DecoderOutputs.crossAttention`), for its
   * word alignment without a pass after generation (engine/alignment.ts). Only where the step loop's graph offers it
   * on the host path (`Generator.keepsAttention`). Rows that do not ask fetch nothing more.
   */
  onAttention?: (steps: Float32Array[]) => void;
}

interface Waiter {
  request: GenerationRequest;
  state: SearchState;
  bulk: boolean;
  onEncoded: SubmitOptions['onEncoded'];
  onAttention: SubmitOptions['onAttention'];
  /** Settle the caller's promise (and stop listening to its signal). */
  resolve: (hyp: Hypothesis) => void;
  reject: (err: Error) => void;
}

export class Sequences {
  readonly #stats: GeneratorStats;
  readonly #eosTokenId: number;
  readonly #pending: Waiter[] = [];
  readonly #generating = new Map<SearchState, Waiter>();
  /** Generating sequences whose caller cancelled them, with the error they reject with. */
  readonly #cancelled = new Map<SearchState, Error>();

  constructor(stats: GeneratorStats, eosTokenId: number) {
    this.#stats = stats;
    this.#eosTokenId = eosTokenId;
  }

  /** Sequences waiting for room. */
  get waiting(): number {
    return this.#pending.length;
  }

  /** Sequences of one class waiting for room. */
  waitingOf(bulk: boolean): number {
    return this.#pending.reduce((n, w) => n + (w.bulk === bulk ? 1 : 0), 0);
  }

  /** Generating sequences cancelled since the loop last looked, with their errors. */
  get cancelled(): ReadonlyMap<SearchState, Error> {
    return this.#cancelled;
  }

  /** Queue a sequence; the promise is its answer. */
  add(request: GenerationRequest, options: SubmitOptions): Promise<Hypothesis> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(abortError(signal));
    return new Promise<Hypothesis>((resolve, reject) => {
      const onAbort = () => this.#cancel(waiter, abortError(signal!));
      const waiter: Waiter = {
        request,
        state: new SearchState(request.settings, options.onAttention !== undefined),
        bulk: options.bulk === true,
        onEncoded: options.onEncoded,
        onAttention: options.onAttention,
        resolve: (hyp) => {
          signal?.removeEventListener('abort', onAbort);
          resolve(hyp);
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort);
          reject(err);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.#pending.push(waiter);
    });
  }

  /**
   * Take sequences of one class from the front of the queue, in order, while their rows (beams) fit in `room`;
   * the first one whatever its width when `takeFirst`. They are generating from now on.
   */
  admit(room: number, takeFirst: boolean, bulk: boolean): Admitted[] {
    const admitted: Admitted[] = [];
    const left: Waiter[] = [];
    let full = false;
    for (const waiter of this.#pending) {
      const rows = waiter.state.settings.numBeams;
      if (full || waiter.bulk !== bulk || (!(takeFirst && admitted.length === 0) && rows > room)) {
        if (waiter.bulk === bulk) full = true; // keep the class's order: nobody behind it overtakes
        left.push(waiter);
        continue;
      }
      this.#generating.set(waiter.state, waiter);
      admitted.push({ inputIds: waiter.request.inputIds, state: waiter.state, onEncoded: waiter.onEncoded });
      room -= rows;
    }
    this.#pending.splice(0, this.#pending.length, ...left);
    return admitted;
  }

  /**
   * A generating sequence finished: answer its best hypothesis, also when it was cancelled during the run it
   * finished in. A cancel saves the steps a sequence has left; one with none left has cost all it will, and its
   * answer says so to whoever counts wasted work (the model server counts it as finished after its client left,
   * where a rejection would count it nowhere: not a cancelled row, since none left early).
   */
  finish(state: SearchState): void {
    this.#cancelled.delete(state);
    const waiter = this.#generating.get(state);
    if (waiter === undefined) return;
    this.#generating.delete(state);
    const best = state.best();
    if (best.tokens.at(-1) !== this.#eosTokenId) this.#stats.cappedRows++;
    // The runners-up ride along: a request asking for alternatives reads them (engine.ts).
    best.ranked = state.finished;
    waiter.onAttention?.(trail(best));
    waiter.resolve(best);
  }

  /**
   * Reject a generating sequence whose rows have left every cohort: with its cancellation error (counted as
   * cancelled), or with the error of a model run that failed on it alone (counted as failed).
   */
  reject(state: SearchState, error: Error): void {
    const waiter = this.#generating.get(state);
    if (waiter === undefined) return;
    this.#generating.delete(state);
    if (this.#cancelled.get(state) === error) this.#stats.cancelled++;
    else this.#stats.failed++;
    this.#cancelled.delete(state);
    waiter.reject(error);
  }

  /** A run failed for the batch as a whole: every generating sequence rejects (a cancelled one with its own error). */
  rejectGenerating(error: Error): void {
    for (const [state, waiter] of this.#generating) waiter.reject(this.#cancelled.get(state) ?? error);
    this.#generating.clear();
    this.#cancelled.clear();
  }

  /** A waiting sequence leaves at once; a generating one is marked for the loop's next step boundary. */
  #cancel(waiter: Waiter, error: Error): void {
    const at = this.#pending.indexOf(waiter);
    if (at >= 0) {
      this.#pending.splice(at, 1);
      this.#stats.cancelled++;
      waiter.reject(error);
    } else if (this.#generating.get(waiter.state) === waiter) {
      this.#cancelled.set(waiter.state, error);
    }
  }
}

/** The rows of `hyp`'s attention trail, first step first. */
function trail(hyp: Hypothesis): Float32Array[] {
  const rows: Float32Array[] = [];
  for (let step = hyp.attention; step !== undefined; step = step.prev) rows.push(step.row);
  return rows.reverse();
}

/** The error a cancelled sequence rejects with: its signal's reason when that is an Error. */
function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(`generation cancelled: ${String(reason)}`);
}
