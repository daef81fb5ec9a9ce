/**
 * @module model-server/wlm/recent-activity — what the model server did over the last minutes, kept in the
 * process for the status page and gpu-watch (status.ts): Prometheus keeps history for dashboards, but the page
 * must work where no Prometheus runs.
 *
 * Two sources, each the cheapest that answers its question:
 * - cumulative counters (requests, errors, cache hits and misses per model; decoder runs and rows per engine),
 *   copied into a sample every `sampleMs` together with each queue's depth. A rate over the window is the
 *   difference between now and the sample one window ago, divided by the time between them; the charts are the
 *   differences between consecutive samples. `historyMs` of samples are kept (150 × 2 s by default).
 * - a ring of the latencies of the last `maxLatencies` answered requests per model, for p50/p99 over the window.
 *   Percentiles cannot be taken from differences of counters without buckets, and the histogram's buckets
 *   (1 ms … 120 s, ×2.5 apart) would give p99 to within a factor 2.5; the exact figures cost 16 bytes per request
 *   kept. Above maxLatencies ÷ window requests/s the percentiles cover the most recent maxLatencies requests only.
 *
 * Models are keyed by name: the page shows one row per language, versions together.
 */

export interface RecentActivityOptions {
  /** Window of the rates and percentiles, ms (60 000). */
  windowMs?: number;
  /** Time between samples, ms (2 000). */
  sampleMs?: number;
  /** Samples kept, as a duration, ms (300 000). */
  historyMs?: number;
  /** Latencies kept per model (4 096). */
  maxLatencies?: number;
  /** Clock, ms; tests pass their own. */
  now?: () => number;
}

interface ModelCounters {
  requests: number;
  errors: number;
  hits: number;
  misses: number;
}

interface EngineCounters {
  runs: number;
  rows: number;
}

interface Sample {
  at: number;
  models: Map<string, ModelCounters & { depth: number }>;
  engines: Map<string, EngineCounters>;
}

/** Figures of one model over the window; null where nothing happened to measure. */
export interface ModelWindow {
  requestsPerS: number;
  errorsPerS: number;
  p50Ms: number | null;
  p99Ms: number | null;
  /** Hits ÷ lookups over the window; null without lookups. */
  cacheHitRatio: number | null;
  /** Since the server started. */
  cacheHits: number;
  cacheMisses: number;
}

/** Per-sample series for the charts, oldest first; `at` in ms since the epoch. */
export interface ActivityHistory {
  at: number[];
  models: Record<string, { requestsPerS: number[]; queueDepth: number[] }>;
}

/** Latencies of one model: a ring of (time, ms) pairs. */
class LatencyRing {
  readonly #at: Float64Array;
  readonly #ms: Float64Array;
  #next = 0;
  #count = 0;

  constructor(size: number) {
    this.#at = new Float64Array(size);
    this.#ms = new Float64Array(size);
  }

  push(at: number, ms: number): void {
    this.#at[this.#next] = at;
    this.#ms[this.#next] = ms;
    this.#next = (this.#next + 1) % this.#at.length;
    this.#count = Math.min(this.#count + 1, this.#at.length);
  }

  /** Latencies recorded at or after `since`, sorted. */
  since(since: number): Float64Array {
    const out: number[] = [];
    for (let i = 0; i < this.#count; i++) if (this.#at[i]! >= since) out.push(this.#ms[i]!);
    return Float64Array.from(out).sort();
  }
}

export class RecentActivity {
  readonly windowMs: number;
  readonly sampleMs: number;
  readonly #maxSamples: number;
  readonly #maxLatencies: number;
  readonly #now: () => number;
  readonly #models = new Map<string, ModelCounters>();
  readonly #engines = new Map<string, EngineCounters>();
  readonly #latencies = new Map<string, LatencyRing>();
  /** Oldest first; the first is the state at construction (all zero), so rates work before the first tick. */
  readonly #samples: Sample[];
  #timer: NodeJS.Timeout | undefined;

  constructor(options: RecentActivityOptions = {}) {
    this.windowMs = options.windowMs ?? 60_000;
    this.sampleMs = options.sampleMs ?? 2_000;
    this.#maxSamples = Math.max(2, Math.ceil((options.historyMs ?? 300_000) / this.sampleMs) + 1);
    this.#maxLatencies = options.maxLatencies ?? 4096;
    this.#now = options.now ?? Date.now;
    this.#samples = [{ at: this.#now(), models: new Map(), engines: new Map() }];
  }

