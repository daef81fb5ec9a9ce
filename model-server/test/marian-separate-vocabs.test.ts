/**
 * Marian exports whose source and target vocabularies are separate (tokenizer_config.json `separate_vocabs`,
 * config.json `decoder_vocab_size`, `target_vocab.json` and `target.spm` beside tokenizer.json) served by a real model
 * server: held to transformers.js' token ids decoded with the target vocabulary (transformers.js reads tokenizer.json,
 * the source's, only), greedy and beam 2, alone and batched; the copy stand-in, whose target vocabulary is its source's
 * in another order, answers its input, which it does only when its ids are read in the target vocabulary; and exports
 * whose vocabulary files disagree are refused at registration, naming the file.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../../harness/http.js';
import { startPerTest, startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';
import { makeDemoModel, PRESETS } from '../tools/demo-model/index.js';
import { transformersReference } from './engine-fixtures.js';

const TEXTS = [
  'good morning the quick brown fox',
  'thank you please translate the model',
  'hello world and the lazy dog jumps',
  'the server of the language and the batch',
];

const root = mkdtempSync(path.join(tmpdir(), 'separate-vocabs-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const readJson = (dir: string, name: string) =>
  JSON.parse(readFileSync(path.join(dir, name), 'utf8')) as Record<string, number>;

/**
 * Target ids as the source ids of the same tokens (every target token of the stand-ins is a source piece), so
 * transformers.js' tokenizer, which holds the source vocabulary, decodes them as the target vocabulary reads.
 */
function targetToSource(dir: string): (ids: number[]) => number[] {
  const source = readJson(dir, 'vocab.json');
  const target = Object.entries(readJson(dir, 'target_vocab.json'));
  const byId = new Map(target.map(([token, id]) => [id, source[token]!]));
  return (ids) => ids.map((id) => byId.get(id)!);
}

describe('tiny-opus-mt-en-es-separate behind the model server: transformers.js ids, read in the target vocabulary', () => {
  const preset = 'tiny-opus-mt-en-es-separate';
  let t: TestServer;
  let reference: Awaited<ReturnType<typeof transformersReference>>;
  const greedy = new Map<string, string>();
  const beam = new Map<string, string>();
  const misread: string[] = [];

  beforeAll(async () => {
    t = await startTinyTranslationServer(['es'], { preset, batchSize: 16, config: { modelDtype: 'fp32' } });
    const dir = path.join(root, preset);
    makeDemoModel(preset, dir, { quantize: false });
    reference = await transformersReference(root, preset, 'fp32');
    const toSource = targetToSource(dir);
    for (const text of TEXTS) {
      const row = { srcLang: 'en', tgtLang: 'es', text };
      const { tokenIds } = await reference.translate(row, 16);
      greedy.set(text, reference.decode(toSource(tokenIds)));
      misread.push(reference.decode(tokenIds));
      // Marian's generation_config.json does not ask for early stopping.
      beam.set(text, reference.decode(toSource(await reference.beam(row, 2, 16, false))));
    }
  }, 120_000);
  afterAll(async () => {
    await reference?.dispose();
    await t?.close();
  });

  it('has a decoder vocabulary of its own, and its ids read in the source vocabulary would be other words', () => {
    const config = readJson(t.modelDir, 'config.json');
    expect([config.vocab_size, config.decoder_vocab_size]).toEqual([512, 480]);
    expect(TEXTS.map((text) => greedy.get(text))).not.toEqual(misread);
  });

  it('greedy, one request at a time', async () => {
    for (const text of TEXTS) {
      const res = await call(`${t.inference}/predictions/es`, { body: { src_lang: 'en', src_text: text } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.translated).toBe(greedy.get(text));
    }
  });

  it('greedy and beam 2 (alternatives), batched together', async () => {
    const [plain, beamed] = await Promise.all([
      call(`${t.inference}/predictions/es`, { body: { src_lang: 'en', src_text: TEXTS } }),
      call(`${t.inference}/predictions/es`, { body: { src_lang: 'en', src_text: TEXTS, alternatives: 1 } }),
    ]);
    expect(plain.status, JSON.stringify(plain.body)).toBe(200);
    expect(beamed.status, JSON.stringify(beamed.body)).toBe(200);
    expect([...beam].some(([text, out]) => greedy.get(text) !== out)).toBe(true);
    expect(plain.body.translated).toEqual(TEXTS.map((text) => greedy.get(text)));
    expect(beamed.body.translated).toEqual(TEXTS.map((text) => beam.get(text)));
  });
});

describe('tiny-copy-separate behind the model server answers its input', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['de'], { preset: 'tiny-copy-separate', config: { modelDtype: 'fp32' } });
  }, 60_000);
  afterAll(() => t?.close());

  it('greedy and beam 2, one request alone and two batched', async () => {
    const alone = await call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', src_text: TEXTS[0] } });
    expect(alone.body).toEqual({ translated: TEXTS[0] });
    const [plain, beamed] = await Promise.all([
      call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', src_text: TEXTS } }),
      call(`${t.inference}/predictions/de`, { body: { src_lang: 'en', src_text: TEXTS, alternatives: 1 } }),
    ]);
    expect(plain.body.translated).toEqual(TEXTS);
    expect(beamed.body.translated).toEqual(TEXTS);
  });

  it('writes a glossary term in target ids: the term, where the copy would have ended', async () => {
    const text = 'the quick brown fox';
    const res = await call(`${t.inference}/predictions/de`, {
      body: { src_lang: 'en', src_text: text, glossary: { fox: 'hello' } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.translated).toMatch(/^the quick brown fox ?hello/);
  });

  it('is its input only in the target vocabulary: the same ids read in the source vocabulary are other words', () => {
    const source = readJson(t.modelDir, 'vocab.json');
    const target = readJson(t.modelDir, 'target_vocab.json');
    const moved = Object.keys(source).filter((token) => source[token] !== target[token]);
    expect(moved.length).toBeGreaterThan(400);
    expect(['</s>', '<unk>', '<pad>'].map((token) => target[token])).toEqual([0, 1, 511]);
  });
});

