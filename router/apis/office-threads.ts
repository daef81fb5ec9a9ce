/**
 * @module router/apis/office-threads — Office and EPUB files planned and rebuilt in a worker thread (piscina;
 * ./office-task.ts runs model-server/text/office/ there), so that unzipping, parsing and zipping a large or hostile
 * file never holds the router's event loop: only a batch of units at a time is handled here. One thread per router
 * process, started at the first Office file and stopped after a minute unused.
 */
import { Piscina } from 'piscina';
import { resolveThreadEntry } from '../../common/entry.js';
import { ServeError } from '../../common/errors.js';
import type { OfficeKind } from '../../model-server/text/office/office-document.js';
import type { OfficeOutcome, OfficeTask, OfficeUnits } from './office-task.js';

const IDLE_MS = 60_000;

export class OfficeThreads {
  #pool: Piscina | undefined;
  #closed = false;

  /**
   * The file's units, in batches, with their edges.
   * @throws ServeError BAD_REQUEST, PAYLOAD_TOO_LARGE for a file that is not what its type says, or hostile
   */
  plan(
    bytes: Uint8Array,
    kind: OfficeKind,
    options: { keep?: string; signal?: AbortSignal } = {},
  ): Promise<OfficeUnits> {
    return this.#run<OfficeUnits>({ name: 'plan', bytes, kind, ...keep(options.keep) }, options.signal);
  }

  /**
   * The file rebuilt from its units' translations, in the batches `plan` gave (each joined), and their word
   * alignments per batch (`links`, ./office-task.ts `packLists`; absent: none); from the plan kept under `keep` when
   * the thread still has it.
   */
  render(
    bytes: Uint8Array,
    kind: OfficeKind,
    translations: string[],
    options: { keep?: string; signal?: AbortSignal; links?: Int32Array[] } = {},
  ): Promise<Uint8Array> {
    const links = options.links === undefined ? {} : { links: options.links };
    return this.#run<Uint8Array>(
      { name: 'render', bytes, kind, translations, ...links, ...keep(options.keep) },
      options.signal,
    );
  }

  /** Stop the thread; what runs is rejected. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    const pool = this.#pool;
    this.#pool = undefined;
    await pool?.destroy();
  }

  async #run<T>(task: OfficeTask, signal?: AbortSignal): Promise<T> {
    if (this.#closed) throw new ServeError('SHUTTING_DOWN');
    if (this.#pool === undefined) {
      const entry = resolveThreadEntry(import.meta.url, './office-task');
      this.#pool = new Piscina({
        filename: entry.filename,
        ...(entry.workerData ? { workerData: entry.workerData } : {}),
        minThreads: 0,
        maxThreads: 1,
        idleTimeout: IDLE_MS,
      });
    }
    const outcome = (await this.#pool.run(task, signal ? { signal } : {})) as OfficeOutcome;
    if (!outcome.ok) throw ServeError.fromWire(outcome.error);
    return outcome.value as T;
  }
}

const keep = (key: string | undefined) => (key === undefined ? {} : { keep: key });
