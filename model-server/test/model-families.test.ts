/**
 * NLLB-200, mBART-50 and Marian stand-ins served by a real model server (worker processes, batching, the
 * translation plan), held to transformers.js on the same files: greedy, and beam 2 (asked for with `alternatives`),
 * one request at a time and batched with other traffic; and exports whose files disagree, refused at registration.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { call } from '../../harness/http.js';
import { startPerTest, startTinyTranslationServer, type TestServer } from '../../harness/model-server.js';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { transformersReference } from './engine-fixtures.js';

const TEXTS = [
  'good morning the quick brown fox',
  'thank you please translate the model',
  'hello world and the lazy dog jumps',
  'the server of the language and the batch',
];

/** Per family: the stand-in, the models (targets) registered, and each side's codes in the request and for transformers.js. */
const CASES = [
  {
    preset: 'tiny-nllb',
    family: 'NLLB-200',
    targets: { de: 'deu_Latn', kor_Hang: 'kor_Hang' } as Record<string, string>,
    sources: { en: 'eng_Latn', fra_Latn: 'fra_Latn' } as Record<string, string>,
  },
  {
    preset: 'tiny-mbart50',
    family: 'mBART-50',
    targets: { de: 'de_DE', ko: 'ko_KR' } as Record<string, string>,
    sources: { en: 'en_XX', fr: 'fr_XX' } as Record<string, string>,
  },
  {
    preset: 'tiny-opus-mt-en-de',
    family: 'Marian',
    targets: { de: 'de' } as Record<string, string>,
    sources: { en: 'en' } as Record<string, string>,
  },
  {
    // Multilingual: the target's >>xx<< token before the text; served under ISO 639-1 and the model's own code.
    preset: 'tiny-opus-mt-en-roa',
    family: 'Marian',
    targets: { fr: 'fra', ita: 'ita' } as Record<string, string>,
    sources: { en: 'en' } as Record<string, string>,
  },
];

const refRoot = mkdtempSync(path.join(tmpdir(), 'families-ref-'));
afterAll(() => rmSync(refRoot, { recursive: true, force: true }));

describe.each(CASES)('$preset behind the model server equals transformers.js', ({ preset, targets, sources }) => {
  let t: TestServer;
  let reference: Awaited<ReturnType<typeof transformersReference>>;
  const greedy = new Map<string, string>();
  const beam = new Map<string, string>();
  const key = (src: string, tgt: string, text: string) => `${src}>${tgt}:${text}`;

  beforeAll(async () => {
    // fp32 on both sides (the server's auto would load the int8 files on a CPU).
    t = await startTinyTranslationServer(Object.keys(targets), {
      preset,
      batchSize: 16,
      config: { modelDtype: 'fp32' },
    });
    makeDemoModel(preset, path.join(refRoot, preset), { quantize: false });
    reference = await transformersReference(refRoot, preset, 'fp32');
    const earlyStopping = !preset.startsWith('tiny-opus-mt'); // Marian's generation_config.json does not ask for it
    for (const [src, srcCode] of Object.entries(sources)) {
      for (const [tgt, tgtCode] of Object.entries(targets)) {
        for (const text of TEXTS) {
          const row = { srcLang: srcCode, tgtLang: tgtCode, text };
          greedy.set(key(src, tgt, text), (await reference.translate(row, 16)).text);
          // The server caps a row at 2 × its source tokens + 10, above 16 for these texts.
          beam.set(key(src, tgt, text), reference.decode(await reference.beam(row, 2, 16, earlyStopping)));
        }
      }
    }
  }, 120_000);
  afterAll(async () => {
    await reference?.dispose();
    await t?.close();
  });

  it('is described with its family, read from its files, and the weight bytes of the files loaded', async () => {
    const { family } = CASES.find((c) => c.preset === preset)!;
    const [first] = Object.keys(targets);
    const described = (await call(`${t.management}/models/${first}`)).body[0].engine;
    const onDisk = ['encoder_model.onnx', 'decoder_model_merged.onnx']
      .map((f) => statSync(path.join(t.modelDir, 'onnx', f)).size)
      .reduce((a, b) => a + b, 0);
    expect(described).toMatchObject({
      family,
      pairs: Object.keys(targets).map((tgt) => `any → ${tgt}`),
      dtype: 'fp32',
      weightsBytes: onDisk,
    });
  });

  it('greedy, one request at a time', async () => {
    for (const [src] of Object.entries(sources)) {
      for (const tgt of Object.keys(targets)) {
        for (const text of TEXTS) {
          const res = await call(`${t.inference}/predictions/${tgt}`, { body: { src_lang: src, src_text: text } });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
          expect(res.body.translated).toBe(greedy.get(key(src, tgt, text)));
        }
      }
    }
  });

  it('greedy and beam 2, batched: arrays for every pair at once, each element as transformers.js', async () => {
    const pairs = Object.keys(sources).flatMap((src) => Object.keys(targets).map((tgt) => [src, tgt] as const));
    const answers = await Promise.all(
      pairs.flatMap(([src, tgt]) => [
        call(`${t.inference}/predictions/${tgt}`, { body: { src_lang: src, src_text: TEXTS } }),
        call(`${t.inference}/predictions/${tgt}`, { body: { src_lang: src, src_text: TEXTS, alternatives: 1 } }),
      ]),
    );
    // Beam search finds something greedy does not, for some text of every family (else the test could not tell them).
    expect([...beam].some(([k, text]) => greedy.get(k) !== text)).toBe(true);
    pairs.forEach(([src, tgt], i) => {
      const [plain, beamed] = [answers[2 * i]!, answers[2 * i + 1]!];
      expect(plain.status, JSON.stringify(plain.body)).toBe(200);
      expect(beamed.status, JSON.stringify(beamed.body)).toBe(200);
      expect(plain.body.translated).toEqual(TEXTS.map((text) => greedy.get(key(src, tgt, text))));
      expect(beamed.body.translated).toEqual(TEXTS.map((text) => beam.get(key(src, tgt, text))));
    });
  });
});

