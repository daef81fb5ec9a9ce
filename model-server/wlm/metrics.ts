/**
 * @module model-server/wlm/metrics — the model server's Prometheus metrics (prom-client, one registry per
 * server instance so tests can run several servers in one process).
 *
 * TorchServe's three counters keep their names and labels (model_name, model_version, hostname); real histograms
 * sit beside them. The mean batch size is `mt_batch_size_sum / mt_batch_size_count` — no JSON needed. That is the
 * batch the frontend sends; the engine steps every batch it holds together, and its real batch, the rows of one
 * decoder run, is `rate(mt_engine_step_rows_total) / rate(mt_engine_steps_total)` per engine.
 * Queue depth, worker states and GPU figures are read at scrape time (collect callbacks), never pushed.
 */
import { hostname as osHostname } from 'node:os';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { GpuMonitor } from './gpu-monitor.js';
import type { Job } from './job.js';
import { RecentActivity } from './recent-activity.js';

/** What a scrape reads from the live server. */
export interface MetricsSnapshot {
  queues: { model: string; version: string; depth: number }[];
  /** Worker count by state (`starting`, `ready`, `stopping`, `backoff`). */
  workers: Record<string, number>;
  /** Rows each engine was generating at its workers' last heartbeat. */
  liveRows: { engine: string; rows: number }[];
}

export interface ServerMetricsOptions {
  snapshot: () => MetricsSnapshot;
  gpu: GpuMonitor;
  /** Bytes the translation cache holds now; absent: no cache. */
  cacheBytes?: () => number;
  hostname?: string;
}

const SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
const BATCH_SIZES = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];
const MODEL = ['model_name', 'model_version'] as const;
const TS_LABELS = ['model_name', 'model_version', 'hostname'] as const;

/** A registry with prom-client's process metrics (CPU, memory, event loop) registered first. */
function registryWithDefaults(): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  return registry;
}

