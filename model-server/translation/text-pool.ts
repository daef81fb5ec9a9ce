/**
 * @module model-server/translation/text-pool — a translation request's text work in worker threads (piscina), with
 * a deadline: markup and subtitle parsing, language detection, segmentation and glossary matching (the plan, and
 * the answer rebuilt from the jobs' values; text-task.ts runs translation-plan.ts there). The model server's event
 * loop only hands the request over and takes the result, so `/ping`, management and every other request are
 * answered while a hostile or huge text is worked on.
 *
 * A task that has not finished within its budget — TEXT_TIMEOUT_MS, or the model's response timeout when that is
 * shorter, counted from the hand-over, so time queued behind other texts counts too — fails its request alone with
 * 504 REQUEST_TIMEOUT, and the thread running it is terminated (piscina aborts a running task so): the runaway work
 * stops, and a fresh thread takes its place.
 *
 * Stored glossaries are encoded once into shared memory and decoded once per thread (text-task.ts), so a request
 * naming a large one copies nothing on the event loop.
 */
import { availableParallelism } from 'node:os';
import { Piscina } from 'piscina';
import { resolveThreadEntry } from '../../common/entry.js';
import { ServeError } from '../../common/errors.js';
import type { Logger } from '../../common/logger.js';
import type { TranslationRequest } from '../../common/translation-contract.js';
import type { GlossaryEntries } from '../text/glossary.js';
import type { Glossary, GlossaryStore } from './glossary-store.js';
import runTextTask from './text-task.js';
import type { AnswerTask, OutlineTask, SharedGlossary, TaskOutcome, TextTask } from './text-task.js';
import type { SentenceAnswers, SentencePlan, TranslationLimits } from './translation-plan.js';

export interface TextPoolOptions {
  /** Worker threads (TEXT_THREADS); 0: `defaultTextThreads()`. */
  threads: number;
  /** A request's budget for each of its two text tasks, ms (TEXT_TIMEOUT_MS). */
  timeoutMs: number;
  /** Where a thread's failure outside any task (its module not loading) is told. */
  log?: Logger;
}

/** What planning a request needs besides the request. */
export interface TextPlanContext {
  /** The model's name: the target language. */
  tgtLang: string;
  /** Languages the engine can read; undefined while no worker has said. */
  readable: readonly string[] | undefined;
  limits: TranslationLimits;
  /** Where `glossary_id` is looked up; absent: a request naming one is a 400. */
  glossaries?: GlossaryStore;
  /** The model's own deadline, ms: a text task gets the smaller of this and TEXT_TIMEOUT_MS. */
  timeoutMs: number;
}

/** A request planned in the pool: its sentences, and its answer from theirs (rendered in the pool too). */
export interface PooledPlan {
  sentences: SentencePlan['sentences'];
  answer(answers: SentenceAnswers): Promise<Record<string, unknown>>;
}

/**
 * Threads when TEXT_THREADS is 0: two, so one runaway text never stops the others, and up to four on larger hosts
 * (text work is a small part of a translation's cost next to the engine's).
 */
export function defaultTextThreads(): number {
  return Math.min(4, Math.max(2, availableParallelism() - 1));
}

export class TextPool {
  readonly threads: number;
  readonly timeoutMs: number;
  readonly #log: Logger | undefined;
  #pool: Piscina | undefined;
  #closed = false;

  constructor(options: TextPoolOptions) {
    this.threads = options.threads > 0 ? options.threads : defaultTextThreads();
    this.timeoutMs = options.timeoutMs;
    this.#log = options.log;
  }

  /**
   * Start the threads now rather than at the first translation, whose budget would pay for it (each thread loads
   * the text modules: ~0.5 s, more from source under tsx), and resolve once they answer. Idempotent.
   */
  async warm(): Promise<void> {
    const pool = this.#piscina();
    await Promise.all(Array.from({ length: this.threads }, () => pool.run({ name: 'ready' } satisfies TextTask)));
  }

  /**
   * Plan `request` in a thread: its sentence jobs, and an answer that is rendered in a thread too.
   * @throws ServeError as planSentences (BAD_REQUEST, UNKNOWN_LANGUAGE, PAYLOAD_TOO_LARGE), REQUEST_TIMEOUT past
   *   the budget, SHUTTING_DOWN once closed
   */
  async plan(request: TranslationRequest, context: TextPlanContext): Promise<PooledPlan> {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN');
    const glossary = storedGlossary(request, context);
    const task: OutlineTask = {
      request,
      tgtLang: context.tgtLang,
      readable: context.readable,
      limits: context.limits,
      ...(glossary ? { glossary } : {}),
    };
    const budgetMs = Math.min(this.timeoutMs, context.timeoutMs);
    const inline = plannedInline(request);
    const { sentences, docs } = await this.#run<SentencePlan>({ name: 'outline', task }, budgetMs, inline);
    const answer: Omit<AnswerTask, 'answers'> = { request, docs, tgtLang: context.tgtLang };
    return {
      sentences,
      answer: (answers) =>
        this.#run<Record<string, unknown>>({ name: 'answer', task: { ...answer, answers } }, budgetMs, inline),
    };
  }

