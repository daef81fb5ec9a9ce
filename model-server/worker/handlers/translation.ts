/**
 * @module worker/handlers/translation — the translation handler (the seed's handler.py): a sentence
 * (protocol.ts `SentenceItem`) sent to model `{tgt_lang}` → `{"translated"}`, on a TranslationEngine.
 *
 * One engine per worker serves every language its tokenizer knows. Batches that arrive while another is
 * still generating are not queued behind it: their rows start at the engine's next step boundary and share its
 * decoder runs at once or after catching up (engine/loop/generate.ts), and each row is answered as soon as it finishes
 * (the engine's single step loop guarantees the sessions never run two generations at once).
 *
 * Nothing is cut silently. The frontend sends one sentence per job (translation/translation-plan.ts); a sentence the
 * model cannot read whole (more tokens than its input window) is split here, where the tokenizer is, at its most
 * natural boundaries (model-server/text/split-long.ts: clause punctuation, then whitespace, then characters), each
 * part is its own engine row, and the parts' translations are rejoined.
 */
import { targetOf } from '../../../common/config/setup-config.js';
import { ServeError } from '../../../common/errors.js';
import { type PreparedRow, type TranslateOptions, TranslationEngine, type WordAlignment } from '../../engine/engine.js';
import type { Logger } from '../../../common/logger.js';
import type { BatchItem, DeviceInfo, LoadedModel, SentenceItem, StepCounters } from '../../protocol.js';
import { joinAlternatives } from '../../text/alternatives.js';
import { joinTranslations } from '../../text/segment.js';
import type { Segments } from '../../text/segments.js';
import { splitLongSentenceAsync } from '../../text/split-long.js';

/**
 * Texts up to this many characters are tokenized whole in one go (~8 µs a character: about 16 ms); longer ones go
 * straight to the sliced splitter, which returns them whole when they fit.
 */
const WHOLE_TEXT_CHARS = 2_048;
/** Longest stretch of text preparation between two turns of the worker's event loop, ms. */
const PREPROCESS_SLICE_MS = 10;
import type { Handler, HandlerContext } from './base.js';

export interface TranslationOutput {
  translated: string;
  /** With `alternatives`: beam search's score of the translation. */
  score?: number;
  /** Asked for with `alternatives`: other translations from the beam, best first, with their scores. */
  alternatives?: { text: string; score: number }[];
  /**
   * Asked for with `align`: the word alignment of `translated` to the sentence (engine/alignment.ts `WordAlignment`).
   * Absent when the model gives none or the sentence was split to fit the window.
   */
  alignment?: WordAlignment;
}

/** A request ready to generate, with the job id a `cancel` names it by. */
export interface TranslationInput {
  id: string;
  tgtLang: string;
  /** One row per part of the text that fits the model's window (one, unless the text was longer). */
  rows: PreparedRow[];
  /** How the parts rejoin (their separators); undefined when the text is one row. */
  parts: Segments | undefined;
  /** Scheduled as bulk work in the engine (BatchItem.bulk). */
  bulk: boolean;
  /** Per row, the token ids of the glossary terms it must contain (empty: none). */
  constraints: number[][][];
  /** Alternatives asked for (0: none). */
  alternatives: number;
  /** The text, when its word alignment is asked for. */
  alignSource?: string;
}

export class TranslationHandler implements Handler<TranslationInput, TranslationOutput, SentenceItem> {
  #engine: TranslationEngine | null = null;
  /**
   * Jobs being prepared, generating or waiting in the engine, by id: added as their preparation starts, removed once
   * they settle. A cancel during a long text's sliced preparation stops it there.
   */
  readonly #running = new Map<string, AbortController>();
  #options: TranslateOptions = {};
  #log: Logger | null = null;
  #stepListener: (() => void) | null = null;

