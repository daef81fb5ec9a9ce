/**
 * @module engine/tokens/target-vocabulary — the target side of a Marian export with separate vocabularies
 * (tokenizer_config.json `separate_vocabs: true`). HF's MarianTokenizer reads a translation's ids in
 * `target_vocab.json` and cuts target text (a glossary term) with `target.spm`; tokenizer.json, all transformers.js
 * reads, holds the source side only. The target's tokenizer is that tokenizer.json over the target's vocabulary,
 * each piece scored as target.spm scores it (transformers.js' Marian conversion scores tokenizer.json's pieces from
 * the .spm files the same way).
 */
import { readFileSync } from 'node:fs';
import { ServeError } from '../../../common/errors.js';

type Json = Record<string, unknown>;

/** A piece target.spm does not score (target_vocab.json's own entries): taken only where no scored piece fits. */
const UNSCORED = -100;

/**
 * tokenizer.json for the target side: `source` (the export's tokenizer.json, a Unigram model) with the vocabulary of
 * `vocabFile` in id order, scored by `spmFile`; its added tokens are the source's special tokens (`</s>`, `<unk>`,
 * `<pad>`) at their target ids, and no post-processor (nothing is added around a target).
 * @throws ServeError WORKER_START_FAILED naming the file that is missing, unreadable or disagrees
 */
export function targetTokenizerJson(source: Json, vocabFile: string, spmFile: string): Json {
  const pieces = targetPieces(vocabFile);
  const ids = new Map(pieces.map((piece, id) => [piece, id]));
  const scores = pieceScores(read(spmFile), spmFile);
  const model = source.model as Json | undefined;
  if (model?.type !== 'Unigram') {
    throw new ServeError(
      'WORKER_START_FAILED',
      `tokenizer.json: its model is ${JSON.stringify(model?.type ?? null)}, not the Unigram model a Marian target vocabulary is read into.`,
    );
  }
  const added = (Array.isArray(source.added_tokens) ? source.added_tokens : []) as Json[];
  const specials = added.filter((t) => t.special === true && ids.has(String(t.content)));
  const special = new Set(specials.map((t) => String(t.content)));
  return {
    ...source,
    added_tokens: specials.map((t) => ({ ...t, id: ids.get(String(t.content)) })),
    post_processor: null,
    model: {
      ...model,
      unk_id: ids.get('<unk>') ?? null,
      vocab: pieces.map((piece) => [piece, special.has(piece) ? 0 : (scores.get(piece) ?? UNSCORED)]),
    },
  };
}

/** target_vocab.json's tokens by id. @throws ServeError unless its ids are 0..n−1, each once */
function targetPieces(file: string): string[] {
  let vocab: unknown;
  try {
    vocab = JSON.parse(read(file).toString('utf8'));
  } catch (err) {
    if (err instanceof ServeError) throw err;
    throw new ServeError('WORKER_START_FAILED', `Cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
  const entries = vocab !== null && typeof vocab === 'object' ? Object.entries(vocab) : [];
  const pieces: string[] = [];
  for (const [piece, id] of entries) {
    if (typeof id === 'number' && Number.isInteger(id) && id >= 0 && id < entries.length) pieces[id] = piece;
  }
  if (entries.length === 0 || pieces.filter((p) => p !== undefined).length !== entries.length) {
    throw new ServeError('WORKER_START_FAILED', `${file}: token ids must be 0..n−1, each once (a token → id object).`);
  }
  return pieces;
}

function read(file: string): Buffer {
  try {
    return readFileSync(file);
  } catch (err) {
    throw new ServeError('WORKER_START_FAILED', `Cannot read ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** A SentencePiece model's piece → score: ModelProto's `pieces` (field 1), each a piece (1) and a float score (2). */
function pieceScores(buf: Buffer, file: string): Map<string, number> {
  const scores = new Map<string, number>();
  for (const entry of fields(buf, 0, buf.length, file)) {
    if (entry.field !== 1 || entry.wire !== 2) continue;
    let piece: string | undefined;
    let score = 0;
    for (const inner of fields(buf, entry.start, entry.end, file)) {
      if (inner.field === 1 && inner.wire === 2) piece = buf.toString('utf8', inner.start, inner.end);
      if (inner.field === 2 && inner.wire === 5) score = buf.readFloatLE(inner.start);
    }
    if (piece !== undefined) scores.set(piece, score);
  }
  if (scores.size === 0) throw new ServeError('WORKER_START_FAILED', `${file} holds no SentencePiece pieces.`);
  return scores;
}

/** The protobuf fields of the message in `buf[start, end)`: number, wire type and payload bounds. */
function* fields(buf: Buffer, start: number, end: number, file: string) {
  const varint = (at: number): [number, number] => {
    let value = 0;
    for (let scale = 1, i = at; i < end && scale < 2 ** 63; i++, scale *= 128) {
      value += (buf[i]! & 0x7f) * scale;
      if (buf[i]! < 0x80) return [value, i + 1];
    }
    throw new ServeError('WORKER_START_FAILED', `${file} is not a SentencePiece model (bad protobuf at byte ${at}).`);
  };
  for (let at = start; at < end;) {
    const [tag, next] = varint(at);
    const wire = tag % 8;
    let from = next;
    let to: number;
    if (wire === 0) to = varint(next)[1];
    else if (wire === 1) to = next + 8;
    else if (wire === 5) to = next + 4;
    else if (wire === 2) {
      const [length, payload] = varint(next);
      from = payload;
      to = payload + length;
    } else throw new ServeError('WORKER_START_FAILED', `${file} is not a SentencePiece model (wire type ${wire}).`);
    if (to > end) throw new ServeError('WORKER_START_FAILED', `${file} is cut short (a field runs past its end).`);
    yield { field: Math.floor(tag / 8), wire, start: from, end: to };
    at = to;
  }
}