  /** Stop the threads; what is running or queued is rejected. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.destroy();
  }

  /** `message`'s task in a thread, or on this one when `inline` (the same task, without the hops). */
  async #run<T>(message: TextTask & { name: 'outline' | 'answer' }, budgetMs: number, inline: boolean): Promise<T> {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN');
    const signal = inline ? undefined : AbortSignal.timeout(budgetMs);
    let outcome: TaskOutcome<T>;
    try {
      outcome = (signal ? await this.#piscina().run(message, { signal }) : runTextTask(message)) as TaskOutcome<T>;
    } catch (err) {
      if (signal?.aborted) {
        throw new ServeError(
          'REQUEST_TIMEOUT',
          `Request timed out: its text was not ${message.name === 'outline' ? 'prepared' : 'put back together'} within ${budgetMs} ms (${budgetMs < this.timeoutMs ? "the model's response timeout" : 'TEXT_TIMEOUT_MS'}): markup, subtitles, language detection, sentence segmentation and glossary terms; send it in smaller parts.`,
        );
      }
      if (this.#closed) throw new ServeError('SHUTTING_DOWN');
      throw err;
    }
    if (!outcome.ok) throw ServeError.fromWire(outcome.error);
    return outcome.value;
  }

  #piscina(): Piscina {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN');
    if (this.#pool === undefined) {
      // text-task.js beside the compiled pool, or text-task.ts through tsx when this runs from source (vitest, tsx).
      const entry = resolveThreadEntry(import.meta.url, './text-task');
      this.#pool = new Piscina({
        filename: entry.filename,
        ...(entry.workerData ? { workerData: entry.workerData } : {}),
        minThreads: this.threads,
        maxThreads: this.threads,
        // Threads stay: starting one costs more than any text it would save waiting for.
        idleTimeout: Infinity,
      });
      // A task's own failure rejects that task; this is a thread failing outside one, which must not take the process.
      this.#pool.on('error', (err: Error) => this.#log?.error({ err: err.message }, 'text pool thread failed'));
    }
    return this.#pool;
  }
}

/**
 * Plain text of at most this many characters, without a glossary, is planned on the calling thread: segmentation and
 * detection are linear (checked by the house's linear-time tests), so it costs microseconds there, less than the two
 * hops to a thread. Measured on an H200 host (418M, 256 closed-loop clients through the stack): every sentence through
 * the threads, 512 tasks a round on 4 threads, held served ÷ engine to 0.37.
 */
export const INLINE_MAX_CHARS = 1_000;

function plannedInline(request: TranslationRequest): boolean {
  if ((request.format ?? 'text') !== 'text' || request.glossary_id !== undefined || request.glossary !== undefined)
    return false;
  const texts = Array.isArray(request.src_text) ? request.src_text : [request.src_text];
  let chars = 0;
  for (const text of texts) chars += text.length;
  return chars <= INLINE_MAX_CHARS;
}

/**
 * The stored glossary a request names (`glossary_id`), checked against the model: found here, on the event loop,
 * since the store lives here (a lookup by id); its entries go to the thread shared, not copied.
 * @throws ServeError BAD_REQUEST (both `glossary_id` and `glossary`, an unknown id, another target language)
 */
function storedGlossary(
  { glossary_id: id, glossary: inline }: TranslationRequest,
  context: TextPlanContext,
): SharedGlossary | undefined {
  if (id !== undefined && inline !== undefined) {
    throw new ServeError('BAD_REQUEST', 'Give glossary_id or glossary, not both.');
  }
  if (id === undefined) return undefined;
  const stored = context.glossaries?.find(id);
  if (stored === undefined) throw new ServeError('BAD_REQUEST', `Unknown glossary_id ${JSON.stringify(id)}.`);
  if (stored.targetLang !== context.tgtLang) {
    throw new ServeError(
      'BAD_REQUEST',
      `Glossary ${JSON.stringify(id)} is for ${stored.sourceLang} → ${stored.targetLang}, not → ${context.tgtLang}.`,
    );
  }
  return { ...sharedEntries(stored.entries), sourceLang: stored.sourceLang };
}

/** Each stored glossary's entries encoded once (the first request naming it pays one pass over them). */
const shared = new WeakMap<GlossaryEntries, Omit<SharedGlossary, 'sourceLang'>>();
let nextGlossaryKey = 1;

function sharedEntries(entries: Glossary['entries']): Omit<SharedGlossary, 'sourceLang'> {
  let found = shared.get(entries);
  if (found === undefined) {
    const encoded = new TextEncoder().encode(JSON.stringify([...entries]));
    const bytes = new SharedArrayBuffer(encoded.byteLength);
    new Uint8Array(bytes).set(encoded);
    found = { key: nextGlossaryKey++, bytes };
    shared.set(entries, found);
  }
  return found;
}