describe('a separate-vocabulary export whose files disagree is refused at registration, naming the file', () => {
  const start = startPerTest();
  const preset = 'tiny-opus-mt-en-es-separate';
  const breakages: { what: string; apply: (dir: string) => void; file: string; message: string }[] = [
    {
      what: 'no target vocabulary',
      apply: (dir) => rmSync(path.join(dir, 'target_vocab.json')),
      file: 'target_vocab.json',
      message: 'is missing.',
    },
    {
      what: 'no target SentencePiece model',
      apply: (dir) => rmSync(path.join(dir, 'target.spm')),
      file: 'target.spm',
      message: 'is missing (tokenizer_config.json sets separate_vocabs).',
    },
    {
      what: "a decoder_vocab_size other than the target vocabulary's",
      apply: (dir) => editJson(dir, 'config.json', (c) => ({ ...c, decoder_vocab_size: 500 })),
      file: 'target_vocab.json',
      message: "has 480 tokens, not config.json's decoder_vocab_size 500.",
    },
    {
      what: 'target ids that are not 0..n−1',
      apply: (dir) => editJson(dir, 'target_vocab.json', (v) => ({ ...v, '</s>': 480 })),
      file: 'target_vocab.json',
      message: 'does not give its tokens the ids 0..n−1, each once.',
    },
    {
      what: 'one embedding shared by two vocabularies',
      apply: (dir) => editJson(dir, 'config.json', (c) => ({ ...c, share_encoder_decoder_embeddings: true })),
      file: 'config.json',
      message:
        'shares one embedding between encoder and decoder (share_encoder_decoder_embeddings is not false), but tokenizer_config.json sets separate_vocabs.',
    },
    {
      what: 'a decoder vocabulary of its own, but one vocabulary in the tokenizer',
      apply: (dir) => editJson(dir, 'tokenizer_config.json', (c) => ({ ...c, separate_vocabs: false })),
      file: 'config.json',
      message:
        'names decoder_vocab_size 480, not its vocab_size 512, but tokenizer_config.json has one vocabulary (no separate_vocabs).',
    },
    {
      what: 'a decoder whose logits are not decoder_vocab_size wide',
      apply: (dir) => {
        const other = path.join(dir, 'other');
        makeDemoModel({ ...PRESETS[preset]!, targetVocabSize: 448 }, other, { graphs: ['decoder'], quantize: false });
        copyFileSync(
          path.join(other, 'onnx', 'decoder_model_merged.onnx'),
          path.join(dir, 'onnx', 'decoder_model_merged.onnx'),
        );
      },
      file: 'onnx/decoder_model_merged.onnx',
      message: "has logits 448 wide, not config.json's decoder_vocab_size 480.",
    },
  ];

  it.each(breakages)('$what', async ({ apply, file, message }) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'separate-disagree-'));
    try {
      makeDemoModel(preset, dir, { quantize: false });
      apply(dir);
      const t = await start({ entries: ['es'], handler: 'translation', modelDir: dir });
      const res = await call(`${t.management}/models?url=es&synchronous=true`, { method: 'POST' });
      expect(res.body).toEqual({
        code: 400,
        type: 'BadRequestException',
        message: `Model ${path.join(dir, file)} ${message}`,
      });
      expect((await call(`${t.management}/models`)).body).toEqual({ models: [] });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function editJson(dir: string, name: string, edit: (value: Record<string, unknown>) => object): void {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(edit(JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)));
}
