/**
 * @module engine/engine-options — the engine's contract with its callers: how it is loaded (`EngineOptions`), what a
 * row and a call ask for (`TranslateRow`, `TranslateOptions`) and what comes back (`Translation`). engine.ts
 * re-exports them with `TranslationEngine`.
 */
import { availableParallelism } from 'node:os';
import type { DeviceRequest } from '../protocol.js';
import type { DtypeRequest } from './model-files.js';

/** Decoder rows an engine steps at once unless told otherwise. */
export const DEFAULT_MAX_BATCH_ROWS = 256;

/**
 * Most new tokens a row with `sourceTokens` encoder tokens (specials included) may generate when
 * `TranslateOptions.capBySourceLength` is on: 2 per source token plus 10, fairseq's `max_len_a · src + max_len_b`
 * with a = 2, b = 10. Between M2M100's languages a translation's SentencePiece length stays within about 1.5× its
 * source's (CJK to alphabetic scripts expands most), so 2× leaves a whole translation room; the +10 covers the
 * forced language token and `</s>`, and short inputs (a word or two), whose ratio varies most. A row that reaches
 * it without `</s>` is a model stuck repeating itself, which this stops early instead of at the absolute cap.
 */
export function sourceLengthCap(sourceTokens: number): number {
  return Math.ceil(2 * sourceTokens) + 10;
}

/**
 * The intra-op threads a session gets for `asked` (`EngineOptions.intraOpThreads`): 0 is every core this process may
 * use. Not onnxruntime's own 0, "the physical cores", which it undercounts on some virtual machines: on this
 * project's 2-core VMs it makes one thread, and bench-mid's engine ran 1.25× (batch 64) to 1.4× (batch 256) faster
 * on two.
 */
export function intraOpThreadCount(asked: number | undefined): number {
  const threads = Math.max(0, Math.floor(asked ?? 0));
  return threads === 0 ? availableParallelism() : threads;
}

export interface EngineOptions {
  /** Folder in the HF ONNX export layout (config.json, tokenizer.json, onnx/…). */
  modelDir: string;
  /** Default: CPU. A CUDA request falls back to the CPU with `device.fallbackReason` when impossible. */
  device?: DeviceRequest;
  /**
   * Which weights to load (default `auto`: int8 on the CPU, fp16 on CUDA when the folder has those files, else
   * fp32; see session.ts `AUTO_DTYPES`). A dtype whose files are missing is refused at load, naming them.
   */
  dtype?: DtypeRequest;
  /** onnxruntime intra-op threads; 0 (default): every core this process may use (`intraOpThreadCount`). */
  intraOpThreads?: number;
  /**
   * `auto` (default): the merged decoder, or `decoder_model.onnx` when the folder has no merged one; `no-cache`
   * recomputes the whole prefix every step (tests compare it with the cache).
   */
  decoder?: 'auto' | 'no-cache';
  /**
   * `rewritten` (default): the merged decoder gets extra outputs where its graph allows (only the appended
   * cache entries per step, kept by the engine in reused buffers; the top-2 tokens for greedy steps), see
   * `decoderOutputs`; `as-exported`: the graph as is (tests compare the two).
   */
  decoderGraph?: 'rewritten' | 'as-exported';
  /**
   * Beam steps take each row's top candidates and log-softmax normaliser from a small graph on the decoder's device
   * (beam-head.ts) instead of scanning the logits on the host. Default: with the rewritten decoder; false: the
   * host scan (tests and measurements compare the two).
   */
  beamHead?: boolean;
  /**
   * On WebGPU, the decoder's caches, encoder mask and logits stay on the device between steps (only tokens and
   * scores cross to the host: `stats().decoderHostBytes`; re-layouts by device-layout.ts). Taken only with a split
   * decoder (decoder-split.ts) in float32. Default true; false: everything through the host (tests and measurements
   * compare the two).
   */
  deviceState?: boolean;
  /**
   * onnxruntime's per-node profile of every session, written as `{prefix}_{date}.json` files when the sessions are
   * released (bench/gpu/driver.ts counts kernels per decoder step from them). Off by default: it costs time.
   */
  profilePrefix?: string;
  /** Most decoder rows (beams included) in one step; more wait at the boundary. Default DEFAULT_MAX_BATCH_ROWS. */
  maxBatchRows?: number;
  /**
   * Decoders without a self-attention mask (every Hugging Face export): most steps a row may pause so that rows
   * that started after it catch up and share its decoder runs; 0 turns catch-up off. Default 8 (see catch-up.ts).
   */
  catchUpSteps?: number;
  /**
   * Decoders without a self-attention mask: most cohorts generating at once; rows that can neither start nor catch
   * up wait at the boundary. Default 2: a second cohort lets new rows start while a long one finishes, at the price
   * of one more decoder run per step (see generate.ts).
   */
  maxCohorts?: number;
  /**
   * How a row is generated: `step-loop` (generate.ts: a decoder run per step, rows joining and leaving between
   * steps), `in-graph` (search/graph.ts: the whole generation of a batch in one onnxruntime run, its caches on the
   * device; rows with glossary constraints or alternatives, or another `earlyStopping`, still take the step loop),
   * or `auto` (default): in-graph on CUDA, where the step loop moves every step's caches across PCIe, else the step
   * loop. If the search graph cannot be built or loaded, the step loop serves and `generation.reason` says why.
   */
  search?: 'auto' | 'in-graph' | 'step-loop';
  /** In-graph search: runs on the device at once (search/runs.ts). Default 2. */
  searchRunsInFlight?: number;
  /** Defaults for every call, over generation_config.json's. */
  defaults?: TranslateOptions;
  /**
   * Called after each step boundary where the decoder ran, once its finished and cancelled rows have left (see
   * `stats()`, and `liveRows`, current then): a progress signal for watchdogs. It runs inside the generation loop,
   * so it must be cheap and must not throw.
   */
  onStep?: () => void;
}

