/**
 * @module model-server/store/export-check — whether a store entry's model folder is an export a translation worker
 * can load, checked at registration before anything is registered: the files a worker would read exist and agree
 * with each other. A refusal names the file. The worker's own load (engine/) checks again, with the graphs.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { ServeError } from '../../common/errors.js';
import {
  isoAlias,
  LANGUAGE_TOKEN_EXAMPLE,
  LANGUAGE_TOKENS,
  marianAlias,
  marianTargetTokens,
} from '../../common/language-codes.js';
import { outputDims } from './onnx-outputs.js';

type Json = Record<string, unknown>;

/**
 * Folders already found sound, with their files' modification times and the targets they write (14 languages share
 * one folder: its tokenizer is read once).
 */
const sound = new Map<string, { stamp: string; targets: ReadonlySet<string> }>();

/**
 * Check the export in `modelDir`, and that it writes `target` (the model name a translation entry is registered
 * under: its target language, in ISO 639-1 or the model's own code).
 * @throws ServeError BAD_REQUEST naming the file that is missing, unreadable or disagrees with the others or the target
 */
export function checkExport(modelDir: string, target: string): void {
  const stamp = stampOf(modelDir);
  const targets = sound.get(modelDir)?.stamp === stamp ? sound.get(modelDir)!.targets : readExport(modelDir, stamp);
  if (!targets.has(target)) {
    const file = path.join(modelDir, targets.size === 1 ? 'tokenizer_config.json' : 'tokenizer.json');
    throw new ServeError(
      'BAD_REQUEST',
      `Model ${file} does not write "${target}", the language this model is registered for; it writes: ${[...targets].sort().join(', ')}.`,
    );
  }
}

