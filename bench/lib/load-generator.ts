/**
 * @module bench/lib/load-generator — a closed-loop HTTP load generator on an undici Pool.
 *
 * `concurrency` clients each send their next request the moment the previous one is answered (closed loop:
 * the offered load adapts to the server, as real callers waiting on a translation do). Every answered request
 * is recorded with its latency, status and size; the result reports requests/s, work units/s (sentences),
 * p50/p90/p99 and an error tally keyed by HTTP status (or by the network error code when there was no status).
 *
 * A run is bounded by a request count (every one awaited; the window is first send → last answer), or by a
 * measured window:
 * ```
 *  start ─── warm-up ───▶ windowStart ──────── window ────────▶ windowEnd ─▶ abort or drain what is in flight
 *          ≥ warmupMs and every client        ≥ minWindowMs and ≥ minWindowCompletions answers
 *          answered warmupPerClient times     (or maxWindowMs, whichever first)
 * ```
 * Answers completed inside the window are the result: throughput is their count over the window's length, which
 * is unbiased for a closed loop in steady state. The completion-count conditions matter for servers that share
 * the processor among all requests (a per-request pipeline at concurrency 64 answers nothing for a minute, then
 * 64 answers at once): the window then spans whole cycles instead of catching a burst or a gap.
 * `maxTotalMs` bounds the run whatever happens (the result says `truncated`).
 */
import { setMaxListeners } from 'node:events';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { Pool } from 'undici';
import { summarize, type LatencySummary } from './stats.js';

/** One request the generator sends; built per sequence number so workloads can vary. */
export interface RequestSpec {
  path: string;
  method?: 'GET' | 'POST' | 'PUT';
  /** JSON text (sent as application/json unless `headers` says otherwise), or bytes such as a multipart upload. */
  body?: string | Uint8Array;
  headers?: Record<string, string>;
  /** Units of work the request carries (sentences in a translation request); 1 when omitted. */
  units?: number;
}

export interface ClosedLoopOptions {
  /** Server origin, e.g. `http://127.0.0.1:7777`. */
  origin: string;
  /** Number of clients, each with at most one request in flight. */
  concurrency: number;
  /** Builds request number `seq` (0-based, in send order across all clients). */
  request: (seq: number) => RequestSpec;
  /** Count-bounded run: send this many requests in all and await every answer. Excludes the window options. */
  requests?: number;
  /** Window-bounded run: the window lasts at least this long, ms. */
  minWindowMs?: number;
  /** …and until this many answers arrived in it. Default 0. */
  minWindowCompletions?: number;
  /**
   * …and until the answers in it are a whole number of rounds (a multiple of `concurrency`): for servers that
   * answer every client at once, so the window spans whole cycles even where `minWindowMs` is not a multiple of
   * one. Default false.
   */
  wholeRounds?: boolean;
  /** …but never longer than this, ms. Default: only maxTotalMs bounds it. */
  maxWindowMs?: number;
  /** The window opens no earlier than this, ms. Default 0. */
  warmupMs?: number;
  /** …and once every client has had this many answers. Default 0. */
  warmupPerClient?: number;
  /** Hard bound on the whole run, ms (warm-up, window and drain). Default 30 minutes. */
  maxTotalMs?: number;
  /**
   * At the end of the window: `abort` cancels what is in flight (fast; use with a server that is torn down
   * next), `drain` stops sending and waits for the answers (the server is idle when the run resolves, so the
   * next measurement on it starts clean). Default `abort`.
   */
  onWindowEnd?: 'abort' | 'drain';
  /**
   * Validates a response. Return undefined when it is good, or a short reason that is tallied as an error
   * (e.g. a 200 whose body lacks the expected field). Default: any 2xx is good.
   */
  check?: (status: number, body: Buffer, headers: Record<string, string | string[] | undefined>) => string | undefined;
  /** Per-request limit on waiting for the answer, ms. Default 600 000. */
  timeoutMs?: number;
  /** Aborts the whole run (Ctrl-C): in-flight requests are cancelled and the run resolves with what it has. */
  signal?: AbortSignal;
  /**
   * A client refused with 503 + `Retry-After: N` waits N seconds plus a random fraction of one before its next
   * request, as a polite client does (whole seconds in the header; the jitter keeps clients refused together from
   * returning together). Default false: the next request goes at once.
   */
  honorRetryAfter?: boolean;
  /** Called once when the window opens and once when it closes (e.g. to scrape server metrics at its edges). */
  onWindowOpen?: () => void;
  onWindowClose?: () => void;
}

