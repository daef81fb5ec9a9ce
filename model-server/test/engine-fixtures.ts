/**
 * @module model-server/test/engine-fixtures — what the engine's tests (engine, webgpu, float16, quantize) share:
 * seeded rows of demo-language text, and transformers.js on the same files as the reference they are held to.
 */
import { DEMO_LANGUAGES } from '../tools/demo-model/index.js';
import { Mulberry32 } from '../tools/demo-model/prng.js';
import type { TranslateRow } from '../engine/engine.js';

/**
 * `count` rows of 1–`maxWords` words drawn from `words`, source and target languages mixed, from a fixed seed
 * (the same seed gives the same rows: languages, then length, then words, in that order per row).
 */
export function seededRows(count: number, seed: number, words: readonly string[], maxWords: number): TranslateRow[] {
  const rng = new Mulberry32(seed);
  const pick = <T>(list: readonly T[]) => list[Math.floor(rng.next() * list.length)]!;
  return Array.from({ length: count }, () => ({
    srcLang: pick(DEMO_LANGUAGES),
    tgtLang: pick(DEMO_LANGUAGES),
    text: Array.from({ length: 1 + Math.floor(rng.next() * maxWords) }, () => pick(words)).join(' '),
  }));
}

/** What transformers.js makes of one row: its input ids, its generated ids (decoder start included), its text. */
export interface ReferenceTranslation {
  inputIds: number[];
  tokenIds: number[];
  text: string;
}

/**
 * transformers.js (local files only) on the model `name` under `root`, in `dtype`: greedy generation of up to
 * `maxNewTokens` tokens for one row at a time. `dispose()` frees its sessions.
 */
