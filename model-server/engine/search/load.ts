/**
 * @module engine/search/load — whether an engine generates in one run per batch (graph.ts) or by the step loop,
 * and the search graph's session when it does: built from the same files and on the same device as the step loop's
 * sessions, which stay loaded for the rows the graph cannot take (glossary constraints, alternatives).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type * as ort from 'onnxruntime-node';
import { type EngineOptions, intraOpThreadCount } from '../engine-options.js';
import type { ModelConfig } from '../model-config.js';
import { searchGraph } from './graph.js';
import { SearchRuns } from './runs.js';
import { SearchSession } from './session.js';
import { DTYPE_SUFFIX, type EngineSessions } from '../session.js';

/** What generates rows, and why it is not the search graph when that was asked for (or chosen by `auto`). */
export interface SearchMode {
  mode: 'in-graph' | 'step-loop';
  reason?: string;
}

export interface LoadedSearch {
  runs: SearchRuns | null;
  session: SearchSession | null;
  mode: SearchMode;
}

/** Never throws for a graph it cannot build or load: the step loop serves and `mode.reason` says why. */
export async function loadSearch(
  options: EngineOptions,
  config: ModelConfig,
  sessions: EngineSessions,
  maxBatchRows: number,
): Promise<LoadedSearch> {
  const asked = options.search ?? 'auto';
  const device = sessions.device;
  const stepLoop = (reason?: string): LoadedSearch => ({
    runs: null,
    session: null,
    mode: reason === undefined ? { mode: 'step-loop' } : { mode: 'step-loop', reason },
  });
  if (asked === 'step-loop') return stepLoop();
  if (asked === 'auto' && device.kind !== 'cuda') return stepLoop();
  if (device.kind === 'webgpu') return stepLoop('the search graph runs on CUDA or the CPU, not WebGPU');
  if (sessions.decoderKind !== 'merged') return stepLoop('the search graph needs the merged decoder');
  const suffix = DTYPE_SUFFIX[sessions.dtype.dtype];
  const onnx = path.join(options.modelDir, 'onnx');
  const scratchDir = mkdtempSync(path.join(tmpdir(), 'mt-serve-search-'));
  try {
    const graph = searchGraph(
      path.join(onnx, `encoder_model${suffix}.onnx`),
      path.join(onnx, `decoder_model_merged${suffix}.onnx`),
      config,
      { earlyStopping: true },
      { scratchDir },
    );
    if (!graph.ok) return stepLoop(graph.reason);
    const provider: ort.InferenceSession.ExecutionProviderConfig =
      device.kind === 'cuda' ? { name: 'cuda', deviceId: device.id ?? 0 } : 'cpu';
    const session = await SearchSession.create(graph, config, {
      executionProviders: [provider],
      graphOptimizationLevel: 'all',
      intraOpNumThreads: intraOpThreadCount(options.intraOpThreads),
      interOpNumThreads: 1,
      logSeverityLevel: 3,
    });
    const runs = new SearchRuns(session, {
      maxBatchRows,
      ...(options.onStep === undefined ? {} : { onRun: options.onStep }),
      ...(options.searchRunsInFlight === undefined ? {} : { runsInFlight: options.searchRunsInFlight }),
    });
    return { runs, session, mode: { mode: 'in-graph' } };
  } catch (err) {
    return stepLoop(`the search graph did not load: ${(err as Error).message.split('\n')[0]}`);
  } finally {
    // onnxruntime has read the weights into the session; the scratch file is not needed after the load.
    rmSync(scratchDir, { recursive: true, force: true });
  }
}
