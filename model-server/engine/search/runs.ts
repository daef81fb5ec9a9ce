/**
 * @module engine/search/runs — schedules the search graph's runs (session.ts): rows submitted one by one are
 * gathered into runs, each a whole generation of its batch in one onnxruntime call.
 *
 * - **Batching.** A run takes every waiting row with its settings (numBeams, token caps, length penalty), at most
 *   `maxBatchRows` decoder rows (beams count), shortest sources together so its padding stays small. Rows arriving
 *   while a run is in flight wait for the next, so the batch grows with the load, as the step loop's does.
 * - **Gathering.** A run holds its batch until its last row ends and costs about as much for 64 rows as for 1 (the
 *   steps' fixed costs), so a run started on the first rows of a burst makes the rest wait a whole generation. With
 *   the device idle a run starts once as many rows wait as the last run had (a closed loop of clients sends its
 *   batch back), or `gatherMs` (40 ms, at most a quarter of what runs take) after the first waiting row: a lone
 *   request after lone requests starts at once, a burst goes in one run, and a drop in load costs one wait.
 *   Measured on an H200 (the 418M shapes, closed-loop clients through the stack), starting at once on the first rows:
 *   served ÷ engine 0.47 at 64 clients and 0.68 at 256.
 * - **Two in flight.** While one run finishes its long rows, a second may start (`runsInFlight`, default 2), so a new
 *   sentence does not wait for a document's longest row; it starts once half a batch waits or its oldest row has
 *   waited `holdMs` (50 ms, at most a quarter of a run), not for every row that arrives.
 * - **Bulk rows** (a long document's sentences) run apart from interactive ones, and an interactive row is picked
 *   first, so a single sentence never waits behind a document's run for a slot.
 * - **Cancelling.** A waiting row leaves at once; a row in a run is answered at once with the signal's reason and its
 *   tokens are dropped when the run ends (a run cannot be stopped midway).
 * - **A row failing alone.** If a run of several rows fails, each of its rows runs again alone, so only the row that
 *   cannot run fails.
 */
import type { Hypothesis, SearchSettings } from '../decoding.js';
import type { SearchRow, SearchRunSettings, SearchSession } from './session.js';
import type { SubmitOptions } from '../loop/sequences.js';

export interface SearchRunsOptions {
  /** Decoder rows (rows × beams) per run at most. */
  maxBatchRows: number;
  /** Runs on the session at once; default 2. */
  runsInFlight?: number;
  /** Idle device: a run waits for as many rows as the last run had, at most this long (ms; default 40). */
  gatherMs?: number;
  /** A run in flight: another starts for fewer than a quarter batch once its oldest row waited this long (default 50). */
  holdMs?: number;
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
  /** performance.now() at submit. */
  since: number;
}

export class SearchRuns {
  readonly #session: SearchSession;
  readonly #maxBatchRows: number;
  readonly #runsInFlight: number;
  readonly #onRun: (() => void) | undefined;
  readonly #waiting: Waiting[] = [];
  #inFlight = 0;
  #scheduled = false;
  #timer: NodeJS.Timeout | null = null;
  /** Rows of the last run started: how many a burst is expected to bring. */
  #lastRunRows = 1;
  /** How long runs take (ms; moving average, 0 until one ran). */
  #runMs = 0;
  readonly #gatherMs: number;
  readonly #holdMs: number;
  readonly #idle: (() => void)[] = [];
  readonly #stats: SearchRunStats = { runs: 0, rows: 0, retriedRuns: 0 };

  constructor(session: SearchSession, options: SearchRunsOptions) {
    this.#session = session;
    this.#maxBatchRows = options.maxBatchRows;
    this.#runsInFlight = Math.max(1, options.runsInFlight ?? 2);
    this.#onRun = options.onRun;
    this.#gatherMs = options.gatherMs ?? 40;
    this.#holdMs = options.holdMs ?? 50;
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
        since: performance.now(),
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
    if (this.#timer !== null) {
      clearTimeout(this.#timer);
      this.#timer = null;
    }
    while (this.#inFlight < this.#runsInFlight && this.#waiting.length > 0) {
      const wait = this.#waitBeforeRun();
      if (wait > 0) {
        this.#timer = setTimeout(() => {
          this.#timer = null;
          this.#pump();
        }, wait);
        return;
      }
      const batch = this.#pick();
      this.#lastRunRows = batch.reduce((n, w) => n + w.settings.numBeams, 0);
      this.#inFlight++;
      void this.#run(batch).finally(() => {
        this.#inFlight--;
        this.#onRun?.();
        this.#pump();
        if (this.pending === 0) for (const resolve of this.#idle.splice(0)) resolve();
      });
    }
  }

  /** Milliseconds until the next run should start (see Gathering in the module doc); 0: now. */
  #waitBeforeRun(): number {
    const first = this.#head();
    const rows = this.#waiting.reduce((n, w) => n + (w.key === first.key ? first.settings.numBeams : 0), 0);
    if (rows >= this.#maxBatchRows) return 0;
    const now = performance.now();
    if (this.#inFlight === 0) {
      if (rows >= Math.min(this.#lastRunRows, this.#maxBatchRows)) return 0;
      // Never more than a quarter of what a run takes: on a small model, waiting would cost more than it gathers.
      return Math.max(0, Math.min(this.#gatherMs, this.#runMs / 4) - (now - first.since));
    }
    if (rows >= this.#maxBatchRows / 2) return 0;
    return Math.max(0, Math.min(this.#holdMs, this.#runMs / 4) - (now - first.since));
  }

  /** The row the next run is for: the first interactive one, else the oldest. */
  #head(): Waiting {
    return this.#waiting.find((w) => !w.bulk) ?? this.#waiting[0]!;
  }

  /** The next run's rows: the head's group, shortest sources first. */
  #pick(): Waiting[] {
    const first = this.#head();
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
    const started = performance.now();
    try {
      const results = await this.#session.run(
        live.map((w) => w.row),
        settings,
      );
      const took = performance.now() - started;
      this.#runMs = this.#runMs === 0 ? took : 0.8 * this.#runMs + 0.2 * took;
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
