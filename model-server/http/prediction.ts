/**
 * @module model-server/http/prediction — the one job path both inference protocols on the inference port call
 * (TorchServe's `/predictions` in inference-api.ts, the Open Inference Protocol's `/v2/.../infer` in kserve-api.ts):
 * plan the jobs, admit them, wait for their answers, abandon them if the client goes away, count the request.
 */
import { targetOf } from '../../common/config/setup-config.js';
import { ServeError, toServeError } from '../../common/errors.js';
import type { JsonValue } from '../../common/strict-utf8.js';
import { createRequestParser } from '../../common/translation-contract.js';
import type { DeviceInfo } from '../protocol.js';
import type { GlossaryStore } from '../translation/glossary-store.js';
import type { TranslationCache } from '../translation/translation-cache.js';
import type { TextPool } from '../translation/text-pool.js';
import type { TranslationLimits } from '../translation/translation-plan.js';
import type { Job, JobResult } from '../wlm/job.js';
import type { ServerMetrics } from '../wlm/metrics.js';
import type { ModelManager } from '../wlm/model-manager.js';
import type { ModelEntry } from '../wlm/registry.js';
import { deviceLabel } from '../wlm/devices.js';

/** What the job path needs: the models, the metrics, the limits and the translation features. */
export interface PredictionDeps {
  manager: ModelManager;
  metrics: ServerMetrics;
  /** Characters and sentences one translation request may carry. */
  translationLimits: TranslationLimits;
  /** Where a translation request's text is planned and its answer rendered, off the event loop. */
  textPool: TextPool;
  /** Answers for sentences translated before (translation-cache.ts); absent: none. */
  cache?: TranslationCache;
  /** Glossaries (`/glossaries`, `glossary_id` on a translation); absent: none are kept. */
  glossaries?: GlossaryStore;
  /** Answer `x-cache` (CACHE_DISCLOSE): whether a sentence was cached is no stranger's business by default. */
  cacheHeader?: boolean;
}

/** The translation request as this edge takes it: checked here once, then passed on typed. */
const parseTranslationRequest = createRequestParser();

/** One prediction's answer: the body's value (a string is answered as text) and the headers that say who served. */
export interface Prediction {
  value: unknown;
  headers: Record<string, string>;
}

/** One prediction request, whichever protocol carried it. */
export interface PredictionRequest {
  model: string;
  /** The version asked for; undefined: the model's default. */
  version: string | undefined;
  /** Reads and decodes the body; called once the model is known, so an unknown model is a 404 before a bad body. */
  body: () => Promise<JsonValue>;
  /** Aborts when the client goes away, which abandons the request's jobs. */
  signal: AbortSignal;
  /** The request's `Cache-Control` (translation-cache.ts). */
  cacheControl: string | undefined;
}

/**
 * The job path every protocol on this port shares (TorchServe's `/predictions`, the Open Inference Protocol's
 * `/v2/.../infer`): plan the jobs, admit them, wait for their answers, abandon them if the client goes away, and
 * count the request in the metrics.
 * @throws ServeError whose status is the answer's (MODEL_NOT_FOUND, BAD_REQUEST, QUEUE_FULL, REQUEST_TIMEOUT, ...)
 */
