/**
 * @module engine/engine — `TranslationEngine`: one model folder on one device, serving every language
 * its tokenizer knows. It ties together the model config, the tokenizer, the sessions and the step loop.
 *
 * ```ts
 * const engine = await TranslationEngine.load({ modelDir: 'models/tiny', device: { kind: 'cpu' } });
 * const [out] = await engine.translate([{ srcLang: 'ko', text: '안녕하세요', tgtLang: 'en' }]);
 * out.text; out.generatedTokens;
 * ```
 *
 * Concurrent `translate` calls share one generation loop: rows of a later call start at the next step boundary
 * and join the running batch at once (decoders with a self-attention mask) or once they have caught up with it
 * (every other decoder; see generate.ts and catch-up.ts). Each row resolves as soon as it finishes.
 */
import path from 'node:path';
import type { DeviceInfo } from '../protocol.js';
import { type Hypothesis, NO_FORCED_TOKEN, type SearchSettings } from './decoding.js';
import { Constraints } from './constraints.js';
import { Generator, type GeneratorStats, type SubmitOptions } from './loop/generate.js';
import { loadModelConfig, type ModelConfig } from './model-config.js';
import {
  DEFAULT_MAX_BATCH_ROWS,
  type EngineOptions,
  type PreparedRow,
  sourceLengthCap,
  type TranslateOptions,
  type TranslateRow,
  type Translation,
} from './engine-options.js';
import {
  type DecoderOutputs,
  type DtypeChoice,
  type EngineSessions,
  loadSessions,
  type ModelDtype,
} from './session.js';
import { TranslationTokenizer } from './tokens/tokenizer.js';
import { DTYPE_SUFFIX, weightsBytes } from './model-files.js';
import { Aligner, type AlignmentSource, type AlignmentStats, type WordAlignment } from './alignment.js';
import { loadSearch, type LoadedSearch, type SearchMode } from './search/load.js';
import type { SearchRunStats } from './search/runs.js';

export * from './engine-options.js';
export type { AlignmentStats, WordAlignment } from './alignment.js';

export class TranslationEngine {
  readonly #config: ModelConfig;
  readonly #tokenizer: TranslationTokenizer;
  readonly #sessions: EngineSessions;
  readonly #generator: Generator;
  readonly #defaults: TranslateOptions;
  readonly #maxBatchRows: number;
  readonly #search: LoadedSearch;
  readonly #weightsBytes: number;
  readonly #aligner: Aligner;
  /** What a translation generated with `align` keeps for it (AlignmentSource) until `align` takes it, or it goes. */
  readonly #kept = new WeakMap<Translation, { inputIds: readonly number[] } & AlignmentSource>();
  #closed: Promise<void> | null = null;

  private constructor(
    config: ModelConfig,
    tokenizer: TranslationTokenizer,
    sessions: EngineSessions,
    options: EngineOptions,
    search: LoadedSearch,
  ) {
    this.#config = config;
    this.#tokenizer = tokenizer;
    const encoderFile = path.join('onnx', `encoder_model${DTYPE_SUFFIX[sessions.dtype.dtype]}.onnx`);
    this.#weightsBytes = weightsBytes(options.modelDir, [encoderFile, sessions.decoderFile]);
    this.#sessions = sessions;
    this.#defaults = { ...options.defaults };
    this.#maxBatchRows = options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS;
    this.#generator = new Generator({ ...options, sessions, config, maxBatchRows: this.#maxBatchRows });
    this.#search = search;
    this.#aligner = new Aligner(sessions.alignment, config, tokenizer, (task) => this.#generator.atBoundary(task));
  }

  /** Read the model folder and create the sessions. @throws ServeError WORKER_START_FAILED */
  static async load(options: EngineOptions): Promise<TranslationEngine> {
    const config = loadModelConfig(options.modelDir);
    const tokenizer = TranslationTokenizer.load(options.modelDir, {
      eosTokenId: config.eosTokenId,
      maxInputTokens: config.maxInputTokens,
      vocabSize: config.vocabSize,
    });
    const sessions = await loadSessions(options, config);
    const maxBatchRows = options.maxBatchRows ?? DEFAULT_MAX_BATCH_ROWS;
    let search;
    try {
      search = await loadSearch(options, config, sessions, maxBatchRows);
    } catch (err) {
      await releaseSessions(sessions);
      throw err;
    }
    return new TranslationEngine(config, tokenizer, sessions, options, search);
  }

