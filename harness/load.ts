/**
 * @module harness/load — traffic for the fault, overload, reload and soak drills, and the tally
 * they assert on: every request sent ends in exactly one bucket — answered 2xx, answered with an error (by status
 * and TorchServe type), or unanswered (the connection failed, or no answer within the client's deadline).
 * "Nothing lost" is `unanswered === 0`.
 */
import { setMaxListeners } from 'node:events';
import type { Readable } from 'node:stream';
import { Agent, type Dispatcher, request } from 'undici';

/**
 * One request of a drill's own clients on a timeline (wall-clock ms), for counting what happened in a window around
 * a kill or a cut: its language, when it was sent and answered, the status (-1: no answer) and Retry-After.
 */
export interface TimedOutcome {
  lang: string;
  start: number;
  end: number;
  status: number;
  retryAfter: string | undefined;
  /** The transport error of an unanswered request, or the start of an unexpected answer's body. */
  error?: string;
}

/**
 * A drill's own clients through `dispatcher` until stopped: `clients[lang]` clients per language, each sending one
 * translation (de → lang) at a time and recording its {@link TimedOutcome} (with what an answer other than 200 or
 * 503 said, for the failure message). A refused client pauses 50 ms before it sends again, as one honouring
 * Retry-After would: the drills need no flood of 503s. `stop()` lets every client finish its request.
 */
export function startTimedLoad(
  dispatcher: Dispatcher,
  clients: Record<string, number>,
  timeouts: { headersTimeout: number; bodyTimeout?: number },
): { outcomes: TimedOutcome[]; stop: () => Promise<TimedOutcome[]> } {
  const outcomes: TimedOutcome[] = [];
  let running = true;
  const client = async (lang: string, i: number) => {
    for (let n = 0; running; n++) {
      const outcome: TimedOutcome = { lang, start: Date.now(), end: 0, status: 0, retryAfter: undefined };
      try {
        const res = await dispatcher.request({
          method: 'POST',
          path: '/',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ src_lang: 'de', src_text: `${lang} ${i} ${n}`, tgt_lang: lang }),
          ...timeouts,
        });
        outcome.status = res.statusCode;
        outcome.retryAfter = res.headers['retry-after'] as string | undefined;
        const body = await res.body.text();
        if (outcome.status !== 200 && outcome.status !== 503) outcome.error = body.slice(0, 300);
      } catch (err) {
        outcome.status = -1;
        outcome.error = (err as Error).message;
      }
      outcome.end = Date.now();
      outcomes.push(outcome);
      if (outcome.status !== 200) await new Promise((r) => setTimeout(r, 50));
    }
  };
  const done = Promise.all(
    Object.entries(clients).flatMap(([lang, count]) => Array.from({ length: count }, (_, i) => client(lang, i))),
  );
  return {
    outcomes,
    stop: async () => {
      running = false;
      await done;
      return outcomes;
    },
  };
}

/** One finished request. */
export interface Outcome {
  /** HTTP status, or 0 when unanswered. */
  status: number;
  /** `{type}` of a JSON error body, the transport error code when unanswered. */
  kind: string;
  message: string;
  latencyMs: number;
  retryAfter: string | undefined;
  body: string;
}

export class Tally {
  sent = 0;
  ok = 0;
  unanswered = 0;
  /** `"503 ServiceUnavailableException"` → count. */
  readonly errors = new Map<string, number>();
  /** Transport error code → count (the unanswered ones). */
  readonly lost = new Map<string, number>();
  /** Latencies of the 2xx answers, ms. */
  readonly okLatencies: number[] = [];
  /** Error messages seen, with a count (for assertions that name the problem). */
  readonly messages = new Map<string, number>();
  /** Errors answered without a JSON body `{code, type, message}`, or with a stack trace in it. */
  malformed = 0;
  /** 503s that came without `Retry-After`. */
  missingRetryAfter = 0;

  add(o: Outcome): void {
    this.sent += 1;
    if (o.status === 0) {
      this.unanswered += 1;
      this.lost.set(o.kind, (this.lost.get(o.kind) ?? 0) + 1);
      return;
    }
    if (o.status >= 200 && o.status < 300) {
      this.ok += 1;
      this.okLatencies.push(o.latencyMs);
      return;
    }
    const key = `${o.status} ${o.kind}`;
    this.errors.set(key, (this.errors.get(key) ?? 0) + 1);
    this.messages.set(o.message, (this.messages.get(o.message) ?? 0) + 1);
    if (o.kind === '?' || /\bat .+:\d+:\d+/.test(o.body)) this.malformed += 1;
    if (o.status === 503 && o.retryAfter === undefined) this.missingRetryAfter += 1;
  }

  /** Count of errors with this status (any type). */
  status(status: number): number {
    let n = 0;
    for (const [key, count] of this.errors) if (key.startsWith(`${status} `)) n += count;
    return n;
  }

  get errorCount(): number {
    return [...this.errors.values()].reduce((a, b) => a + b, 0);
  }

  /** Latency percentile of the 2xx answers, ms. */
  okPercentile(p: number): number {
    if (this.okLatencies.length === 0) return 0;
    const sorted = [...this.okLatencies].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
  }