/** Per-call generation settings; each falls back to EngineOptions.defaults, then generation_config.json. */
export interface TranslateOptions {
  /** Beam width; 1 is greedy. */
  numBeams?: number;
  /** Cap on generated tokens (the forced language token and `</s>` count); also capped by the model's positions. */
  maxNewTokens?: number;
  /** `</s>` is suppressed until this many tokens exist: with minNewTokens = maxNewTokens every row has that length (benchmarks). */
  minNewTokens?: number;
  /**
   * Also cap each row at `sourceLengthCap(its source tokens)`: `maxNewTokens` stays the absolute cap, and a row
   * stopped by either is reported (`Translation.capped`). Default false (every row may use `maxNewTokens`).
   */
  capBySourceLength?: boolean;
  /** Schedule it as bulk work (a long document's sentences): see Generator's classes (generate.ts). */
  bulk?: boolean;
  lengthPenalty?: number;
  earlyStopping?: boolean;
  /** Run the beam search code even with numBeams 1 (tests). Default: greedy iff numBeams is 1. */
  strategy?: 'greedy' | 'beam';
  /**
   * Token sequences the translation must contain (a glossary's target terms, `encodeTerm`), enforced while
   * decoding (constraints.ts). The row's token cap grows by their length.
   */
  constraints?: readonly (readonly number[])[];
  /**
   * Runners-up to return besides the translation (`Translation.alternatives`): the row searches with at least
   * this many beams more than one, whatever `numBeams` says. Default 0.
   */
  alternatives?: number;
  /**
   * Its word alignment will be asked for (`engine.align` with the translation this call returns): generation keeps
   * its steps' cross-attention for it (no pass), or where the step loop's graph gives none, the row's encoder states
   * (the pass need not run the encoder again). Default false: nothing is kept, and an alignment asked for all the
   * same takes a pass that runs the encoder.
   */
  align?: boolean;
}

export interface TranslateRow {
  srcLang: string;
  text: string;
  tgtLang: string;
}

/** A row validated and tokenized, ready to generate (the handler's `preprocess` result). */
export interface PreparedRow {
  inputIds: number[];
  forcedTokenId: number;
  truncated: boolean;
}

export interface Translation {
  text: string;
  /** Generated ids: the forced language token first, `</s>` last when the model stopped by itself. */
  tokenIds: number[];
  /** Tokens this row generated (= tokenIds.length): the numerator of tokens/s. */
  generatedTokens: number;
  /** Encoder tokens, specials included. */
  inputTokens: number;
  /** The source was cut to the model's maximum input length. */
  truncated: boolean;
  /** Generation stopped at the row's token cap before `</s>`: the translation may be cut short. */
  capped: boolean;
  /** The token cap this row had: `maxNewTokens`, lowered by the source-length cap when that is on. */
  maxNewTokens: number;
  /** Beam search's length-normalised log-probability of it (0 for greedy rows, which never score). */
  score: number;
  /** With `alternatives`: the other finished hypotheses, best first, distinct texts, at most that many. */
  alternatives?: { text: string; score: number }[];
}