  /** How rows are generated (`in-graph` or `step-loop`), and why when it is not what was asked for. */
  get generation(): Readonly<SearchMode> {
    return this.#search.mode;
  }

  /** In-graph runs so far (null when rows take the step loop). */
  searchStats(): Readonly<SearchRunStats> | null {
    return this.#search.runs?.stats() ?? null;
  }

  /** Where the sessions really run. */
  get device(): DeviceInfo {
    return this.#sessions.device;
  }

  get config(): ModelConfig {
    return this.#config;
  }

  get tokenizer(): TranslationTokenizer {
    return this.#tokenizer;
  }

  /** The weights' type loaded (`fp32`, `q8`, `q8-rows`, `fp16`). */
  get dtype(): ModelDtype {
    return this.#sessions.dtype.dtype;
  }

  /** The model family its files describe (`M2M100`, `NLLB-200`, `mBART-50`, `Marian`). */
  get family(): string {
    return this.#tokenizer.family;
  }

  /** Bytes of the weight files loaded (encoder and decoder of the dtype, external data included). */
  get weightsBytes(): number {
    return this.#weightsBytes;
  }

  /** The dtype loaded, what was asked for, and why (MODEL_DTYPE=auto says what it chose and what was absent). */
  get dtypeChoice(): Readonly<DtypeChoice> {
    return this.#sessions.dtype;
  }

  /** `merged` (KV cache) or `no-cache`. */
  get decoderKind(): EngineSessions['decoderKind'] {
    return this.#sessions.decoderKind;
  }

  /** What a decoder step fetches (appended cache entries or the whole cache; top-2 or logits), and why not. */
  get decoderOutputs(): Readonly<DecoderOutputs> {
    return this.#sessions.decoderOutputs;
  }

  /** Whether rows arriving mid-generation share the running decoder batch at once (else: after catching up). */
  get joinable(): boolean {
    return this.#generator.joinable;
  }

  /** Most decoder rows (beams included) stepped at once. */
  get maxBatchRows(): number {
    return this.#maxBatchRows;
  }

