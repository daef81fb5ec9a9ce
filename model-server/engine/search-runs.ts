/**
 * @module engine/search-runs — schedules the search graph's runs (search-session.ts): rows submitted one by one are
 * gathered into runs, each a whole generation of its batch in one onnxruntime call.
 *
 * - **Batching.** Rows submitted in one turn of the event loop are seen together. A run takes every waiting row with its settings (numBeams, token caps, length penalty), at most
 *   `maxBatchRows` decoder rows (beams count), longest wait first. Rows arriving while runs are in flight wait for the
 *   next run, so the batch grows with the load, as the step loop's does.
 * - **Keeping the device busy.** A run holds its batch until its last row ends, and the device idles while the host
 *   prepares and reads a run. So up to `runsInFlight` runs (default 2) go at once on the one session: while one
 *   finishes its long rows, the next has started. Rows are sorted by source length within a run's pick, so a run's
 *   padding stays small.
 * - **Bulk rows** (a long document's sentences) run apart from interactive ones, and an interactive row is picked
 *   first, so a single sentence never waits behind a document's run for a slot.
 * - **Cancelling.** A waiting row leaves at once; a row in a run is answered at once with the signal's reason and its
 *   tokens are dropped when the run ends (a run cannot be stopped midway).
 * - **A row failing alone.** If a run of several rows fails, each of its rows runs again alone, so only the row that
 *   cannot run fails.
 */
import type { Hypothesis, SearchSettings } from './decoding.js';
import type { SearchRow, SearchRunSettings, SearchSession } from './search-session.js';
import type { SubmitOptions } from './sequences.js';

export interface SearchRunsOptions {
  /** Decoder rows (rows × beams) per run at most. */
  maxBatchRows: number;
  /** Runs on the session at once; default 2. */
  runsInFlight?: number;
  /** Called as each run ends: the progress signal the step loop gives per step (EngineOptions.onStep). */
  onRun?: () => void;
}

export interface SearchRunStats {
  runs: number;
  rows: number;
  /** Runs that failed and were retried row by row. */
  retriedRuns: number;
}

interface Waiting {
  row: SearchRow;
  settings: SearchRunSettings;
  key: string;
  bulk: boolean;
  resolve: (hyp: Hypothesis) => void;
  reject: (err: Error) => void;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
  settled: boolean;
}

export class SearchRuns {
  readonly #session: SearchSession;
  readonly #maxBatchRows: number;
  readonly #runsInFlight: number;
  readonly #onRun: (() => void) | undefined;
  readonly #waiting: Waiting[] = [];
  #inFlight = 0;
  #scheduled = false;
  readonly #idle: (() => void)[] = [];
  readonly #stats: SearchRunStats = { runs: 0, rows: 0, retriedRuns: 0 };

  constructor(session: SearchSession, options: SearchRunsOptions) {
    this.#session = session;
    this.#maxBatchRows = options.maxBatchRows;
    this.#runsInFlight = Math.max(1, options.runsInFlight ?? 2);
    this.#onRun = options.onRun;
  }

  stats(): Readonly<SearchRunStats> {
    return { ...this.#stats };
  }

  /** Rows waiting for a run or in one. */
  get pending(): number {
    return this.#waiting.length + this.#inFlight;
  }

  submit(row: SearchRow, settings: SearchSettings, options: SubmitOptions = {}): Promise<Hypothesis> {
    const { signal } = options;
    if (signal?.aborted) return Promise.reject(reasonOf(signal));
    const run: SearchRunSettings = {
      numBeams: settings.numBeams,
      maxNewTokens: settings.maxNewTokens,
      minNewTokens: settings.minNewTokens,
      lengthPenalty: settings.lengthPenalty,
    };
    const bulk = options.bulk === true;
    return new Promise<Hypothesis>((resolve, reject) => {
      const waiting: Waiting = {
        row,
        settings: run,
        key: `${bulk}|${run.numBeams}|${run.maxNewTokens}|${run.minNewTokens}|${run.lengthPenalty}`,
        bulk,
        resolve,
        reject,
        signal,
        onAbort: undefined,
        settled: false,
      };
      if (signal) {
        waiting.onAbort = () => {
          const at = this.#waiting.indexOf(waiting);
          if (at >= 0) this.#waiting.splice(at, 1);
          this.#settle(waiting, reasonOf(signal));
        };
        signal.addEventListener('abort', waiting.onAbort, { once: true });
      }
      this.#waiting.push(waiting);
      this.#schedule();
    });
  }

  /** Resolves once no row waits and no run is in flight. */
  drained(): Promise<void> {
    if (this.pending === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Rows submitted in one turn of the event loop (a batch the worker was given) go into one run. */
  #schedule(): void {
    if (this.#scheduled) return;
    this.#scheduled = true;
    setImmediate(() => {
      this.#scheduled = false;
      this.#pump();
    });
  }

  #pump(): void {
    while (this.#inFlight < this.#runsInFlight && this.#waiting.length > 0) {
      const batch = this.#pick();
      this.#inFlight++;
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#onRun?.();
        this.#pump();
        if (this.pending === 0) for (const resolve of this.#idle.splice(0)) resolve();
      });
    }
  }

  /** The next run's rows: the first interactive row's group (else the oldest row's), shortest sources first. */
  #pick(): Waiting[] {
    const first = this.#waiting.find((w) => !w.bulk) ?? this.#waiting[0]!;
    const perRun = Math.max(1, Math.floor(this.#maxBatchRows / first.settings.numBeams));
    const picked: Waiting[] = [];
    for (let i = 0; i < this.#waiting.length && picked.length < perRun;) {
      if (this.#waiting[i]!.key === first.key) picked.push(...this.#waiting.splice(i, 1));
      else i++;
    }
    return picked.sort((a, b) => a.row.inputIds.length - b.row.inputIds.length);
  }

  async #run(batch: Waiting[]): Promise<void> {
    const live = batch.filter((w) => !w.settled);
    if (live.length === 0) return;
    const settings = live[0]!.settings;
    this.#stats.runs++;
    this.#stats.rows += live.length;
    try {
      const results = await this.#session.run(
        live.map((w) => w.row),
        settings,
      );
      results.forEach((result, i) => {
        const hyp: Hypothesis = { tokens: result.tokenIds, logprob: 0 };
        hyp.ranked = [{ hyp, score: result.score }];
        this.#settle(live[i]!, null, hyp);
      });
    } catch (err) {
      if (live.length === 1) {
        this.#settle(live[0]!, err instanceof Error ? err : new Error(String(err)));
        return;
      }
      this.#stats.retriedRuns++;
      // One row may be what the run could not take: each alone, so only that one fails.
      for (const w of live) await this.#run([w]);
    }
  }

  #settle(waiting: Waiting, err: Error | null, hyp?: Hypothesis): void {
    if (waiting.settled) return;
    waiting.settled = true;
    if (waiting.onAbort) waiting.signal?.removeEventListener('abort', waiting.onAbort);
    if (err !== null) waiting.reject(err);
    else waiting.resolve(hyp!);
  }
}

function reasonOf(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  return reason instanceof Error ? reason : new Error(String(reason ?? 'aborted'));
}