  async initialize(ctx: HandlerContext): Promise<DeviceInfo> {
    const { numBeams, maxNewTokens, minNewTokens, intraOpThreads, modelDtype, generation } = ctx.options;
    // maxNewTokens is the absolute cap; each row is also capped by its source length (engine.ts, sourceLengthCap).
    this.#options = { numBeams, maxNewTokens, capBySourceLength: true, ...(minNewTokens ? { minNewTokens } : {}) };
    this.#log = ctx.log;
    this.#engine = await TranslationEngine.load({
      modelDir: ctx.modelDir,
      device: ctx.device,
      dtype: modelDtype ?? 'auto',
      search: generation ?? 'auto',
      intraOpThreads,
      onStep: () => this.#stepListener?.(),
    });
    const engine = this.#engine;
    ctx.log.info(
      {
        modelDir: ctx.modelDir,
        device: engine.device,
        dtype: engine.dtypeChoice,
        decoder: engine.decoderKind,
        generation: engine.generation,
        joinable: engine.joinable,
        languages: engine.languages().length,
      },
      'translation engine loaded',
    );
    if (engine.device.fallbackReason !== undefined) {
      ctx.log.warn({ reason: engine.device.fallbackReason }, 'requested GPU unavailable: running on the CPU');
    }
    return engine.device;
  }

  languages(): string[] {
    return this.#requireEngine().languages();
  }

  dtype(): string {
    return this.#requireEngine().dtype;
  }

  model(): LoadedModel {
    const engine = this.#requireEngine();
    return { family: engine.family, weightsBytes: engine.weightsBytes };
  }

  /**
   * Sequences the engine steps at once: its decoder rows ÷ the beam width. The frontend keeps no more jobs than
   * this in flight here, so every job it sends starts at the engine's next step boundary instead of waiting in it.
   */
  capacity(): number {
    const engine = this.#requireEngine();
    return Math.max(1, Math.floor(engine.maxBatchRows / Math.max(1, this.#options.numBeams ?? 1)));
  }

  steps(): StepCounters {
    const stats = this.#requireEngine().stats();
    return {
      runs: stats.decoderRuns,
      rows: stats.decoderRows,
      cancelledRows: stats.cancelledRows,
      cappedRows: stats.cappedRows,
      failedRows: stats.failed,
    };
  }

  liveRows(): number {
    return this.#requireEngine().liveRows;
  }

  onStep(listener: () => void): void {
    this.#stepListener = listener;
  }

  /**
   * Cancel the named jobs the engine holds: each leaves the engine (at once if waiting, at the next step boundary
   * if generating) and is answered with `error`. Other ids are ignored.
   */
  cancel(ids: readonly string[], error: ServeError): void {
    for (const id of ids) this.#running.get(id)?.abort(error);
  }

  /**
   * One sentence with tgt_lang = the model name, as the frontend's plan made it from a request checked at its
   * edge (protocol.ts `SentenceItem`), so not checked again here. A text longer than `WHOLE_TEXT_CHARS` is cut into
   * pieces that fit the model's window (text/split-long.ts) a slice of time at a time, so that a long text never
   * holds the engine's step loop, which runs on this thread, for more than a few milliseconds at once.
   * The job can be cancelled from here on (`Handler.cancel`): a cancel that found no job would leave its rows to
   * generate to the end for nobody.
   * @throws ServeError UNKNOWN_LANGUAGE, or BAD_REQUEST for a glossary term the model cannot write (the engine's)
   */
  async preprocess(item: BatchItem<SentenceItem>): Promise<TranslationInput> {
    const controller = new AbortController();
    this.#running.set(item.id, controller);
    try {
      return await this.#prepare(item, controller.signal);
    } catch (err) {
      if (this.#running.get(item.id) === controller) this.#running.delete(item.id);
      throw err;
    }
  }

  async #prepare(item: BatchItem<SentenceItem>, signal: AbortSignal): Promise<TranslationInput> {
    const { srcLang, text, terms = [], alternatives = 0, align } = item.body;
    const engine = this.#requireEngine();
    // The model is its target language, or a pair's entry (`en-de`) translating into its target.
    const tgtLang = targetOf(item.model);
    const bulk = item.bulk === true;
    // Each row is held to the terms the plan found inside its part of the text (their spans). Every term is written
    // as ids first, so one the model cannot write fails the job before any work.
    const termIds = terms.map(([, target]) => engine.encodeTerm(target));
    const termsIn = (start = 0, end = text.length) =>
      termIds.filter((_, t) => terms[t]![2].some(([from, to]) => from >= start && to <= end));
    const request = { id: item.id, tgtLang, bulk, alternatives, ...(align === true ? { alignSource: text } : {}) };
    if (text.length <= WHOLE_TEXT_CHARS) {
      const whole = engine.prepare({ srcLang, text, tgtLang });
      if (!whole.truncated) return { ...request, rows: [whole], parts: undefined, constraints: [termsIn()] };
    } else {
      // Both languages checked before any work on the text.
      engine.prepare({ srcLang, text: '', tgtLang });
    }
    // Each piece's row is kept from the check that it fits, so no text is tokenized a third time.
    const rowOf = new Map<string, PreparedRow>();
    const limit = engine.config.maxInputTokens - 2;
    const measure = (piece: string): number => {
      if (!/\S/u.test(piece)) return 0; // whitespace joins the pieces' words at no cost (SentencePiece's ▁)
      const row = engine.prepare({ srcLang, text: piece, tgtLang });
      rowOf.set(piece, row);
      return row.truncated ? limit + 1 : row.inputIds.length - 2;
    };
    const parts: Segments = await splitLongSentenceAsync(text, measure, limit, {
      sliceMs: PREPROCESS_SLICE_MS,
      signal,
    });
    const rows = parts.pieces.map((piece) => rowOf.get(piece) ?? engine.prepare({ srcLang, text: piece, tgtLang }));
    let at = 0; // the parts' spans of the text: each part's own [start, end)
    const constraints = parts.pieces.map((p, i) => termsIn((at += parts.separators[i]!.length), (at += p.length)));
    return { ...request, rows, parts, constraints };
  }

  async inference(
    inputs: TranslationInput[],
    emit: (index: number, result: TranslationOutput | ServeError) => void,
  ): Promise<void> {
    const engine = this.#requireEngine();
    await Promise.all(
      inputs.map(async ({ id, tgtLang, rows, parts, bulk, constraints, alternatives, alignSource }, index) => {
        // Made when its preparation started (aborted already when a cancel came since).
        const controller = this.#running.get(id) ?? new AbortController();
        try {
          // A long text's parts generate side by side; one cancel stops them all. No constraints ([]) and no
          // alternatives (0) are what the engine takes for none. Only a whole text is aligned (below), and its row
          // keeps its encoder states for that.
          const align = alignSource !== undefined && parts === undefined;
          const translations = await Promise.all(
            rows.map((row, r) =>
              engine.generate(
                row,
                { ...this.#options, bulk, constraints: constraints[r], alternatives, align },
                controller.signal,
              ),
            ),
          );
          for (const translation of translations) {
            if (!translation.capped) continue;
            // Not an error (the client gets what was generated), but a translation that may be cut short.
            this.#log?.warn(
              {
                id,
                inputTokens: translation.inputTokens,
                generatedTokens: translation.generatedTokens,
                maxNewTokens: translation.maxNewTokens,
              },
              'translation stopped at its token cap before </s>',
            );
          }
          const join = (texts: string[]) => (parts === undefined ? texts[0]! : joinTranslations(parts, texts, tgtLang));
          const output: TranslationOutput = { translated: join(translations.map((t) => t.text)) };
          if (alternatives > 0) {
            output.score = translations.reduce((sum, t) => sum + t.score, 0);
            output.alternatives = joinAlternatives(translations, alternatives, join);
          }
          // One row: the alignment refers to the text as given (a split text's parts are rejoined, so none).
          if (align) {
            const alignment = await engine.align(alignSource, rows[0]!, translations[0]!);
            if (alignment !== null) output.alignment = alignment;
          }
          emit(index, output);
        } catch (err) {
          controller.abort(err); // the other parts of a long text are no use now
          if (err instanceof ServeError) return emit(index, err);
          // What TorchServe answers a handler exception with; the cause stays in our log only.
          this.#log?.error({ err }, 'translation failed');
          emit(index, new ServeError('PREDICTION_FAILED', undefined, { cause: err }));
        } finally {
          // A frontend reusing an id later must not reach this job's controller.
          if (this.#running.get(id) === controller) this.#running.delete(id);
        }
      }),
    );
  }

  postprocess(output: TranslationOutput): unknown {
    return output;
  }

  async close(): Promise<void> {
    const engine = this.#engine;
    this.#engine = null;
    await engine?.close();
  }

  #requireEngine(): TranslationEngine {
    if (this.#engine === null) throw new ServeError('INTERNAL', 'Translation handler used before initialize.');
    return this.#engine;
  }
}