/** Check the files and return the target languages they write. */
function readExport(modelDir: string, stamp: string): ReadonlySet<string> {
  const config = readJson(modelDir, 'config.json');
  const tokenizerConfig = readJson(modelDir, 'tokenizer_config.json');
  const tokenizer = readJson(modelDir, 'tokenizer.json');
  const refuse = (file: string, problem: string): never => {
    throw new ServeError('BAD_REQUEST', `Model ${path.join(modelDir, file)} ${problem}`);
  };
  if (config.is_encoder_decoder !== true) refuse('config.json', 'is not an encoder-decoder model.');
  const vocabSize = config.vocab_size;
  if (typeof vocabSize !== 'number' || !Number.isInteger(vocabSize) || vocabSize < 1) {
    refuse('config.json', `has no "vocab_size" (got ${JSON.stringify(vocabSize ?? null)}).`);
  }
  const className = String(tokenizerConfig.tokenizer_class ?? '').replace(/Fast$/, '');
  const pattern = LANGUAGE_TOKENS[className];
  if (pattern === undefined) {
    refuse(
      'tokenizer_config.json',
      `names tokenizer_class ${JSON.stringify(tokenizerConfig.tokenizer_class ?? null)}, not one of ${Object.keys(LANGUAGE_TOKENS).join(', ')}.`,
    );
  }
  const added = (Array.isArray(tokenizer.added_tokens) ? tokenizer.added_tokens : []) as Json[];
  const languages = pattern ? added.filter((t) => t.special === true && pattern.test(String(t.content))) : [];
  if (pattern && languages.length === 0) {
    refuse(
      'tokenizer.json',
      `has no language tokens (such as ${LANGUAGE_TOKEN_EXAMPLE[className]}) for its ${className}.`,
    );
  }
  if (
    pattern === null &&
    (typeof tokenizerConfig.source_lang !== 'string' || typeof tokenizerConfig.target_lang !== 'string')
  ) {
    refuse('tokenizer_config.json', 'names no pair (source_lang and target_lang) for its MarianTokenizer.');
  }
  const vocab = (tokenizer.model as Json | undefined)?.vocab;
  // Unigram's vocabulary is a list (ids are places), BPE's and WordPiece's an object of token → id.
  const vocabIds = Array.isArray(vocab) ? [vocab.length - 1] : Object.values((vocab ?? {}) as Json).map(Number);
  const top = [...vocabIds, ...added.map((t) => Number(t.id))].reduce((a, b) => Math.max(a, b), -1);
  if (top >= (vocabSize as number)) {
    refuse('tokenizer.json', `has token id ${top}, past config.json's vocab_size ${vocabSize as number}.`);
  }
  const decoderVocab = decoderVocabulary(modelDir, config, tokenizerConfig, pattern === null, refuse);
  // The token ids generation starts, ends and pads with index the decoder's logits: one past them reads garbage.
  const generation = existsSync(path.join(modelDir, 'generation_config.json'))
    ? readJson(modelDir, 'generation_config.json')
    : {};
  for (const [file, json] of [
    ['config.json', config],
    ['generation_config.json', generation],
  ] as const) {
    for (const key of TOKEN_ID_KEYS) {
      const id = json[key];
      if (typeof id === 'number' && id >= decoderVocab.size) {
        refuse(file, `names ${key} ${id}, past config.json's ${decoderVocab.key} ${decoderVocab.size}.`);
      }
    }
  }
  // Both embeddings take pad_token_id as their padding row (HF), and the engine pads encoder rows with it.
  if (typeof config.pad_token_id === 'number' && config.pad_token_id >= (vocabSize as number)) {
    refuse('config.json', `names pad_token_id ${config.pad_token_id}, past its vocab_size ${vocabSize as number}.`);
  }
  const tokens = new Set([
    ...(Array.isArray(vocab) ? vocab.map((v) => String((v as unknown[])[0])) : Object.keys((vocab ?? {}) as Json)),
    ...added.map((t) => String(t.content)),
  ]);
  const named = Array.isArray(tokenizerConfig.additional_special_tokens)
    ? tokenizerConfig.additional_special_tokens
    : [];
  const absent = named
    .map((t) => (typeof t === 'string' ? t : String((t as Json).content)))
    .find((t) => !tokens.has(t));
  if (absent !== undefined) {
    refuse(
      'tokenizer.json',
      `has no token ${JSON.stringify(absent)}, which tokenizer_config.json names among its special tokens.`,
    );
  }
  checkGraphs(modelDir, decoderVocab);
  const targets = new Set<string>();
  // A multilingual Marian model writes the targets of its `>>xx<<` tokens; another, tokenizer_config.json's one.
  const marianTargets = pattern === null ? marianTargetTokens(tokenizer) : new Map<string, string>();
  if (pattern === null && marianTargets.size === 0) targets.add(String(tokenizerConfig.target_lang));
  for (const code of marianTargets.keys()) {
    targets.add(code);
    const alias = marianAlias(code);
    if (alias !== undefined) targets.add(alias);
  }
  for (const token of languages) {
    const code = pattern!.exec(String(token.content))![1]!;
    targets.add(code);
    const alias = isoAlias(code);
    if (alias !== undefined) targets.add(alias);
  }
  sound.set(modelDir, { stamp, targets });
  return targets;
}

/** The token ids config.json and generation_config.json may name (HF's names). */
const TOKEN_ID_KEYS = [
  'pad_token_id',
  'bos_token_id',
  'eos_token_id',
  'decoder_start_token_id',
  'forced_bos_token_id',
  'forced_eos_token_id',
] as const;

/** The decoder's vocabulary: its size and the config.json key that says it. */
interface DecoderVocabulary {
  size: number;
  key: 'vocab_size' | 'decoder_vocab_size';
}

/**
 * The decoder's vocabulary as HF's MarianMTModel sizes it (`decoder_vocab_size` where the embeddings are not shared,
 * else `vocab_size`), checked against the tokenizer's: a Marian tokenizer with `separate_vocabs` reads target ids
 * in target_vocab.json (and cuts target text with target.spm), which must fill that vocabulary; any other has one
 * vocabulary for both sides.
 */