  /** Source language codes read (the tokenizer's own and their ISO 639-1 aliases), sorted. */
  languages(): string[] {
    return [...this.#tokenizer.languages()];
  }

  /** Target language codes written, sorted (a Marian model's one; the others' every language). */
  targetLanguages(): string[] {
    return [...this.#tokenizer.targetLanguages()];
  }

  stats(): Readonly<GeneratorStats> {
    return this.#generator.stats();
  }

  /** Decoder rows generating now (beams count once each). */
  get liveRows(): number {
    return this.#generator.liveRows;
  }

  /** Validate languages and tokenize. @throws ServeError UNKNOWN_LANGUAGE naming the field and code */
  prepare(row: TranslateRow): PreparedRow {
    const forcedTokenId = this.#tokenizer.forcedTokenId(row.tgtLang);
    const { ids, truncated } = this.#tokenizer.encode(row.text, row.srcLang, row.tgtLang);
    return { inputIds: ids, forcedTokenId, truncated };
  }

  /** Token ids that write a glossary term (TranslateOptions.constraints). @throws ServeError BAD_REQUEST */
  encodeTerm(term: string): number[] {
    return this.#tokenizer.encodeTerm(term);
  }

  /**
   * Translate rows (languages may differ per row). Every row is validated before any starts.
   * `onRow(i, translation)` fires as each row finishes; the promise resolves with all, in order.
   */
  async translate(
    rows: readonly TranslateRow[],
    options: TranslateOptions = {},
    onRow?: (index: number, translation: Translation) => void,
  ): Promise<Translation[]> {
    const prepared = rows.map((row) => this.prepare(row));
    return Promise.all(
      prepared.map(async (row, index) => {
        const translation = await this.generate(row, options);
        onRow?.(index, translation);
        return translation;
      }),
    );
  }

  /**
   * Generate for one prepared row; joins whatever is running. Aborting `signal` cancels it as `SubmitOptions.signal`
   * says (loop/sequences.ts): it leaves the engine, and the promise rejects with the signal's reason.
   */
  async generate(row: PreparedRow, options: TranslateOptions = {}, signal?: AbortSignal): Promise<Translation> {
    const settings = this.#settings(row.inputIds.length, row.forcedTokenId, options);
    const wanted = options.alternatives ?? 0;
    let kept: AlignmentSource | undefined;
    // Its steps' attention where the step loop's graph offers it, else its encoder states (the pass then skips one).
    const fromSteps = options.align === true && this.#generator.keepsAttention;
    const hyp = await this.#submit(
      row.inputIds,
      settings,
      {
        signal,
        bulk: options.bulk ?? this.#defaults.bulk,
        onEncoded: options.align === true && !fromSteps ? (states) => (kept = { states }) : undefined,
        onAttention: fromSteps ? (attention) => (kept = { attention }) : undefined,
      },
      wanted > 0,
    );
    const text = this.#tokenizer.decode(hyp.tokens);
    const ranked = hyp.ranked ?? [];
    const translation: Translation = {
      text,
      tokenIds: hyp.tokens,
      generatedTokens: hyp.tokens.length,
      inputTokens: row.inputIds.length,
      truncated: row.truncated,
      capped: hyp.tokens.at(-1) !== this.#config.eosTokenId,
      maxNewTokens: settings.maxNewTokens,
      score: ranked[0]?.score ?? 0,
    };
    if (wanted > 0) {
      const seen = new Set([text]);
      translation.alternatives = [];
      for (const { hyp: other, score } of ranked.slice(1)) {
        const alternative = this.#tokenizer.decode(other.tokens);
        if (seen.has(alternative) || translation.alternatives.length === wanted) continue;
        seen.add(alternative);
        translation.alternatives.push({ text: alternative, score });
      }
    }
    if (kept !== undefined) this.#kept.set(translation, { inputIds: row.inputIds, ...kept });
    return translation;
  }

  /**
   * Which characters of `row`'s source each word of its `translation` comes from (alignment.ts), read from its
   * steps' cross-attention or a pass after generation; null when the model's decoder offers none to read
   * (`alignmentUnavailable` says why). `source` is the text `row` was prepared from. A translation generated with
   * `align` (TranslateOptions) brings its steps' attention or encoder states; another's pass encodes it again.
   */
  align(source: string, row: PreparedRow, translation: Translation): Promise<WordAlignment | null> {
    const kept = this.#kept.get(translation);
    this.#kept.delete(translation);
    // A translation passed with a row it was not generated from brings what another source gave: not used.
    const ids = row.inputIds;
    const same =
      kept !== undefined && kept.inputIds.length === ids.length && kept.inputIds.every((id, i) => id === ids[i]);
    return this.#aligner.align(source, ids, translation.text, translation.tokenIds, same ? kept : {});
  }

  /** The alignment passes since load: runs, rows, rows encoded again, time. */
  alignmentStats(): Readonly<AlignmentStats> {
    return this.#aligner.stats();
  }

  /** Why rows get no alignment from this model, or null when they do. Opens the alignment sessions. */
  alignmentUnavailable(): Promise<string | null> {
    return this.#aligner.unavailable();
  }

  /** The raw search result for encoder ids and a forced first token (tests and benchmarks). */
  generateIds(
    inputIds: readonly number[],
    forcedTokenId: number,
    options: TranslateOptions = {},
    signal?: AbortSignal,
  ): Promise<Hypothesis> {
    const bulk = options.bulk ?? this.#defaults.bulk;
    return this.#submit(inputIds, this.#settings(inputIds.length, forcedTokenId, options), { signal, bulk });
  }

  /** `ranked`: the caller needs every finished hypothesis (alternatives), which only the step loop keeps. */
  #submit(
    inputIds: readonly number[],
    settings: SearchSettings,
    options: SubmitOptions,
    ranked = false,
  ): Promise<Hypothesis> {
    if (inputIds.length === 0 || inputIds.length > this.#config.maxInputTokens) {
      return Promise.reject(new RangeError(`inputIds must hold 1..${this.#config.maxInputTokens} ids`));
    }
    // The CPU provider's Gather refuses an id outside the embedding table, failing that row's run (and the row
    // alone, step.ts); a GPU's reads whatever lies there and answers garbage. So off the CPU, ids are checked here.
    if (this.#sessions.device.kind !== 'cpu') {
      const { sourceVocabSize, vocabSize } = this.#config;
      const forced = settings.forcedTokenId === NO_FORCED_TOKEN ? [] : [settings.forcedTokenId];
      const outside = (vocab: number) => (id: number) => !Number.isInteger(id) || id < 0 || id >= vocab;
      const bad = inputIds.find(outside(sourceVocabSize)) ?? forced.find(outside(vocabSize));
      if (bad !== undefined) {
        return Promise.reject(new RangeError(`token id ${bad} is outside the vocabulary`));
      }
    }
    const { runs } = this.#search;
    // The graph stops a beam search once numBeams hypotheses are finished (greedy rows are the case of one beam); it
    // forces a first token, suppresses none but `</s>` and forces no last one, so Marian's rows (and any whose
    // generation_config.json names forced_eos_token_id) take the step loop.
    const stopsEarly = settings.numBeams === 1 || settings.earlyStopping;
    const graphFits =
      settings.forcedTokenId !== NO_FORCED_TOKEN &&
      (settings.suppressTokenIds?.length ?? 0) === 0 &&
      settings.forcedEosTokenId === undefined;
    if (runs !== null && !ranked && settings.constraints === undefined && stopsEarly && graphFits) {
      return runs.submit({ inputIds, forcedTokenId: settings.forcedTokenId }, settings, options);
    }
    return this.#generator.submit({ inputIds, settings }, options);
  }

