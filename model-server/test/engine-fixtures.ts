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
  return {
    async translate(row: TranslateRow, maxNewTokens: number): Promise<ReferenceTranslation> {
      const kwargs: Record<string, unknown> = { src_lang: row.srcLang, tgt_lang: row.tgtLang };
      const inputs = tokenizer._build_translation_inputs(row.text, { truncation: true }, kwargs);
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
    dispose: (): Promise<void> => model.dispose(),
  };
}