/** One answered request. Times are ms on the performance clock, relative to the start of the run. */
export interface RequestRecord {
  seq: number;
  client: number;
  startMs: number;
  endMs: number;
  latencyMs: number;
  /** HTTP status, or 0 when the request failed without one (connection refused, reset, timeout). */
  status: number;
  /** Response body bytes. */
  bytes: number;
  units: number;
  /** Why the request counts as failed; undefined when it succeeded. */
  error?: string;
}

export interface LoadResult {
  concurrency: number;
  /** Length of the measured window, ms. */
  windowMs: number;
  /** Time from the start of the run to the window's opening, ms. */
  warmupMs: number;
  /** The run hit maxTotalMs or was aborted: the window is shorter than asked. */
  truncated: boolean;
  /** The whole run, warm-up and drain included, ms. */
  elapsedMs: number;
  /** Answers over the whole run, warm-up included. */
  answeredTotal: number;
  /**
   * An upper bound on the server's throughput over the whole run, requests/s: as if every request still in flight
   * had been answered at its very end, (answeredTotal + concurrency) ÷ elapsed. The one figure a server too slow to
   * answer anything inside the run still has.
   */
  requestsPerSUpperBound: number;
  /** Requests answered inside the window, successful or not. */
  completed: number;
  ok: number;
  failed: number;
  /** Failures by HTTP status ("503") or, without a status, by reason ("ECONNRESET", "502 bad-body"). */
  errorsByStatus: Record<string, number>;
  requestsPerS: number;
  /** Successful units (sentences) per second. */
  unitsPerS: number;
  /** Latency of successful requests, ms. */
  latency: LatencySummary;
  bytesIn: number;
  /** Every request answered inside the window. */
  records: RequestRecord[];
  /**
   * How late this process's own event loop ran during the window (p99 and max, ms; NaN for count-bounded runs): a
   * latency it records includes up to this much of the generator's own delay.
   */
  loopDelayMs: LoopDelay;
}

/** How late an event loop ran, ms (NaN: not measured). */
export interface LoopDelay {
  p99: number;
  max: number;
}

export const LOOP_DELAY_NOT_MEASURED: Readonly<LoopDelay> = { p99: Number.NaN, max: Number.NaN };

