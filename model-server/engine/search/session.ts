/**
 * @module engine/search/session — runs the search graph (graph.ts): a batch of rows in, each row's generated
 * tokens out, the whole generation in one onnxruntime run.
 *
 * A run holds its whole batch until the last row ends: rows cannot join or leave it. Several runs may be in flight on
 * one session (onnxruntime runs them on its own threads), which is how a caller keeps the device busy while one run's
 * long rows finish.
 */
import * as ort from 'onnxruntime-node';
import type { ModelConfig } from '../model-config.js';
import { SEARCH_INPUTS, SEARCH_OUTPUTS } from './graph.js';

export interface SearchRow {
  /** Encoder ids, `[__src__] tokens </s>`. */
  inputIds: readonly number[];
  /** The target-language token every row's first generated token is forced to. */
  forcedTokenId: number;
}

/** Settings one run applies to all its rows (the graph's own, `early_stopping`, is fixed when it is built). */
export interface SearchRunSettings {
  numBeams: number;
  /** Generated tokens at most, the forced language token and `</s>` included. */
  maxNewTokens: number;
  /** `</s>` is suppressed until this many tokens exist. */
  minNewTokens: number;
  lengthPenalty: number;
}

export interface SearchResult {
  /** The forced language token first, `</s>` last when the row stopped by itself (as the step loop's `tokenIds`). */
  tokenIds: number[];
  /** Beam search's length-normalised log-probability; 0 for greedy rows. */
  score: number;
}

export class SearchSession {
  readonly #session: ort.InferenceSession;
  readonly #config: ModelConfig;

  private constructor(session: ort.InferenceSession, config: ModelConfig) {
    this.#session = session;
    this.#config = config;
  }

  /** `graph`: graph.ts' result; its external weights are read from its `weightsDir`. */
  static async create(
    graph: { bytes: Uint8Array; weightsDir: string },
    config: ModelConfig,
    options: ort.InferenceSession.SessionOptions,
  ): Promise<SearchSession> {
    const withWeights = {
      ...options,
      extra: { ...options.extra, session: { model_external_initializers_file_folder_path: graph.weightsDir } },
    };
    return new SearchSession(await ort.InferenceSession.create(graph.bytes, withWeights), config);
  }

  /** @throws Error what onnxruntime says when the run fails (the caller decides which rows to retry alone). */
  async run(rows: readonly SearchRow[], settings: SearchRunSettings): Promise<SearchResult[]> {
    const { padTokenId, eosTokenId, vocabSize } = this.#config;
    const batch = rows.length;
    const source = Math.max(...rows.map((r) => r.inputIds.length));
    const ids = new Int32Array(batch * source).fill(padTokenId);
    const mask = new Int32Array(batch * source);
    const forced = new Int32Array(batch);
    rows.forEach((row, b) => {
      row.inputIds.forEach((id, j) => {
        ids[b * source + j] = id;
        mask[b * source + j] = 1;
      });
      // Out of the vocabulary it would force no token at all (the graph compares it with every id): refused.
      if (!(row.forcedTokenId >= 0 && row.forcedTokenId < vocabSize))
        throw new RangeError(`forced token ${row.forcedTokenId} is outside the vocabulary (0..${vocabSize - 1})`);
      forced[b] = row.forcedTokenId;
    });
    const int = (value: number) => new ort.Tensor('int32', Int32Array.of(value), [1]);
    const float = (value: number) => new ort.Tensor('float32', Float32Array.of(value), [1]);
    const I = SEARCH_INPUTS;
    // The operator counts the decoder start token in both lengths.
    const out = await this.#session.run(
      {
        [I.inputIds]: new ort.Tensor('int32', ids, [batch, source]),
        [I.maxLength]: int(settings.maxNewTokens + 1),
        [I.minLength]: int(settings.minNewTokens + 1),
        [I.numBeams]: int(settings.numBeams),
        [I.numReturnSequences]: int(1),
        [I.lengthPenalty]: float(settings.lengthPenalty),
        [I.repetitionPenalty]: float(1),
        [I.forcedTokenIds]: new ort.Tensor('int32', forced, [batch]),
        [I.attentionMask]: new ort.Tensor('int32', mask, [batch, source]),
      },
      [SEARCH_OUTPUTS.sequences, SEARCH_OUTPUTS.scores],
    );
    const sequences = out[SEARCH_OUTPUTS.sequences]!;
    const scores = out[SEARCH_OUTPUTS.scores]!.data as Float32Array;
    const length = Number(sequences.dims[2]);
    const data = sequences.data as Int32Array;
    const results = rows.map((_, b) => {
      const tokenIds: number[] = [];
      // Position 0 is the decoder start token; a finished row is filled with `</s>` (the graph's pad id).
      for (let j = 1; j < length; j++) {
        const id = data[b * length + j]!;
        tokenIds.push(id);
        if (id === eosTokenId) break;
      }
      return { tokenIds, score: settings.numBeams > 1 ? scores[b]! : 0 };
    });
    sequences.dispose();
    out[SEARCH_OUTPUTS.scores]!.dispose();
    return results;
  }

  release(): Promise<void> {
    return this.#session.release();
  }
}