export async function runPrediction(deps: PredictionDeps, request: PredictionRequest): Promise<Prediction> {
  const started = performance.now();
  // Resolved before anything is recorded: unknown names must not become metric label values.
  const entry = reachingNoWorker(() => deps.manager.registry.get(request.model, request.version));
  let status = 500;
  let jobs: readonly Job[] = [];
  try {
    const decoded = await request.body();
    // A translation model reads documents: one job per sentence, the answer rejoined (translation-plan.ts), both in
    // the text pool's threads: a hostile text costs its own request (past its budget a 504), never this event loop.
    const plan =
      entry.handler === 'translation'
        ? await deps.textPool.plan(parseTranslationRequest(decoded), {
            // A pair's entry (`en-de`) translates into its target.
            tgtLang: targetOf(entry.name),
            readable: deps.manager.readableLanguages(entry),
            limits: deps.translationLimits,
            ...(deps.glossaries ? { glossaries: deps.glossaries } : {}),
            timeoutMs: entry.responseTimeoutS * 1000,
          })
        : undefined;
    // Every row carries an id unique within the request: cache hits, answers and errors are matched by it.
    const { sentences, isArray } = plan ? { sentences: plan.sentences, isArray: false } : splitBody(decoded);
    // A sentence answered before never becomes a job (translation-cache.ts).
    const cached = plan && deps.cache?.lookupFor(entry, plan.sentences, request.cacheControl);
    if (cached) deps.metrics.cacheLookups(entry.name, entry.version, cached.hits, cached.misses);
    const toRun = cached ? cached.missing : sentences;
    const items = toRun.map((s) => s.item);
    if (items.length > 0) jobs = deps.manager.submit(entry.name, entry.version, items).jobs;
    // A client that goes away takes its jobs with it: queued ones leave their queue, running ones their batch.
    const signal = request.signal;
    const abandon = () => {
      for (const job of jobs) job.abandon('client-gone');
    };
    if (signal.aborted) abandon();
    else signal.addEventListener('abort', abandon, { once: true });
    const outcomes = await Promise.allSettled(jobs.map((job) => job.promise));
    signal.removeEventListener('abort', abandon);
    // Jobs are in plan order (one per item, as submitted): the error is the first failing sentence's.
    const failed = outcomes.find((o): o is PromiseRejectedResult => o.status === 'rejected');
    if (failed !== undefined) throw toServeError(failed.reason);
    const results = outcomes.map((o) => (o as PromiseFulfilledResult<JobResult>).value);
    const answers = new Map(cached?.found);
    toRun.forEach(({ id }, i) => answers.set(id, results[i]!.value));
    cached?.store(answers);
    const headers: Record<string, string> = { 'x-model-name': entry.name, 'x-model-version': entry.version };
    // An answer made of cache hits only was served by no worker: it names none, and says where the model runs.
    const served = results.length > 0 ? results.map((r) => r.device) : servingDevices(entry);
    const workerIds = unique(results.map((r) => r.workerId));
    if (workerIds) headers['x-worker-id'] = workerIds;
    const devices = unique(served.map(deviceLabel));
    if (devices) headers['x-device'] = devices;
    const fallback = unique(served.map((d) => d.fallbackReason ?? entry.placement.fallbackReason ?? ''));
    if (fallback) headers['x-device-fallback'] = headerSafe(fallback);
    if (deps.cacheHeader && cached && cached.hits + cached.misses > 0) {
      headers['x-cache'] = cached.misses === 0 ? 'hit' : cached.hits === 0 ? 'miss' : 'partial';
    }
    status = 200;
    if (plan) return { value: await plan.answer(answers), headers };
    const values = sentences.map(({ id }) => answers.get(id));
    return { value: isArray ? { translated: values.map(translatedOf) } : values[0], headers };
  } catch (err) {
    // The answer states whether the request reached a worker: only one that did not may go to another replica.
    const error = err instanceof ServeError ? err.withReach(jobs.some((job) => job.reachedWorker)) : err;
    status = toServeError(error).status;
    throw error;
  } finally {
    deps.metrics.requestDone(entry.name, entry.version, status, performance.now() - started);
  }
}

/** Runs a step before any job exists; its ServeError states that the request reached no worker. */
function reachingNoWorker<T>(step: () => T): T {
  try {
    return step();
  } catch (err) {
    throw err instanceof ServeError ? err.withReach(false) : err;
  }
}

/** A body for another handler (echo): an array of texts is one job each, answered as an array. */
function splitBody(body: JsonValue): { sentences: { id: string; item: JsonValue }[]; isArray: boolean } {
  if (body === null || typeof body !== 'object' || Array.isArray(body) || !Array.isArray(body.src_text))
    return { sentences: [{ id: '0', item: body }], isArray: false };
  const texts = body.src_text;
  if (texts.length === 0) throw new ServeError('BAD_REQUEST', 'src_text must not be an empty array.');
  const bad = texts.findIndex((t) => typeof t !== 'string');
  if (bad >= 0) throw new ServeError('BAD_REQUEST', `src_text[${bad}] must be a string.`);
  return { sentences: texts.map((text, i) => ({ id: `${i}`, item: { ...body, src_text: text } })), isArray: true };
}

/** One element of a `{"translated": [...]}` answer: the handler's `translated` field, or its whole value. */
function translatedOf(value: unknown): unknown {
  if (value !== null && typeof value === 'object' && 'translated' in value) {
    return (value as { translated: unknown }).translated;
  }
  return value;
}

/** Where a model's workers run, from their `ready` messages (none before one is ready). */
function servingDevices(entry: ModelEntry): DeviceInfo[] {
  return entry.pool.workers().flatMap((w) => (w.device === undefined ? [] : [w.device]));
}

function unique(values: string[]): string {
  return [...new Set(values.filter(Boolean))].join(',');
}

/** Header values must be visible ASCII; a reason from a worker might not be. */
function headerSafe(text: string): string {
  return text.replace(/[^\x20-\x7e]/g, '?').slice(0, 512);
}