/** Run a closed-loop load against `options.origin` (see the module doc for how a run is bounded). */
export async function runClosedLoop(options: ClosedLoopOptions): Promise<LoadResult> {
  const { concurrency } = options;
  if (!(Number.isInteger(concurrency) && concurrency >= 1))
    throw new RangeError(`concurrency must be ≥ 1, got ${concurrency}`);
  const countBounded = options.requests !== undefined;
  if (countBounded === (options.minWindowMs !== undefined))
    throw new TypeError('give exactly one of requests or minWindowMs');
  const timeoutMs = options.timeoutMs ?? 600_000;
  const check = options.check ?? ((status: number) => (status >= 200 && status < 300 ? undefined : String(status)));
  const minWindowMs = options.minWindowMs ?? 0;
  const minWindowCompletions = options.minWindowCompletions ?? 0;
  const maxWindowMs = options.maxWindowMs ?? Number.POSITIVE_INFINITY;
  const warmupMs = options.warmupMs ?? 0;
  const warmupPerClient = options.warmupPerClient ?? 0;
  const maxTotalMs = options.maxTotalMs ?? 30 * 60_000;
  const drain = options.onWindowEnd === 'drain';

  const pool = new Pool(options.origin, {
    connections: concurrency,
    pipelining: 1,
    // The server decides how long a request takes; only the generator's own timeout applies.
    headersTimeout: timeoutMs,
    bodyTimeout: timeoutMs,
    keepAliveTimeout: 60_000,
  });
  const cancel = new AbortController(); // cancels in-flight requests
  // undici listens on the signal for each in-flight request and again while its body is read, and a client backing
  // off after a 503 listens too: three per client.
  setMaxListeners(3 * concurrency + 16, cancel.signal);
  let sending = true; // clients send new requests while true
  const onOuterAbort = () => {
    truncated = true;
    sending = false;
    cancel.abort();
  };
  options.signal?.addEventListener('abort', onOuterAbort, { once: true });

  const t0 = performance.now();
  const now = () => performance.now() - t0;
  let windowStart = countBounded ? 0 : Number.POSITIVE_INFINITY;
  let windowEnd = Number.POSITIVE_INFINITY;
  let truncated = false;
  let nextSeq = 0;
  let windowCompletions = 0;
  const answersPerClient = new Array<number>(concurrency).fill(0);
  const records: RequestRecord[] = [];
  const loopDelay = monitorEventLoopDelay({ resolution: 5 });

  // The window's boundaries are decided here, on every answer (`answerMs`: when it arrived) and on a coarse tick
  // (for the time bounds). It opens right after an answer and ends with one: a window ended on a tick between a
  // bursty server's answers would add the idle part of a cycle without its answers (a 3.7 s cycle in a 5 s window
  // read as 64 answers in 5 s).
  const advance = (answerMs?: number) => {
    if (countBounded || !sending) return;
    const t = now();
    const atAnswer = answerMs !== undefined;
    if (
      windowStart === Number.POSITIVE_INFINITY &&
      atAnswer &&
      t >= warmupMs &&
      answersPerClient.every((n) => n >= warmupPerClient)
    ) {
      windowStart = t;
      loopDelay.enable();
      options.onWindowOpen?.();
    }
    // Measured to the answer, not to now: the window it may end is cut at the answer (`windowEnd` below), and a
    // loaded machine can run this a few ms after the answer arrived.
    const inWindow = (answerMs ?? t) - windowStart;
    const opened = windowStart !== Number.POSITIVE_INFINITY;
    const complete =
      atAnswer &&
      opened &&
      inWindow >= minWindowMs &&
      windowCompletions >= minWindowCompletions &&
      (!options.wholeRounds || windowCompletions % concurrency === 0);
    const endOfWindow = complete || (opened && inWindow >= maxWindowMs);
    if (endOfWindow || t >= maxTotalMs) {
      if (!endOfWindow) truncated = true;
      windowEnd = Math.min(complete ? answerMs! : t, opened ? windowStart + maxWindowMs : t);
      if (windowStart === Number.POSITIVE_INFINITY) windowStart = t; // never opened: an empty window
      sending = false;
      loopDelay.disable();
      options.onWindowClose?.();
      if (!drain || t >= maxTotalMs) cancel.abort();
    }
  };
  const ticker = setInterval(() => advance(), 20);
  const hardStop = setTimeout(
    () => {
      truncated = true;
      sending = false;
      cancel.abort();
    },
    maxTotalMs + (drain ? timeoutMs : 0),
  );
  if (options.signal?.aborted) onOuterAbort();

  const client = async (clientId: number): Promise<void> => {
    while (sending) {
      if (countBounded && nextSeq >= options.requests!) return;
      const seq = nextSeq++;
      const spec = options.request(seq);
      const startMs = now();
      let status = 0;
      let bytes = 0;
      let error: string | undefined;
      let retryAfterS = 0;
      try {
        const response = await pool.request({
          path: spec.path,
          method: spec.method ?? (spec.body === undefined ? 'GET' : 'POST'),
          headers: spec.body === undefined ? spec.headers : { 'content-type': 'application/json', ...spec.headers },
          body: spec.body,
          signal: cancel.signal,
        });
        status = response.statusCode;
        if (status === 503) retryAfterS = Number(response.headers['retry-after']) || 0;
        const body = Buffer.from(await response.body.arrayBuffer());
        bytes = body.length;
        error = check(status, body, response.headers);
      } catch (err) {
        if (cancel.signal.aborted) return; // cut off at the end of the run: not an answer
        error = networkErrorName(err);
      }
      const endMs = now();
      records.push({
        seq,
        client: clientId,
        startMs,
        endMs,
        latencyMs: endMs - startMs,
        status,
        bytes,
        units: spec.units ?? 1,
        error,
      });
      answersPerClient[clientId]!++;
      if (endMs >= windowStart && endMs <= windowEnd) windowCompletions++;
      advance(endMs);
      if (options.honorRetryAfter && retryAfterS > 0) await backOff((retryAfterS + Math.random()) * 1000);
    }
  };
  /** Wait `ms`, or less when the run stops sending. */
  const backOff = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        cancel.signal.removeEventListener('abort', done);
        resolve();
      }
      cancel.signal.addEventListener('abort', done, { once: true });
    });

  try {
    await Promise.all(Array.from({ length: concurrency }, (_, i) => client(i)));
  } finally {
    clearInterval(ticker);
    clearTimeout(hardStop);
    options.signal?.removeEventListener('abort', onOuterAbort);
    cancel.abort();
    await pool.destroy().catch(() => undefined);
  }

  if (countBounded) {
    windowStart = records.length ? Math.min(...records.map((r) => r.startMs)) : 0;
    windowEnd = records.reduce((m, r) => Math.max(m, r.endMs), windowStart);
  } else if (windowEnd === Number.POSITIVE_INFINITY) {
    // aborted from outside before the window closed
    windowEnd = now();
    if (windowStart === Number.POSITIVE_INFINITY) windowStart = windowEnd;
  }
  const inWindow = records.filter((r) => r.endMs >= windowStart && r.endMs <= windowEnd);
  const elapsedMs = now();
  return {
    ...resultOf(concurrency, windowEnd - windowStart, inWindow),
    loopDelayMs: countBounded
      ? LOOP_DELAY_NOT_MEASURED
      : { p99: loopDelay.percentile(99) / 1e6, max: loopDelay.max / 1e6 },
    warmupMs: windowStart,
    truncated,
    elapsedMs,
    answeredTotal: records.length,
    requestsPerSUpperBound: (records.length + concurrency) / (elapsedMs / 1000),
  };
}