  /** Finish running work, then release the sessions. Idempotent. */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      await this.#generator.close();
      await this.#search.runs?.drained();
      await this.#search.session?.release();
      await releaseSessions(this.#sessions);
    })();
    return this.#closed;
  }

  #settings(
    sourceTokens: number,
    forcedTokenId: number,
    options: TranslateOptions,
  ): SearchSettings & { suppressTokenIds: readonly number[] } {
    const generation = this.#config.generation;
    const pick = <K extends keyof TranslateOptions>(key: K): TranslateOptions[K] => options[key] ?? this.#defaults[key];
    const alternatives = options.alternatives ?? 0;
    if (!Number.isInteger(alternatives) || alternatives < 0) {
      throw new RangeError(`alternatives must be a non-negative integer (got ${alternatives})`);
    }
    const numBeams = Math.max(pick('numBeams') ?? generation.numBeams, alternatives > 0 ? alternatives + 1 : 1);
    // Decoder positions: the start token plus every generated token must fit the position table.
    const requestedMin = pick('minNewTokens') ?? 0;
    // The source-length cap never undercuts an explicit minimum (a benchmark's fixed output length).
    const constraints = options.constraints?.length ? new Constraints(options.constraints) : undefined;
    const maxNewTokens = Math.min(
      (pick('maxNewTokens') ?? generation.maxNewTokens) + (constraints?.tokens ?? 0),
      this.#config.maxPositions - 1,
      pick('capBySourceLength') === true
        ? Math.max(sourceLengthCap(sourceTokens), requestedMin) + (constraints?.tokens ?? 0)
        : Infinity,
    );
    if (constraints && constraints.tokens + 2 > maxNewTokens) {
      throw new RangeError(`constraints of ${constraints.tokens} tokens do not fit a row of ${maxNewTokens}`);
    }
    const minNewTokens = Math.min(requestedMin, maxNewTokens);
    if (!Number.isInteger(numBeams) || numBeams < 1)
      throw new RangeError(`numBeams must be a positive integer (got ${numBeams})`);
    if (!Number.isInteger(maxNewTokens) || maxNewTokens < 1) {
      throw new RangeError(`maxNewTokens must be a positive integer (got ${maxNewTokens})`);
    }
    if (!Number.isInteger(minNewTokens) || minNewTokens < 0)
      throw new RangeError(`minNewTokens must be a non-negative integer`);
    return {
      forcedTokenId,
      strategy: pick('strategy') ?? (numBeams === 1 ? 'greedy' : 'beam'),
      numBeams,
      maxNewTokens,
      minNewTokens,
      lengthPenalty: pick('lengthPenalty') ?? generation.lengthPenalty,
      earlyStopping: pick('earlyStopping') ?? generation.earlyStopping,
      suppressTokenIds: this.#config.suppressTokenIds,
      ...(this.#config.forcedEosTokenId === null ? {} : { forcedEosTokenId: this.#config.forcedEosTokenId }),
      ...(constraints ? { constraints } : {}),
    };
  }
}

async function releaseSessions(sessions: EngineSessions): Promise<void> {
  await sessions.encoder.release();
  await sessions.decoder.release();
  await sessions.cross?.release();
  await sessions.alignment.release();
  if (sessions.kind === 'host') return sessions.beamHead?.release();
  await sessions.deviceHeads.release();
  await sessions.layout.release();
}
