/**
 * @module engine/cohort — what the step loop keeps per cohort (a set of rows sharing one set of batched
 * tensors) and where that memory comes from and goes back to: `CohortMemory`, the engine's pools.
 *
 * Ownership: a cohort's row tensors (encoder states, cross-attention cache, a re-laid-out self cache) are pooled
 * memory it holds alone; its `CacheBuffers` (kv-cache.ts) are only released, never recycled piecemeal. `retire`
 * gives everything back once the cohort's rows are gone or live in another cohort's tensors.
 */
import type * as ort from 'onnxruntime-node';
import type { Row } from '../decoding.js';
import type { GeneratorStats } from './generator-stats.js';
import { CacheBufferPool, CacheBuffers } from './kv-cache.js';
import type { ModelConfig } from '../model-config.js';
import type { EngineSessions } from '../session.js';

/**
 * Room a new pooled row tensor gets beyond what it needs, so the next batch's (a source a few tokens longer)
 * still fits in it instead of allocating again.
 */
const ROW_TENSOR_HEADROOM = 1.25;

/** Batched tensors of one cohort (see generate.ts for layouts). */
export interface Cohort {
  rows: Row[];
  /** `[n, S, d]` encoder output, right-padded. */
  encoderStates: Float32Array;
  /** `[n, S]` 1 for real source tokens. */
  encoderMask: BigInt64Array;
  /** Real source length per row. */
  encoderLengths: number[];
  encoderLength: number;
  /**
   * Per layer `[key, value]` of the cross-attention cache `[n, H, S, dh]`; null until the first step makes it, or
   * from the start when a split decoder's cross graph ran at encoding (encode.ts).
   */
  crossCache: Float32Array[] | null;
  /** Per layer `[key, value]` of the self-attention cache `[n, H, P, dh]`. */
  selfCache: Float32Array[] | null;
  /** Where the cache is built step by step when the decoder returns only appended entries (else null). */
  cacheBuffers: CacheBuffers | null;
  pastLength: number;
  /** `[n, P]` 1 for real cache positions (joinable graphs only). */
  selfMask: BigInt64Array | null;
  /** Decoder steps taken by every row of the cohort (rows of one cohort always have taken the same number). */
  steps: number;
  /** Steps this cohort may still pause for a younger one to catch up (catch-up.ts). */
  pauseBudget: number;
  /** Its rows are bulk work (SubmitOptions.bulk): it never merges with interactive rows (generate.ts). */
  bulk?: boolean;
  /**
   * On the device-state path (`sessions.kind` device), the tensors that live on the device, made by the first step (null
   * before it); `crossCache` and `selfCache` then stay null. The cohort holds them alone (`retire` disposes them).
   */
  onDevice?: DeviceTensors | null;
}

/** A cohort's `gpu-buffer` tensors on the device-state path. */
export interface DeviceTensors {
  /** Per layer `[key, value]` of the cross-attention cache `[n, H, S, dh]`. */
  cross: ort.Tensor[];
  /** Per layer `[key, value]` of the self-attention cache `[n, H, P, dh]`. */
  self: ort.Tensor[];
  /** `[n, S]` the cohort's `encoderMask` (null: the decoder takes none). */
  encoderMask: ort.Tensor | null;
}

/** Free the device memory of `tensors` (none of them may be fed again). */
export function disposeDevice(tensors: DeviceTensors | null | undefined): void {
  if (tensors === null || tensors === undefined) return;
  for (const t of [...tensors.cross, ...tensors.self, ...(tensors.encoderMask ? [tensors.encoderMask] : [])])
    if (t.location === 'gpu-buffer') t.dispose();
}

/** What the encoder, the decoder step and the re-layouts share: the model, its shapes, memory and counters. */
export interface CohortContext {
  sessions: EngineSessions;
  config: ModelConfig;
  layers: number;
  heads: number;
  headDim: number;
  /** Whether rows with different cache lengths can share a decoder run (the graph takes a self-attention mask). */
  joinable: boolean;
  feedsEncoderMask: boolean;
  memory: CohortMemory;
  stats: GeneratorStats;
}

/** The memory pools of one engine's cohorts. */
export class CohortMemory {
  /** Self-attention cache memory shared by the cohorts (two cohorts' worth kept between batches). */
  readonly #cachePool: CacheBufferPool;
  /**
   * Memory of re-laid-out row tensors (encoder states, cross-attention cache, self cache after a gather or a
   * merge): one cohort's worth kept. A merge of a 64-row wave re-lays ~300 MB of cross-attention cache; into
   * fresh arrays that took 0.2–1.1 s here (first-touch page faults), into reused memory ~30 ms.
   */
  readonly #rowPool: CacheBufferPool;
  readonly #layers: number;

  constructor(layers: number) {
    this.#layers = layers;
    // One buffer per cache tensor (key and value per layer) per cohort.
    this.#cachePool = new CacheBufferPool(2 * 2 * layers);
    this.#rowPool = new CacheBufferPool(1 + 2 * 2 * layers);
  }

  /** Cache buffers for a new cohort, sized for `expectedPositions` cache positions. */
  cacheBuffers(expectedPositions: number): CacheBuffers {
    return new CacheBuffers(this.#cachePool, 2 * this.#layers, expectedPositions);
  }

  /** An exact-length view of pooled memory for a row tensor; its old contents are the caller's to overwrite. */
  pooled(length: number): Float32Array {
    if (length === 0) return new Float32Array(0);
    return this.#rowPool.take(length, Math.ceil(length * ROW_TENSOR_HEADROOM)).subarray(0, length);
  }

  /**
   * Give `cohort`'s row tensors back to the pools (its rows are gone or live in other tensors now) and leave it
   * holding none, so it cannot give them twice. Row tensors first: `holds` must see the cache buffers.
   */
  retire(cohort: Cohort): void {
    this.recycleRowTensors(cohort);
    cohort.cacheBuffers?.release();
    disposeDevice(cohort.onDevice);
    cohort.onDevice = null;
  }

  /** Give back `cohort`'s row tensors (every row was copied out of them) and leave it holding none. */
  recycleRowTensors(cohort: Cohort): void {
    this.#rowPool.recycle(cohort.encoderStates);
    for (const tensor of cohort.crossCache ?? []) this.#rowPool.recycle(tensor);
    cohort.selfCache?.forEach((tensor, k) => this.recycleLoose(cohort, k, tensor));
    cohort.encoderStates = new Float32Array(0);
    cohort.crossCache = null;
    cohort.selfCache = null;
  }

  /** Give back a pooled row tensor its holder drops before any cohort held it. */
  recycle(tensor: Float32Array): void {
    this.#rowPool.recycle(tensor);
  }

  /** Recycle self-cache tensor `k` unless it is a view of the cohort's cache buffers (those are only released). */
  recycleLoose(cohort: Cohort, k: number, tensor: Float32Array): void {
    if (!(cohort.cacheBuffers?.holds(k, tensor) ?? false)) this.#rowPool.recycle(tensor);
  }
}