/** Aggregate records answered inside a window of `windowMs` into a LoadResult (no warm-up: the window is the run). */
export function resultOf(concurrency: number, windowMs: number, records: RequestRecord[]): LoadResult {
  const errorsByStatus: Record<string, number> = {};
  let ok = 0;
  let units = 0;
  let bytesIn = 0;
  const latencies: number[] = [];
  for (const r of records) {
    bytesIn += r.bytes;
    if (r.error === undefined) {
      ok++;
      units += r.units;
      latencies.push(r.latencyMs);
    } else {
      const key = r.status === 0 || r.error === String(r.status) ? r.error : `${r.status} ${r.error}`;
      errorsByStatus[key] = (errorsByStatus[key] ?? 0) + 1;
    }
  }
  const seconds = windowMs / 1000;
  return {
    concurrency,
    windowMs,
    warmupMs: 0,
    truncated: false,
    elapsedMs: windowMs,
    answeredTotal: records.length,
    requestsPerSUpperBound: seconds > 0 ? (records.length + concurrency) / seconds : Number.NaN,
    completed: records.length,
    ok,
    failed: records.length - ok,
    errorsByStatus,
    requestsPerS: seconds > 0 ? records.length / seconds : Number.NaN,
    unitsPerS: seconds > 0 ? units / seconds : Number.NaN,
    latency: summarize(latencies),
    bytesIn,
    records,
    loopDelayMs: LOOP_DELAY_NOT_MEASURED,
  };
}

function networkErrorName(err: unknown): string {
  const e = err as { code?: unknown; name?: unknown };
  if (typeof e?.code === 'string') return e.code;
  if (typeof e?.name === 'string') return e.name;
  return 'network-error';
}