function decoderVocabulary(
  modelDir: string,
  config: Json,
  tokenizerConfig: Json,
  marian: boolean,
  refuse: (file: string, problem: string) => never,
): DecoderVocabulary {
  const shared = config.share_encoder_decoder_embeddings !== false;
  const size = shared ? config.vocab_size : (config.decoder_vocab_size ?? config.vocab_size);
  if (typeof size !== 'number' || !Number.isInteger(size) || size < 1) {
    refuse('config.json', `has no positive "decoder_vocab_size" (got ${JSON.stringify(size)}).`);
  }
  const vocab = { size: size as number, key: shared ? 'vocab_size' : 'decoder_vocab_size' } as const;
  if (!marian || tokenizerConfig.separate_vocabs !== true) {
    if (vocab.size !== config.vocab_size) {
      refuse(
        'config.json',
        `names decoder_vocab_size ${vocab.size}, not its vocab_size ${config.vocab_size as number}, but tokenizer_config.json has one vocabulary (no separate_vocabs).`,
      );
    }
    return vocab;
  }
  if (shared) {
    refuse(
      'config.json',
      'shares one embedding between encoder and decoder (share_encoder_decoder_embeddings is not false), but tokenizer_config.json sets separate_vocabs.',
    );
  }
  if (!existsSync(path.join(modelDir, 'target.spm'))) {
    refuse('target.spm', 'is missing (tokenizer_config.json sets separate_vocabs).');
  }
  const target = readJson(modelDir, 'target_vocab.json');
  const ids = new Set(Object.values(target));
  const dense = [...ids].every((id) => typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < ids.size);
  if (!dense || ids.size !== Object.keys(target).length) {
    refuse('target_vocab.json', 'does not give its tokens the ids 0..n−1, each once.');
  }
  if (ids.size !== vocab.size) {
    refuse('target_vocab.json', `has ${ids.size} tokens, not config.json's ${vocab.key} ${vocab.size}.`);
  }
  return vocab;
}

/**
 * Each encoder graph has its decoder (merged or plain) of the same weight type; at least one encoder is there; each
 * decoder's logits, where their width is declared, are as wide as the decoder's vocabulary.
 */
function checkGraphs(modelDir: string, vocab: DecoderVocabulary): void {
  const onnxDir = path.join(modelDir, 'onnx');
  const files = existsSync(onnxDir) ? readdirSync(onnxDir) : [];
  const encoders = files.filter((f) => /^encoder_model.*\.onnx$/.test(f));
  if (encoders.length === 0) {
    throw new ServeError('BAD_REQUEST', `Model ${path.join(onnxDir, 'encoder_model.onnx')} is missing.`);
  }
  for (const encoder of encoders) {
    const suffix = encoder.slice('encoder_model'.length, -'.onnx'.length);
    if (!files.includes(`decoder_model_merged${suffix}.onnx`) && !files.includes(`decoder_model${suffix}.onnx`)) {
      throw new ServeError(
        'BAD_REQUEST',
        `Model ${path.join(onnxDir, `decoder_model_merged${suffix}.onnx`)} is missing (${encoder} has no decoder).`,
      );
    }
  }
  for (const decoder of files.filter((f) => /^decoder_model.*\.onnx$/.test(f))) {
    const file = path.join(onnxDir, decoder);
    let width: number | string | undefined;
    try {
      width = outputDims(file, 'logits')?.at(-1);
    } catch (err) {
      throw new ServeError('BAD_REQUEST', `Model ${file} cannot be read: ${(err as Error).message}`, { cause: err });
    }
    if (typeof width === 'number' && width !== vocab.size) {
      throw new ServeError(
        'BAD_REQUEST',
        `Model ${file} has logits ${width} wide, not config.json's ${vocab.key} ${vocab.size}.`,
      );
    }
  }
}

function readJson(modelDir: string, name: string): Json {
  const file = path.join(modelDir, name);
  if (!existsSync(file)) throw new ServeError('BAD_REQUEST', `Model ${file} is missing.`);
  try {
    const value: unknown = JSON.parse(readFileSync(file, 'utf8'));
    if (value === null || typeof value !== 'object' || Array.isArray(value)) throw new Error('not a JSON object');
    return value as Json;
  } catch (err) {
    throw new ServeError('BAD_REQUEST', `Model ${file} cannot be read: ${(err as Error).message}`, { cause: err });
  }
}

function stampOf(modelDir: string): string {
  const names = [
    'config.json',
    'generation_config.json',
    'tokenizer_config.json',
    'tokenizer.json',
    'target_vocab.json',
    'target.spm',
    'onnx',
  ];
  return names.map((n) => (existsSync(path.join(modelDir, n)) ? statSync(path.join(modelDir, n)).mtimeMs : -1)).join();
}
