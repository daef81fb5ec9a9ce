import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServeError } from '../../../common/errors.js';
import { DEMO_LANGUAGES, makeDemoModel } from '../../tools/demo-model/index.js';
import { loadModelConfig } from '../model-config.js';
import { TranslationTokenizer } from './tokenizer.js';

let dir: string;
let tokenizer: TranslationTokenizer;
const SUPPORTED = [...DEMO_LANGUAGES].sort().join(', ');

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'tokenizer-'));
  makeDemoModel('tiny', dir);
  const config = loadModelConfig(dir);
  tokenizer = TranslationTokenizer.load(dir, { eosTokenId: config.eosTokenId, maxInputTokens: config.maxInputTokens });
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('TranslationTokenizer', () => {
  it('knows exactly the 14 languages of the model', () => {
    expect(tokenizer.languages()).toEqual([...DEMO_LANGUAGES].sort());
  });

  it('encodes M2M100-style: [__src__] tokens </s>', () => {
    const { ids, truncated } = tokenizer.encode('hello world', 'ko');
    expect(ids[0]).toBe(tokenizer.forcedTokenId('ko'));
    expect(ids.at(-1)).toBe(2);
    expect(ids.length).toBeGreaterThan(2);
    expect(truncated).toBe(false);
    // Same text, another source language: only the first token changes.
    const fr = tokenizer.encode('hello world', 'fr').ids;
    expect(fr.slice(1)).toEqual(ids.slice(1));
    expect(fr[0]).not.toBe(ids[0]);
  });

  it.each([
    'hello world',
    'The quick brown fox jumps over the lazy dog.',
    'Numbers 12345, punctuation (!?) and "quotes"; done: yes - no',
    'x',
  ])('round-trips %j', (text) => {
    const { ids } = tokenizer.encode(text, 'en');
    expect(tokenizer.decode(ids)).toBe(text);
  });

  it('decodes without special tokens (start, language, </s>, padding)', () => {
    const body = tokenizer.encode('good morning', 'en').ids.slice(1, -1);
    const de = tokenizer.forcedTokenId('de');
    expect(tokenizer.decode([2, de, ...body, 2, 1, 1])).toBe('good morning');
  });

  it('truncates an over-long input to the model maximum, keeping [__src__] … </s>', () => {
    const config = loadModelConfig(dir);
    const long = Array.from({ length: 400 }, (_, i) => `word${i}`).join(' ');
    const { ids, truncated } = tokenizer.encode(long, 'en');
    expect(truncated).toBe(true);
    expect(ids).toHaveLength(config.maxInputTokens);
    expect(ids[0]).toBe(tokenizer.forcedTokenId('en'));
    expect(ids.at(-1)).toBe(2);
    // The kept tokens are the text's first ones.
    const full = tokenizer.encode(long.slice(0, 200), 'en').ids;
    expect(ids.slice(0, 20)).toEqual(full.slice(0, 20));
  });

  it('rejects unknown codes with UNKNOWN_LANGUAGE naming the field, the code and the supported codes', () => {
    const attempt = (fn: () => unknown) => {
      try {
        fn();
      } catch (err) {
        return err;
      }
      throw new Error('no error');
    };
    const src = attempt(() => tokenizer.encode('hi', 'xx')) as ServeError;
    expect(src).toBeInstanceOf(ServeError);
    expect(src.toBody()).toEqual({
      code: 400,
      type: 'BadRequestException',
      message: `Unknown src_lang "xx". Supported languages: ${SUPPORTED}.`,
    });
    const tgt = attempt(() => tokenizer.forcedTokenId('EN')) as ServeError;
    expect(tgt.code).toBe('UNKNOWN_LANGUAGE');
    expect(tgt.message).toBe(`Unknown tgt_lang "EN". Supported languages: ${SUPPORTED}.`);
  });
});

describe('TranslationTokenizer of a Marian export with separate vocabularies', () => {
  let separate: TranslationTokenizer;
  let sepDir: string;
  beforeAll(() => {
    sepDir = mkdtempSync(path.join(tmpdir(), 'tokenizer-separate-'));
    makeDemoModel('tiny-copy-separate', sepDir, { quantize: false });
    const config = loadModelConfig(sepDir);
    expect([config.sourceVocabSize, config.vocabSize]).toEqual([512, 512]);
    separate = TranslationTokenizer.load(sepDir, config);
  });
  afterAll(() => rmSync(sepDir, { recursive: true, force: true }));

  it("encodes sources in the source vocabulary, and terms, translations and target spans in the target's", () => {
    const text = 'the quick brown fox';
    const source = separate.encode(text, 'en').ids;
    const target = separate.encodeTerm(text);
    expect(source.slice(0, -1)).not.toEqual(target);
    expect(separate.decode([...target, 0])).toBe(text);
    const words = (spans: ([number, number] | null)[]) => spans.map((s) => (s ? text.slice(...s) : null));
    expect(words(separate.targetSpans(text, target))).toEqual(words(separate.spans(text, source.slice(0, -1))));
    expect(words(separate.targetSpans(text, target)).join('')).toBe(text.replaceAll(' ', ''));
  });
});
