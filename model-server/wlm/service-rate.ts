/**
 * @module model-server/wlm/service-rate — what a model's admission (batcher.ts) measures: its service rate, and the
 * OVERLOADED refusals whose clients may still be waiting to return.
 *
 * Admission (why not a bounded FIFO alone): a queue that admits whatever fits lets a flood wait longer than its
 * clients' deadlines, so under overload the engine spends its time on answers nobody will use and goodput
 * collapses. A request is admitted only while the wait it can expect fits the queue budget (`queueBudgetMs`): the
 * jobs that leave before its first one (one per waiting request: the queue is fair between requests,
 * batch-queue.ts) ÷ this model's service rate, measured in jobs per *busy* millisecond (time with jobs on a worker,
 * so idle gaps do not make the engine look slow). Otherwise it is refused at once, 503 OVERLOADED with a
 * `Retry-After` of the time the queue needs to drain back into budget, plus the time the clients refused before it
 * and still waiting to return take to be admitted (Retry-After below). A second check catches a wrong estimate:
 * while the queue has not moved (no job left it) for the whole budget, nothing new is admitted (CoDel's sojourn
 * signal, on the queue's head rather than its oldest job, which may be the tail of a long document).
 * Among the queue policies we considered this is Triton's REJECT timeout made predictive (refused at arrival
 * instead of after waiting), with CoDel's signal as the backstop; adaptive LIFO serves the newest first, which
 * keeps goodput but breaks the order a client sending a document's sentences expects.
 * Until the rate is known (a model's first completions) only the bound of the queue and the sojourn check apply:
 * a guess would refuse the first burst a model ever sees for no reason it could state.
 *
 * Retry-After under sustained overload: a refused client comes back after its Retry-After and competes for a place
 * with every other refused client, and places open at the service rate. Telling each one only when the queue is
 * back in budget sends them all back at once, to be refused again: at 10× the saturating load, clients bounced
 * every 1–2 s and answering their refusals took a tenth of a core from the engine on two cores (bench figure 7).
 * So the hint adds the clients refused within the last hint's span — those still waiting to return, if they honour
 * it — divided by the service rate, capped at the queue budget: the queue holds that much work, so the engine
 * never runs dry before they are back even if nobody else comes. In steady state refusals then come at about the
 * service rate, whatever the number of clients.
 */

/** Completions remembered to estimate the service rate (admission and `Retry-After`). */
const RATE_WINDOW = 256;
/** Completions needed before the rate is trusted. */
const RATE_MIN_SAMPLES = 8;
/** Refusals remembered to estimate how many refused clients are waiting to return (Retry-After). */
const REFUSALS_REMEMBERED = 4096;

/** A model's service rate in jobs per busy ms; the batcher tells it when jobs go out, come back and complete. */
export class ServiceRate {
  /** The busy clock (below) at each recent completion, oldest first; at most RATE_WINDOW. */
  #completions: number[] = [];
  /** Busy clock: ms during which this model had jobs on a worker, up to `#busySince`. */
  #busyMs = 0;
  /** When the current busy period began (a first job dispatched), or undefined while none is out. */
  #busySince: number | undefined;

  /** The first job went out at `now`: a busy period begins. */
  busy(now: number): void {
    this.#busySince = now;
  }

  /** The last dispatched job is gone at `now`: the busy period (if any) ends. */
  idle(now: number): void {
    if (this.#busySince === undefined) return;
    this.#busyMs += now - this.#busySince;
    this.#busySince = undefined;
  }

  /** A job completed at `now` (not an abandoned one: its early end says nothing about how fast the engine serves). */
  completed(now: number): void {
    const done = this.#completions;
    done.push(this.#busyMs + (this.#busySince === undefined ? 0 : now - this.#busySince));
    if (done.length > RATE_WINDOW) done.shift();
  }

  /** Jobs completed per busy ms over the recent window, or undefined with too few completions. */
  perMs(): number | undefined {
    const done = this.#completions;
    if (done.length < RATE_MIN_SAMPLES) return undefined;
    const first = done[0]!;
    const spanMs = done[done.length - 1]! - first;
    if (!(spanMs > 0)) return undefined;
    // Jobs finished after the first sample, over the busy time since it: the first sample's batch-mates finished
    // at the same instant, and counting them would make batched work look twice as fast as it is.
    let after = done.length;
    for (let i = 0; i < done.length && done[i] === first; i += 1) after -= 1;
    return after / spanMs;
  }
}

/** The OVERLOADED refusals a model gave recently, for the Retry-After of the next one. */
export class Refusals {
  /** When recent refusals were given, oldest first (`#from` on); at most REFUSALS_REMEMBERED. */
  #refusedAt: number[] = [];
  #from = 0;
  /** The last Retry-After given, ms: how far back refused clients may still be waiting. */
  #lastRetryAfterMs = 0;

  /**
   * Retry-After of a refusal given at `now` (module doc: Retry-After under sustained overload): the time the queue
   * needs to be back in budget (`overMs`), plus the clients refused within the last hint's span ÷ the service rate
   * (`perMs`), at most `budgetMs`. Records the refusal.
   */
  retryAfterS(now: number, overMs: number, budgetMs: number, perMs: number | undefined): number {
    const refused = this.#refusedAt;
    const since = now - this.#lastRetryAfterMs;
    while (this.#from < refused.length && refused[this.#from]! < since) this.#from += 1;
    if (this.#from > REFUSALS_REMEMBERED) {
      refused.splice(0, this.#from);
      this.#from = 0;
    }
    const waiting = refused.length - this.#from;
    const othersMs = perMs === undefined ? 0 : Math.min(waiting / perMs, budgetMs);
    if (waiting < REFUSALS_REMEMBERED) refused.push(now);
    else refused[refused.length - 1] = now;
    const retryAfterS = clampRetryS((overMs + othersMs) / 1000);
    this.#lastRetryAfterMs = retryAfterS * 1000;
    return retryAfterS;
  }
}

/** Retry-After seconds: whole, 1…60. */
export function clampRetryS(seconds: number): number {
  return Math.min(60, Math.max(1, Math.ceil(seconds)));
}
