/**
 * @module bench/lib/workload — the requests every system under test receives: deterministic sentences of mixed
 * length and the language pairs they travel, so each arm of a comparison sees exactly the same sequence.
 */
import { readFileSync } from 'node:fs';
import { DEMO_LANGUAGES } from '../../model-server/tools/demo-model/presets.js';

/** The 14 languages of the seed's setup_config.json, in its order (the generated models cover exactly these). */
export const SEED_LANGUAGES = DEMO_LANGUAGES;

/** Languages served, from a setup_config.json (`{"cuda_id": {lang: device}}`). */
export function languagesOf(setupConfigPath: string): string[] {
  const parsed = JSON.parse(readFileSync(setupConfigPath, 'utf8')) as { cuda_id?: Record<string, string> };
  const langs = Object.keys(parsed.cuda_id ?? {});
  if (langs.length === 0) throw new Error(`${setupConfigPath}: cuda_id lists no language`);
  return langs;
}

const WORDS = (
  'the a translation server answers every request in order while batches grow with load and the model ' +
  'reads each sentence once then writes its words one step at a time people send short notes long ' +
  'reports questions greetings addresses product names dates numbers and whole paragraphs from support ' +
  'tickets emails menus manuals contracts news articles weather forecasts train schedules'
).split(' ');

/** Source lengths in words, cycled: short chat lines to long sentences (mean 13.5 words). */
export const SOURCE_WORD_LENGTHS = [4, 8, 12, 16, 20, 21] as const;

/** One translation request body (the router's contract). */
export interface TranslationJob {
  src_lang: string;
  tgt_lang: string;
  src_text: string;
}

/** Deterministic xorshift32 in [0, 1). */
function rng(seed: number): () => number {
  let x = seed >>> 0 || 1;
  return () => {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    return x / 0x1_0000_0000;
  };
}

/** Sentence number `i`: its length cycles through SOURCE_WORD_LENGTHS, its words are seeded by i. */
export function sentence(i: number): string {
  const length = SOURCE_WORD_LENGTHS[i % SOURCE_WORD_LENGTHS.length]!;
  const next = rng(0x5eed + i * 7919);
  const words: string[] = [];
  for (let w = 0; w < length; w++) words.push(WORDS[Math.floor(next() * WORDS.length)]!);
  const text = words.join(' ');
  return `${text[0]!.toUpperCase()}${text.slice(1)}.`;
}

/**
 * Job number `i` of a workload over `targets`: the target cycles through them, the source language is the
 * next language in the list that is not the target, the text is `sentence(i)`.
 */
export function job(
  i: number,
  targets: readonly string[],
  sources: readonly string[] = SEED_LANGUAGES,
): TranslationJob {
  const tgt = targets[i % targets.length]!;
  let src = sources[(i + 1) % sources.length]!;
  if (src === tgt) src = sources[(i + 2) % sources.length]!;
  return { src_lang: src, tgt_lang: tgt, src_text: sentence(i) };
}

/** The first `count` sentences: a pre-formed batch with the same length mix as the served workload. */
export function sentences(count: number, offset = 0): string[] {
  return Array.from({ length: count }, (_, i) => sentence(offset + i));
}
