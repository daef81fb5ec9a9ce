/**
 * @module model-server/wlm/workers/dispatch-pass — one pass of an engine's dispatch (worker-pool.ts `pump()`): which due
 * batches go to which ready worker.
 *
 * Dispatch: a worker has room while it holds fewer jobs than its cap, the sum of its attached models' batch sizes
 * (what they would hold on workers of their own, TorchServe's layout) bounded by the worker's own capacity (the
 * translation engine: its decoder rows ÷ beams). Whenever room may have opened or a batch may be due, `pump()`
 * hands batches out one at a time — to the ready worker holding the fewest jobs, from the attached batchers in
 * round-robin order (so one busy language cannot starve the others on a shared device), each at most the room
 * left. The engine batches whatever it holds at every step (engine/loop/generate.ts): batches sent while it generates
 * start at its next boundary and share its decoder runs at once or after catching up.
 *
 * Beyond the cap a worker has a small reserve (a quarter of the cap, and no more than the bulk jobs it holds)
 * that only interactive jobs may use, so a long document holding the whole cap does not make a single sentence
 * wait for one of its rows to finish; traffic without bulk jobs keeps the plain cap.
 *
 * Why a cap in jobs, not batches: under the immediate policy every arrival is a batch of its own while a worker
 * has room, and clients answered together come back a few milliseconds apart; a cap of a few batches kept all
 * but the first of them in the queue until a whole generation had finished. With the cap in jobs they reach the
 * engine at once and batches grow in the queue only once the worker is full.
 */
import type { Batcher } from '../batcher.js';
import type { Job } from '../job.js';
import type { WorkerHandle } from './worker-handle.js';

/** What one worker gets in a pass: the batches, each with the batcher it came from (to put back if unsent). */
export type WorkerPass = { batches: { batcher: Batcher; jobs: Job[] }[]; jobs: number };

/**
 * Takes due batches from `batchers`, round-robin from `rr`, for the `ready` workers (in slot order) while any has
 * room. Returns what each worker got and where the round-robin goes on. The caller sends or puts back every batch.
 */
export function dispatchPass(
  ready: readonly WorkerHandle[],
  batchers: readonly Batcher[],
  rr: number,
): { given: Map<WorkerHandle, WorkerPass>; rr: number } {
  const attachedCap = batchers.reduce((sum, b) => sum + b.batchSize, 0);
  // What each worker gets in this pass, and its job count so far (held = in flight + given).
  const given = new Map<WorkerHandle, WorkerPass>();
  const held = (w: WorkerHandle) => w.inFlightJobs + (given.get(w)?.jobs ?? 0);
  // Beyond its cap a worker keeps a reserve for interactive jobs (job.ts BULK_REQUEST_JOBS): a sentence that
  // arrives while a document fills the worker starts at the engine's next step boundary, where the engine
  // steps it apart from the document's rows (engine/loop/generate.ts), instead of waiting for a document row to end.
  const reserve = Math.max(1, Math.ceil(attachedCap / 4));
  const pick = (limit: (w: WorkerHandle) => number) => {
    let best: { worker: WorkerHandle; room: number } | undefined;
    for (const w of ready) {
      const left = limit(w) - held(w);
      if (left > 0 && (best === undefined || held(w) < held(best.worker))) best = { worker: w, room: left };
    }
    return best;
  };
  const take = (room: number, interactiveOnly: boolean) => {
    for (let i = 0; i < batchers.length; i += 1) {
      const index = (rr + i) % batchers.length;
      const jobs = batchers[index]!.nextBatch({ max: room, interactiveOnly });
      if (jobs === null) continue;
      rr = (index + 1) % batchers.length;
      return { batcher: batchers[index]!, jobs };
    }
    return undefined;
  };
  for (;;) {
    let chosen = pick((w) => Math.min(attachedCap, w.capacity));
    let taken = chosen && take(chosen.room, false);
    if (taken === undefined) {
      // Only while bulk jobs hold the worker: all-interactive traffic keeps the plain cap.
      chosen = pick((w) => Math.min(attachedCap + Math.min(reserve, w.bulkInFlightJobs), w.capacity));
      taken = chosen && take(chosen.room, true);
    }
    if (chosen === undefined || taken === undefined) break;
    const pass = given.get(chosen.worker) ?? { batches: [], jobs: 0 };
    pass.batches.push(taken);
    pass.jobs += taken.jobs.length;
    given.set(chosen.worker, pass);
  }
  return { given, rr };
}