export class ServerMetrics {
  readonly registry = registryWithDefaults();
  readonly contentType = this.registry.contentType;
  #hostname: string;
  #tsRequests = this.#counter({
    name: 'ts_inference_requests_total',
    help: 'Total number of inference requests received (TorchServe name).',
    labelNames: TS_LABELS,
  });
  #tsLatency = this.#counter({
    name: 'ts_inference_latency_microseconds',
    help: 'Cumulative inference duration in microseconds, arrival to answer (TorchServe name).',
    labelNames: TS_LABELS,
  });
  #tsQueueLatency = this.#counter({
    name: 'ts_queue_latency_microseconds',
    help: 'Cumulative queue duration in microseconds (TorchServe name).',
    labelNames: TS_LABELS,
  });
  #requests = this.#counter({
    name: 'mt_requests_total',
    help: 'Inference HTTP requests by model and response status code.',
    labelNames: ['model_name', 'model_version', 'code'],
  });
  #requestSeconds = this.#histogram({
    name: 'mt_request_duration_seconds',
    help: 'End-to-end inference request latency in the model server, seconds.',
    buckets: SECONDS,
  });
  #queueSeconds = this.#histogram({
    name: 'mt_queue_wait_seconds',
    help: 'Time a job waited in its model queue before it left in a batch, seconds.',
    buckets: SECONDS,
  });
  #inferenceSeconds = this.#histogram({
    name: 'mt_inference_seconds',
    help: 'Handler time of one batch in the worker (preprocess to last postprocess), seconds.',
    buckets: SECONDS,
  });
  #batchSize = this.#histogram({
    name: 'mt_batch_size',
    help: 'Jobs per batch sent to a worker; mean = _sum / _count.',
    buckets: BATCH_SIZES,
  });
  #jobs = this.#counter({
    name: 'mt_jobs_total',
    help: 'Jobs (one per input text) by outcome: ok or the error code.',
    labelNames: ['model_name', 'model_version', 'outcome'],
  });
  #cancelled = this.#counter({
    name: 'mt_cancelled_jobs_total',
    help: 'Jobs given up before their answer, by reason (deadline, client-gone) and stage: queued (left the queue) or running (its rows left the engine batch).',
    labelNames: ['model_name', 'model_version', 'reason', 'stage'],
  });
  #finishedAfterAbandon = this.#counter({
    name: 'mt_jobs_finished_after_abandon_total',
    help: 'Jobs given up while running whose rows finished on the worker before the cancel took effect at a step boundary (the answer was dropped; neither ok nor a cancelled engine row).',
    labelNames: MODEL,
  });
  #workerDeaths = this.#counter({
    name: 'mt_worker_deaths_total',
    help: 'Worker processes that died or failed to load without being asked to stop.',
    labelNames: ['engine'],
  });
  #engineSteps = this.#counter({
    name: 'mt_engine_steps_total',
    help: 'Decoder runs of each engine (one generated token for every row it carries).',
    labelNames: ['engine'],
  });
  #engineStepRows = this.#counter({
    name: 'mt_engine_step_rows_total',
    help: "Rows carried by each engine's decoder runs (beams count once each); ÷ mt_engine_steps_total = mean real batch.",
    labelNames: ['engine'],
  });
  #engineRowsEnded = this.#counter({
    name: 'mt_engine_rows_ended_early_total',
    help: 'Rows that left an engine before </s>: cancelled (deadline or client gone), capped (stopped at the token cap, the translation may be cut short: logged), failed (a model run failed on them alone).',
    labelNames: ['engine', 'how'],
  });
  #cacheHits = this.#counter({
    name: 'mt_cache_hits_total',
    help: 'Sentences answered from the translation cache, without a job.',
    labelNames: MODEL,
  });
  #cacheMisses = this.#counter({
    name: 'mt_cache_misses_total',
    help: 'Sentences looked up in the translation cache and not found (each became a job).',
    labelNames: MODEL,
  });
  /** The same events over the last minutes, for the status page (recent-activity.ts). */
  readonly recent = new RecentActivity();

  constructor(options: ServerMetricsOptions) {
    this.#hostname = options.hostname ?? osHostname();
    const registers = [this.registry];
    /** A gauge read at scrape time: `read` gives the value of each label set. */
    const gauge = <L extends string>(
      c: { name: string; help: string; labelNames: readonly L[] },
      read: () => [Partial<Record<L, string>>, number][] | Promise<[Partial<Record<L, string>>, number][]>,
    ) =>
      new Gauge({
        ...c,
        registers,
        async collect() {
          this.reset();
          for (const [labels, value] of await read()) this.set(labels, value);
        },
      });
    const cacheBytes = options.cacheBytes ?? (() => 0);
    new Gauge({
      name: 'mt_cache_bytes',
      help: 'Bytes the translation cache holds (estimated heap size of its entries; at most CACHE_MAX_BYTES).',
      registers,
      collect() {
        this.set(cacheBytes());
      },
    });
    gauge({ name: 'mt_queue_depth', help: 'Jobs waiting in each model queue.', labelNames: MODEL }, () =>
      options.snapshot().queues.map((q) => [{ model_name: q.model, model_version: q.version }, q.depth]),
    );
    gauge(
      {
        name: 'mt_workers',
        help: 'Worker processes by state (a worker waiting out its restart backoff counts as backoff).',
        labelNames: ['state'],
      },
      () => Object.entries(options.snapshot().workers).map(([state, count]) => [{ state }, count]),
    );
    gauge(
      {
        name: 'mt_engine_live_rows',
        help: "Rows each engine is generating, from its workers' last progress heartbeat (cancelled and finished rows have left).",
        labelNames: ['engine'],
      },
      () => options.snapshot().liveRows.map(({ engine, rows }) => [{ engine }, rows]),
    );
    const gpuGauges = [
      { name: 'mt_gpu_utilization_percent', help: 'GPU utilisation per device', field: 'utilizationPercent' },
      { name: 'mt_gpu_memory_used_bytes', help: 'GPU memory in use per device', field: 'memoryUsedBytes' },
      { name: 'mt_gpu_memory_total_bytes', help: 'GPU memory per device', field: 'memoryTotalBytes' },
    ] as const;
    for (const { name, help, field } of gpuGauges) {
      gauge({ name, help: `${help} (nvidia-smi); absent without a GPU.`, labelNames: ['device_id'] }, async () =>
        (await options.gpu.sample()).flatMap((s) => {
          const value = s[field];
          return value === null ? [] : [[{ device_id: String(s.index) }, value] as [{ device_id: string }, number]];
        }),
      );
    }
  }

  /** One inference HTTP request answered (any status), with its latency in ms. */
  requestDone(model: string, version: string, status: number, latencyMs: number): void {
    const ts = { model_name: model, model_version: version, hostname: this.#hostname };
    this.#tsRequests.inc(ts);
    this.#tsLatency.inc(ts, Math.round(latencyMs * 1000));
    this.#requests.inc({ model_name: model, model_version: version, code: String(status) });
    this.#requestSeconds.observe({ model_name: model, model_version: version }, latencyMs / 1000);
    this.recent.requestDone(model, status, latencyMs);
  }

  /** Sentences of one request found in the translation cache (`hits`) and not (`misses`). */
  cacheLookups(model: string, version: string, hits: number, misses: number): void {
    const labels = { model_name: model, model_version: version };
    if (hits > 0) this.#cacheHits.inc(labels, hits);
    if (misses > 0) this.#cacheMisses.inc(labels, misses);
    this.recent.cacheLookups(model, hits, misses);
  }

  /** One job settled; its queue time counts only if it left the queue. */
  jobDone(job: Job): void {
    const labels = { model_name: job.model, model_version: job.version };
    this.#jobs.inc({ ...labels, outcome: job.failure?.code ?? 'ok' });
    if (job.abandoned !== undefined) {
      const stage = job.abandoned.running ? 'running' : 'queued';
      this.#cancelled.inc({ ...labels, reason: job.abandoned.reason, stage });
    }
    if (job.dispatchedAt === undefined) return;
    const queueMs = job.dispatchedAt - job.arrivedAt;
    this.#queueSeconds.observe(labels, queueMs / 1000);
    this.#tsQueueLatency.inc({ ...labels, hostname: this.#hostname }, Math.round(queueMs * 1000));
  }

  /** A batch finished; `finishedAfterAbandon` of its jobs were answered by the worker only after being given up. */
  batchDone(model: string, version: string, size: number, handlerMs: number, finishedAfterAbandon: number): void {
    const labels = { model_name: model, model_version: version };
    this.#batchSize.observe(labels, size);
    this.#inferenceSeconds.observe(labels, handlerMs / 1000);
    if (finishedAfterAbandon > 0) this.#finishedAfterAbandon.inc(labels, finishedAfterAbandon);
  }

  /** Decoder runs (and their rows) an engine's worker reported since its last report. */
  stepsDone(engine: string, runs: number, rows: number): void {
    if (runs <= 0) return;
    this.#engineSteps.inc({ engine }, runs);
    this.#engineStepRows.inc({ engine }, rows);
    this.recent.stepsDone(engine, runs, rows);
  }

  /** Rows an engine's worker ended early since its last report: cancelled, stopped at their cap, failed alone. */
  rowsDropped(engine: string, rows: { cancelled: number; capped: number; failed: number }): void {
    for (const how of ['cancelled', 'capped', 'failed'] as const) {
      if (rows[how] > 0) this.#engineRowsEnded.inc({ engine, how }, rows[how]);
    }
  }

  workerDied(engine: string): void {
    this.#workerDeaths.inc({ engine });
  }

  render(): Promise<string> {
    return this.registry.metrics();
  }

  #counter<L extends string>(c: { name: string; help: string; labelNames: readonly L[] }): Counter<L> {
    return new Counter({ ...c, registers: [this.registry] });
  }

  #histogram(c: { name: string; help: string; buckets: number[] }): Histogram<(typeof MODEL)[number]> {
    return new Histogram({ ...c, labelNames: MODEL, registers: [this.registry] });
  }
}