  requestDone(model: string, status: number, latencyMs: number): void {
    const counters = this.#model(model);
    counters.requests += 1;
    if (status >= 400) {
      counters.errors += 1;
      return;
    }
    let ring = this.#latencies.get(model);
    if (ring === undefined) this.#latencies.set(model, (ring = new LatencyRing(this.#maxLatencies)));
    ring.push(this.#now(), latencyMs);
  }

  cacheLookups(model: string, hits: number, misses: number): void {
    const counters = this.#model(model);
    counters.hits += hits;
    counters.misses += misses;
  }

  stepsDone(engine: string, runs: number, rows: number): void {
    let counters = this.#engines.get(engine);
    if (counters === undefined) this.#engines.set(engine, (counters = { runs: 0, rows: 0 }));
    counters.runs += runs;
    counters.rows += rows;
  }

  /**
   * Take a sample every `sampleMs` with the queue depths `depths()` reads, until `stop()` or until `depths`
   * answers undefined (the server is closing). The timer never keeps the process alive.
   */
  start(depths: () => Map<string, number> | undefined): void {
    if (this.#timer !== undefined) return;
    this.#timer = setInterval(() => {
      const now = depths();
      if (now === undefined) this.stop();
      else this.sample(now);
    }, this.sampleMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Record the counters and queue depths now (the timer calls this; tests may too). */
  sample(depths: Map<string, number>): void {
    const models = new Map<string, ModelCounters & { depth: number }>();
    for (const name of new Set([...this.#models.keys(), ...depths.keys()])) {
      models.set(name, { ...(this.#models.get(name) ?? zeroModel()), depth: depths.get(name) ?? 0 });
    }
    const engines = new Map([...this.#engines].map(([key, c]) => [key, { ...c }]));
    this.#samples.push({ at: this.#now(), models, engines });
    if (this.#samples.length > this.#maxSamples) this.#samples.shift();
  }

  /** A model's figures over the window ending now. */
  model(name: string): ModelWindow {
    const now = this.#now();
    const base = this.#baseline(now);
    const seconds = Math.max((now - base.at) / 1000, 1e-3);
    const current = this.#models.get(name) ?? zeroModel();
    const before = base.models.get(name) ?? zeroModel();
    const lookups = current.hits + current.misses - (before.hits + before.misses);
    const latencies = this.#latencies.get(name)?.since(now - this.windowMs) ?? new Float64Array(0);
    return {
      requestsPerS: (current.requests - before.requests) / seconds,
      errorsPerS: (current.errors - before.errors) / seconds,
      p50Ms: percentile(latencies, 0.5),
      p99Ms: percentile(latencies, 0.99),
      cacheHitRatio: lookups > 0 ? (current.hits - before.hits) / lookups : null,
      cacheHits: current.hits,
      cacheMisses: current.misses,
    };
  }

  /** An engine's decoder rows per run over the window (its real batch); null when it ran no step. */
  rowsPerStep(engine: string): number | null {
    const base = this.#baseline(this.#now());
    const current = this.#engines.get(engine) ?? { runs: 0, rows: 0 };
    const before = base.engines.get(engine) ?? { runs: 0, rows: 0 };
    const runs = current.runs - before.runs;
    return runs > 0 ? (current.rows - before.rows) / runs : null;
  }

  /** The samples as per-interval series: requests/s between consecutive samples, and the depth at each. */
  history(): ActivityHistory {
    const samples = this.#samples;
    const names = new Set(samples.flatMap((s) => [...s.models.keys()]));
    const models: ActivityHistory['models'] = {};
    for (const name of names) models[name] = { requestsPerS: [], queueDepth: [] };
    for (let i = 1; i < samples.length; i++) {
      const [prev, cur] = [samples[i - 1]!, samples[i]!];
      const seconds = Math.max((cur.at - prev.at) / 1000, 1e-3);
      for (const name of names) {
        const done = (cur.models.get(name)?.requests ?? 0) - (prev.models.get(name)?.requests ?? 0);
        models[name]!.requestsPerS.push(done / seconds);
        models[name]!.queueDepth.push(cur.models.get(name)?.depth ?? 0);
      }
    }
    return { at: samples.slice(1).map((s) => s.at), models };
  }

  /** The newest sample at least one window old, else the oldest there is. */
  #baseline(now: number): Sample {
    let base = this.#samples[0]!;
    for (const s of this.#samples) {
      if (now - s.at >= this.windowMs) base = s;
      else break;
    }
    return base;
  }

  #model(name: string): ModelCounters {
    let counters = this.#models.get(name);
    if (counters === undefined) this.#models.set(name, (counters = zeroModel()));
    return counters;
  }
}

function zeroModel(): ModelCounters {
  return { requests: 0, errors: 0, hits: 0, misses: 0 };
}

/** Nearest-rank percentile of sorted values; null when there are none. */
function percentile(sorted: Float64Array, q: number): number | null {
  if (sorted.length === 0) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}
