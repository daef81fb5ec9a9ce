/**
 * @module harness/fault-spawner — the model server's `spawn` seam for fault drills: workers of engines whose
 * models have a fault run harness/fault-worker.ts (the real worker loop with that fault injected), every
 * other worker the real entry.
 *
 * A fault belongs to a model, a worker to an engine: the models attached to an engine when its worker starts must
 * agree on the fault. Models with different faults on one device need an engine each: ENGINE_SHARING=language
 * (or separate devices).
 */
import { resolveEntry } from '../common/entry.js';
import { forkWorker } from '../model-server/http/server.js';
import type { SpawnedEngine, WorkerSpawner } from '../model-server/wlm/workers/worker-handle.js';

/** The fault of the workers of `engine` (undefined: none); throws when its models disagree. */
export function faultOf(faults: Readonly<Record<string, string>>, engine: SpawnedEngine): string | undefined {
  const byModel = engine.models.map((model) => faults[model.slice(0, model.lastIndexOf('@'))]);
  if (new Set(byModel).size > 1) {
    throw new Error(
      `models ${engine.models.join(', ')} share engine ${engine.key} but not their faults ` +
        `(${JSON.stringify(byModel)}): give them an engine each (ENGINE_SHARING=language)`,
    );
  }
  return byModel[0];
}

/** A spawner injecting `faults` (model name → fault list, fault-worker.ts names) into the workers of those models. */
export function faultSpawner(faults: Readonly<Record<string, string>>, logLevel = 'warn'): WorkerSpawner {
  const healthy = forkWorker(logLevel);
  const entry = resolveEntry(import.meta.url, './fault-worker');
  return (workerId, engine) => {
    const fault = faultOf(faults, engine);
    if (fault === undefined) return healthy(workerId, engine);
    return forkWorker(logLevel, { entry, env: { MT_TEST_FAULT: fault } })(workerId, engine);
  };
}