export async function transformersReference(root: string, name: string, dtype: 'fp32' | 'q8') {
  const { env, AutoTokenizer, AutoModelForSeq2SeqLM } = await import('@huggingface/transformers');
  env.allowRemoteModels = false;
  env.allowLocalModels = true;
  env.localModelPath = root;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- M2M100Tokenizer's translation helper is not in the types
  const tokenizer: any = await AutoTokenizer.from_pretrained(name);
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const model: any = await AutoModelForSeq2SeqLM.from_pretrained(name, { dtype });
  // Marian's tokenizer has no language tokens: a model is one pair, nothing is forced, and a multilingual one reads
  // its target from the text, as its users write it (`>>fra<< text`).
  const encode = (row: TranslateRow, kwargs: Record<string, unknown>) =>
    '_build_translation_inputs' in tokenizer
      ? tokenizer._build_translation_inputs(row.text, { truncation: true }, kwargs)
      : tokenizer(tokenizer.supported_language_codes?.length ? `>>${row.tgtLang}<< ${row.text}` : row.text, {
          truncation: true,
        });
  return {
    async translate(row: TranslateRow, maxNewTokens: number): Promise<ReferenceTranslation> {
      const kwargs: Record<string, unknown> = { src_lang: row.srcLang, tgt_lang: row.tgtLang };
      const inputs = encode(row, kwargs);
      const output = await model.generate({
        ...inputs,
        forced_bos_token_id: kwargs.forced_bos_token_id,
        max_new_tokens: maxNewTokens,
        num_beams: 1,
        do_sample: false,
      });
      const tokenIds = Array.from(output.data as BigInt64Array, Number);
      return {
        inputIds: Array.from(inputs.input_ids.data as BigInt64Array, Number),
        tokenIds,
        text: tokenizer.decode(tokenIds, { skip_special_tokens: true }),
      };
    },
    /**
     * Beam search over transformers.js' logits, one row, the decoder run on the whole prefix each step (no cache):
     * HF's BeamSearchScorer as decoding.ts documents it (2·numBeams candidates, a `</s>` ranked below numBeams
     * dropped, scores sum(logprob) / length (length penalty 1), done at numBeams finished with `earlyStopping`, else
     * once the best live beam cannot beat the worst finished one), the forced first token, forced_eos_token_id at the
     * last step and generation_config's one-token bad words as HF's processors apply them (transformers.js' own `num_beams` is
     * greedy). Returns the best hypothesis' tokens after the decoder start token.
     */
    async beam(row: TranslateRow, numBeams: number, maxNewTokens: number, earlyStopping = true): Promise<number[]> {
      const { Tensor } = await import('@huggingface/transformers');
      const kwargs: Record<string, unknown> = { src_lang: row.srcLang, tgt_lang: row.tgtLang };
      const inputs = encode(row, kwargs);
      const forced = kwargs.forced_bos_token_id as number | undefined;
      const config = model.generation_config;
      const eos = Number(config.eos_token_id);
      const start = Number(config.decoder_start_token_id);
      const banned = new Set<number>((config.bad_words_ids ?? []).map((w: number[]) => w[0]));
      const forcedEos = config.forced_eos_token_id ?? null;
      let live: { tokens: number[]; logprob: number }[] = [{ tokens: [], logprob: 0 }];
      const finished: { tokens: number[]; score: number }[] = [];
      const keep = (tokens: number[], logprob: number, length: number) => {
        finished.push({ tokens, score: logprob / length });
        finished.sort((x, y) => y.score - x.score);
        finished.splice(numBeams);
      };
      for (let step = 0; step < maxNewTokens; step++) {
        const candidates: { tokens: number[]; logprob: number; token: number }[] = [];
        for (const hyp of live) {
          const prefix = [start, ...hyp.tokens];
          const out = await model({
            ...inputs,
            decoder_input_ids: new Tensor('int64', BigInt64Array.from(prefix, BigInt), [1, prefix.length]),
          });
          const vocab = out.logits.dims[2] as number;
          const last = (out.logits.data as Float32Array).subarray((prefix.length - 1) * vocab, prefix.length * vocab);
          if (step === 0 && forced !== undefined) {
            candidates.push({ tokens: hyp.tokens, logprob: hyp.logprob, token: forced });
            continue;
          }
          // HF's ForcedEOSTokenLogitsProcessor: at the last step every token but forced_eos_token_id is −inf, it 0.
          if (step === maxNewTokens - 1 && forcedEos !== null) {
            candidates.push({ tokens: hyp.tokens, logprob: hyp.logprob, token: Number(forcedEos) });
            continue;
          }
          let max = -Infinity;
          for (const v of last) max = Math.max(max, v);
          let sum = 0;
          for (const v of last) sum += Math.exp(v - max);
          const norm = max + Math.log(sum);
          last.forEach((v, token) => {
            if (!banned.has(token)) candidates.push({ tokens: hyp.tokens, logprob: hyp.logprob + v - norm, token });
          });
        }
        candidates.sort((x, y) => y.logprob - x.logprob || x.token - y.token);
        const next: typeof live = [];
        candidates.slice(0, 2 * numBeams).forEach((c, rank) => {
          const tokens = [...c.tokens, c.token];
          if (c.token !== eos) {
            if (next.length < numBeams) next.push({ tokens, logprob: c.logprob });
          } else if (rank < numBeams) keep(tokens, c.logprob, tokens.length);
        });
        live = next;
        const full = finished.length >= numBeams;
        const unbeatable =
          full && live.length > 0 && finished.at(-1)!.score >= live[0]!.logprob / live[0]!.tokens.length;
        if (live.length === 0 || (full && (earlyStopping || unbeatable))) break;
        if (step === maxNewTokens - 1) for (const hyp of live) keep(hyp.tokens, hyp.logprob, hyp.tokens.length + 1);
      }
      return finished[0]!.tokens;
    },
    /** Text of token ids, specials skipped (as a translation's). */
    decode: (ids: number[]): string => tokenizer.decode(ids, { skip_special_tokens: true }),
    dispose: (): Promise<void> => model.dispose(),
  };
}