describe('a pair a model does not serve', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTinyTranslationServer(['de'], { preset: 'tiny-opus-mt-en-de' });
  }, 60_000);
  afterAll(() => t?.close());

  it('is a 400 naming what the model reads', async () => {
    const res = await call(`${t.inference}/predictions/de`, { body: { src_lang: 'fr', src_text: 'bonjour le monde' } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      code: 400,
      type: 'BadRequestException',
      message: 'Unknown src_lang "fr". Supported languages: en.',
    });
  });
});

describe('an export whose files disagree is refused at registration, naming the file; nothing is registered', () => {
  const start = startPerTest();
  const breakages: { what: string; apply: (dir: string) => void; file: string; message: string }[] = [
    {
      what: 'a tokenizer without the language tokens its class names',
      apply: (dir) => editJson(dir, 'tokenizer_config.json', (c) => ({ ...c, tokenizer_class: 'NllbTokenizer' })),
      file: 'tokenizer.json',
      message: 'has no language tokens (such as eng_Latn) for its NllbTokenizer.',
    },
    {
      what: 'a missing decoder file',
      apply: (dir) => rmSync(path.join(dir, 'onnx', 'decoder_model_merged_quantized.onnx')),
      file: 'onnx/decoder_model_merged_quantized.onnx',
      message: 'is missing (encoder_model_quantized.onnx has no decoder).',
    },
    {
      what: 'a tokenizer larger than the model',
      apply: (dir) => editJson(dir, 'config.json', (c) => ({ ...c, vocab_size: 300 })),
      file: 'tokenizer.json',
      message: "has token id 511, past config.json's vocab_size 300.",
    },
    {
      what: 'an unknown tokenizer class',
      apply: (dir) => editJson(dir, 'tokenizer_config.json', (c) => ({ ...c, tokenizer_class: 'T5Tokenizer' })),
      file: 'tokenizer_config.json',
      message:
        'names tokenizer_class "T5Tokenizer", not one of M2M100Tokenizer, NllbTokenizer, MBart50Tokenizer, MBartTokenizer, MarianTokenizer.',
    },
    {
      what: 'a Marian tokenizer without its pair',
      apply: (dir) =>
        editJson(dir, 'tokenizer_config.json', ({ source_lang: _, ...c }) => ({
          ...c,
          tokenizer_class: 'MarianTokenizer',
        })),
      file: 'tokenizer_config.json',
      message: 'names no pair (source_lang and target_lang) for its MarianTokenizer.',
    },
    {
      what: 'a generation token id past the vocabulary',
      apply: (dir) => editJson(dir, 'generation_config.json', (c) => ({ ...c, decoder_start_token_id: 512 })),
      file: 'generation_config.json',
      message: "names decoder_start_token_id 512, past config.json's vocab_size 512.",
    },
    {
      what: 'a language token tokenizer_config.json names and tokenizer.json lacks',
      apply: (dir) =>
        editJson(dir, 'tokenizer_config.json', (c) => ({
          ...c,
          additional_special_tokens: [...(c.additional_special_tokens as string[]), '__sw__'],
        })),
      file: 'tokenizer.json',
      message: 'has no token "__sw__", which tokenizer_config.json names among its special tokens.',
    },
  ];

  it.each(breakages)('$what', async ({ apply, file, message }) => {
    const dir = mkdtempSync(path.join(tmpdir(), 'disagree-'));
    try {
      makeDemoModel('tiny', dir);
      apply(dir);
      const t = await start({ entries: ['de'], handler: 'translation', modelDir: dir });
      const res = await call(`${t.management}/models?url=de&synchronous=true`, { method: 'POST' });
      expect(res.status).toBe(400);
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

describe('a multilingual Marian model serving two pairs', () => {
  it('is loaded once: one engine, its family and both pairs, each answering as transformers.js with its >>xx<<', async () => {
    const t = await startTinyTranslationServer(['en-fr', 'en-it'], {
      preset: 'tiny-opus-mt-en-roa',
      config: { modelDtype: 'fp32' },
    });
    const refDir = mkdtempSync(path.join(tmpdir(), 'roa-ref-'));
    makeDemoModel('tiny-opus-mt-en-roa', path.join(refDir, 'roa'), { quantize: false });
    const reference = await transformersReference(refDir, 'roa', 'fp32');
    try {
      const status = (await call(`${t.metrics}/status.json`)).body;
      expect(status.engines).toHaveLength(1);
      expect(status.engines[0]).toMatchObject({ family: 'Marian', pairs: ['en → fr', 'en → it'] });
      const text = TEXTS[0]!;
      const answers: string[] = [];
      for (const [entry, code] of [
        ['en-fr', 'fra'],
        ['en-it', 'ita'],
      ] as const) {
        const res = await call(`${t.inference}/predictions/${entry}`, { body: { src_lang: 'en', src_text: text } });
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        expect(res.body.translated).toBe((await reference.translate({ srcLang: 'en', tgtLang: code, text }, 16)).text);
        answers.push(res.body.translated as string);
      }
      expect(answers[0]).not.toBe(answers[1]);
    } finally {
      await reference.dispose();
      await t.close();
      rmSync(refDir, { recursive: true, force: true });
    }
  });
});

describe('a language registered on a model that does not write it', () => {
  const start = startPerTest();
  it('is refused at registration, naming the languages the model writes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'opus-'));
    try {
      makeDemoModel('tiny-opus-mt-en-de', dir, { quantize: false });
      const t = await start({ entries: ['de', 'ko'], handler: 'translation', modelDir: dir });
      const res = await call(`${t.management}/models?url=ko&synchronous=true`, { method: 'POST' });
      expect(res.body).toEqual({
        code: 400,
        type: 'BadRequestException',
        message: `Model ${path.join(dir, 'tokenizer_config.json')} does not write "ko", the language this model is registered for; it writes: de.`,
      });
      expect((await call(`${t.management}/models`)).body).toEqual({ models: [] });
      const de = await call(`${t.management}/models?url=de&synchronous=true`, { method: 'POST' });
      expect(de.status, JSON.stringify(de.body)).toBe(200);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

function editJson(dir: string, name: string, edit: (value: Record<string, unknown>) => object): void {
  const file = path.join(dir, name);
  writeFileSync(file, JSON.stringify(edit(JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>)));
}