  toJSON(): Record<string, unknown> {
    return {
      sent: this.sent,
      ok: this.ok,
      errors: Object.fromEntries(this.errors),
      unanswered: this.unanswered,
      lost: Object.fromEntries(this.lost),
      malformed: this.malformed,
      p50Ms: Math.round(this.okPercentile(50)),
      p99Ms: Math.round(this.okPercentile(99)),
    };
  }

  toString(): string {
    return JSON.stringify(this.toJSON());
  }
}

export interface SendOptions {
  method?: string;
  /** A Readable is sent chunked (no Content-Length). */
  body?: string | Buffer | Readable;
  headers?: Record<string, string>;
  /** The client's patience, ms: past it the request counts as unanswered. */
  deadlineMs?: number;
  dispatcher?: Agent;
}

/** Send one request and classify its outcome; never throws. */
export async function send(url: string, options: SendOptions = {}): Promise<Outcome> {
  const started = performance.now();
  const deadlineMs = options.deadlineMs ?? 30_000;
  try {
    const res = await request(url, {
      method: (options.method ?? (options.body === undefined ? 'GET' : 'POST')) as 'POST',
      headers: { 'content-type': 'application/json', ...options.headers },
      ...(options.body === undefined ? {} : { body: options.body }),
      ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
      headersTimeout: deadlineMs,
      bodyTimeout: deadlineMs,
      signal: AbortSignal.timeout(deadlineMs),
    });
    const body = await res.body.text();
    const latencyMs = performance.now() - started;
    const retryAfter = res.headers['retry-after'];
    let kind = '?';
    let message = '';
    if (res.statusCode >= 300) {
      try {
        const parsed = JSON.parse(body) as { code?: unknown; type?: unknown; message?: unknown };
        if (parsed.code === res.statusCode && typeof parsed.type === 'string' && typeof parsed.message === 'string') {
          kind = parsed.type;
          message = parsed.message;
        }
      } catch {
        // not JSON: counted as malformed
      }
    }
    return {
      status: res.statusCode,
      kind,
      message,
      latencyMs,
      retryAfter: Array.isArray(retryAfter) ? retryAfter[0] : retryAfter,
      body,
    };
  } catch (err) {
    const e = err as { code?: string; name?: string; message?: string };
    return {
      status: 0,
      kind: e.code ?? e.name ?? 'error',
      message: e.message ?? String(err),
      latencyMs: performance.now() - started,
      retryAfter: undefined,
      body: '',
    };
  }
}

export interface LoadOptions {
  /** URL of each request (the i-th request gets `url(i)`). */
  url: (i: number) => string;
  body: (i: number) => string;
  /** Requests in flight at once (closed loop). */
  concurrency: number;
  /** Stop after this many requests … */
  count?: number;
  /** … or when `stop()` is called / this signal aborts. */
  signal?: AbortSignal;
  deadlineMs?: number;
  headers?: Record<string, string>;
  /** Connections per origin (default `concurrency`). */
  connections?: number;
  /** Called with each outcome (besides the tally). */
  onOutcome?: (o: Outcome, i: number) => void;
  /**
   * A client refused with 503 + `Retry-After: N` waits N seconds and a random fraction of one more before its next
   * request, as polite clients do (the header has whole seconds; the jitter keeps clients refused together from
   * all coming back in the same millisecond, as retry policies such as gRPC's and AWS's add).
   */
  honorRetryAfter?: boolean;
}

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** A closed loop of `concurrency` clients; resolves with the tally once every request sent has finished. */
export async function drive(options: LoadOptions): Promise<Tally> {
  const tally = new Tally();
  const dispatcher = new Agent({ connections: options.connections ?? options.concurrency, keepAliveTimeout: 30_000 });
  // Every client pausing for a Retry-After listens on the one signal at once: not a leak past Node's default of 10.
  if (options.signal) setMaxListeners(options.concurrency + 10, options.signal);
  let next = 0;
  const more = () => !options.signal?.aborted && (options.count === undefined || next < options.count);
  const client = async () => {
    while (more()) {
      const i = next++;
      const o = await send(options.url(i), {
        body: options.body(i),
        dispatcher,
        ...(options.deadlineMs === undefined ? {} : { deadlineMs: options.deadlineMs }),
        ...(options.headers ? { headers: options.headers } : {}),
      });
      tally.add(o);
      options.onOutcome?.(o, i);
      const retryAfterS = Number(o.retryAfter);
      if (options.honorRetryAfter && o.status === 503 && retryAfterS > 0) {
        await pause((retryAfterS + Math.random()) * 1000, options.signal);
      }
    }
  };
  try {
    await Promise.all(Array.from({ length: options.concurrency }, client));
  } finally {
    await dispatcher.close();
  }
  return tally;
}

/** Background traffic that runs until `stop()`, which resolves with its tally. */
export function background(options: Omit<LoadOptions, 'signal' | 'count'>): {
  stop(): Promise<Tally>;
  tally: Promise<Tally>;
} {
  const controller = new AbortController();
  const tally = drive({ ...options, signal: controller.signal });
  return {
    tally,
    stop() {
      controller.abort();
      return tally;
    },
  };
}
