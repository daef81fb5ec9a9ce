import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import './ort-env.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { type TranslateRow, TranslationEngine } from './engine.js';
import { seededRows, transformersReference } from '../test/engine-fixtures.js';

const root = mkdtempSync(path.join(tmpdir(), 'families-'));
afterAll(() => rmSync(root, { recursive: true, force: true }));

const WORDS = 'the of and to in is hello world good morning thank you please quick brown fox jumps 42 , . !'.split(' ');

/** Each family's stand-in, and how a row names its languages there. */
const FAMILIES: { preset: string; codes: (row: TranslateRow) => TranslateRow }[] = [
  // NLLB's own codes; the engine also takes their ISO 639-1 aliases (tested below).
  { preset: 'tiny-nllb', codes: (r) => ({ ...r, srcLang: NLLB[r.srcLang]!, tgtLang: NLLB[r.tgtLang]! }) },
  { preset: 'tiny-nllb-legacy', codes: (r) => ({ ...r, srcLang: NLLB[r.srcLang]!, tgtLang: NLLB[r.tgtLang]! }) },
  { preset: 'tiny-mbart50', codes: (r) => ({ ...r, srcLang: MBART[r.srcLang]!, tgtLang: MBART[r.tgtLang]! }) },
  { preset: 'tiny-opus-mt-en-de', codes: (r) => ({ ...r, srcLang: 'en', tgtLang: 'de' }) },
  // A multilingual Marian model: rows of one batch name different targets (`>>fra<<` before the text).
  { preset: 'tiny-opus-mt-en-roa', codes: (r) => ({ ...r, srcLang: 'en', tgtLang: ROA[r.tgtLang] ?? 'ron' }) },
];
const ROA: Record<string, string> = { fr: 'fra', it: 'ita', es: 'spa', pt: 'por' };
const NLLB: Record<string, string> = {
  ko: 'kor_Hang',
  en: 'eng_Latn',
  zh: 'zho_Hans',
  es: 'spa_Latn',
  fr: 'fra_Latn',
  ru: 'rus_Cyrl',
  id: 'ind_Latn',
  ja: 'jpn_Jpan',
  vi: 'vie_Latn',
  de: 'deu_Latn',
  it: 'ita_Latn',
  hi: 'hin_Deva',
  ar: 'arb_Arab',
  pt: 'por_Latn',
};
const MBART: Record<string, string> = Object.fromEntries(
  Object.keys(NLLB).map((iso) => [
    iso,
    {
      ko: 'ko_KR',
      zh: 'zh_CN',
      ru: 'ru_RU',
      id: 'id_ID',
      vi: 'vi_VN',
      de: 'de_DE',
      it: 'it_IT',
      hi: 'hi_IN',
      ar: 'ar_AR',
    }[iso] ?? `${iso}_XX`,
  ]),
);

beforeAll(() => {
  for (const { preset } of FAMILIES) makeDemoModel(preset, path.join(root, preset));
});
describe.each(FAMILIES)('$preset against transformers.js on the same files', ({ preset, codes }) => {
  let engine: TranslationEngine;
  const list = () => seededRows(8, 17, WORDS, 12).map(codes);
  beforeAll(async () => {
    engine = await TranslationEngine.load({ modelDir: path.join(root, preset), intraOpThreads: 1, dtype: 'fp32' });
  });
  afterAll(() => engine.close());

  it('greedy: the same input ids, tokens (decoder start, forced language) and text, one row at a time and batched', async () => {
    const reference = await transformersReference(root, preset, 'fp32');
    const start = engine.config.decoderStartTokenId;
    const batched = await engine.translate(list(), { numBeams: 1, maxNewTokens: 24 });
    let nontrivial = 0;
    for (const [i, row] of list().entries()) {
      const theirs = await reference.translate(row, 24);
      const [ours] = await engine.translate([row], { numBeams: 1, maxNewTokens: 24 });
      expect(engine.prepare(row).inputIds).toEqual(theirs.inputIds);
      expect([start, ...ours!.tokenIds]).toEqual(theirs.tokenIds);
      expect(ours!.text).toBe(theirs.text);
      expect(batched[i]!.tokenIds).toEqual(ours!.tokenIds);
      if (new Set(ours!.tokenIds).size > 3) nontrivial++;
    }
    expect(nontrivial).toBeGreaterThan(4);
    await reference.dispose();
  });

  it('q8 (the published _quantized files): greedy equals transformers.js on them, one row at a time', async () => {
    const reference = await transformersReference(root, preset, 'q8');
    const q8 = await TranslationEngine.load({ modelDir: path.join(root, preset), intraOpThreads: 1, dtype: 'q8' });
    for (const row of list().slice(0, 4)) {
      const theirs = await reference.translate(row, 16);
      const [ours] = await q8.translate([row], { numBeams: 1, maxNewTokens: 16 });
      expect([q8.config.decoderStartTokenId, ...ours!.tokenIds]).toEqual(theirs.tokenIds);
    }
    await Promise.all([reference.dispose(), q8.close()]);
  });

  it('the in-graph search (what CUDA runs) gives the tokens of the step loop, greedy and beam 2', async () => {
    const inGraph = await TranslationEngine.load({
      modelDir: path.join(root, preset),
      intraOpThreads: 1,
      dtype: 'fp32',
      search: 'in-graph',
    });
    expect(inGraph.generation.mode).toBe('in-graph');
    for (const options of [
      { numBeams: 1, maxNewTokens: 16 },
      { numBeams: 2, maxNewTokens: 16, earlyStopping: true },
    ]) {
      const theirs = await engine.translate(list(), options);
      expect((await inGraph.translate(list(), options)).map((t) => t.tokenIds)).toEqual(theirs.map((t) => t.tokenIds));
    }
    await inGraph.close();
  });

  it('a glossary term is written, greedy and beam 2 (constrained decoding without or with a forced first token)', async () => {
    const term = engine.encodeTerm('lazy dog');
    const contains = (ids: number[]) => ids.some((_, i) => term.every((t, j) => ids[i + j] === t));
    for (const numBeams of [1, 2]) {
      const out = await engine.translate(list().slice(0, 4), { numBeams, maxNewTokens: 24, constraints: [term] });
      for (const t of out) expect(contains(t.tokenIds), t.text).toBe(true);
    }
  });

  it('beam 2: the tokens of HF beam search over transformers.js logits, one row at a time and batched', async () => {
    const reference = await transformersReference(root, preset, 'fp32');
    const options = { numBeams: 2, maxNewTokens: 12, lengthPenalty: 1, earlyStopping: true };
    const rows = list().slice(0, 4);
    const batched = await engine.translate(rows, options);
    for (const [i, row] of rows.entries()) {
      const [ours] = await engine.translate([row], options);
      expect(ours!.tokenIds).toEqual(await reference.beam(row, 2, 12));
      expect(batched[i]!.tokenIds).toEqual(ours!.tokenIds);
    }
    await reference.dispose();
  });
});

describe('language codes and placement come from the files', () => {
  it('a multilingual Marian model reads its targets from its >>xx<< tokens, by their code or ISO 639-1 alias', async () => {
    const engine = await TranslationEngine.load({
      modelDir: path.join(root, 'tiny-opus-mt-en-roa'),
      intraOpThreads: 1,
      dtype: 'fp32',
    });
    try {
      const row = { srcLang: 'en', tgtLang: 'fra', text: 'good morning the quick brown fox' };
      const fra = engine.prepare(row).inputIds;
      expect(engine.tokenizer.decode([fra[0]!])).toBe('>>fra<<');
      expect(engine.prepare({ ...row, tgtLang: 'fr' }).inputIds).toEqual(fra);
      expect(engine.prepare({ ...row, tgtLang: 'ita' }).inputIds.slice(1)).toEqual(fra.slice(1));
      const [fr, it] = await engine.translate([row, { ...row, tgtLang: 'ita' }], { numBeams: 1, maxNewTokens: 16 });
      expect(fr!.tokenIds).not.toEqual(it!.tokenIds);
      expect(() => engine.prepare({ ...row, tgtLang: 'de' })).toThrow(/Unknown tgt_lang "de"/);
    } finally {
      await engine.close();
    }
  });

  it('NLLB reads ISO 639-1 aliases as its own codes; the legacy template puts the source language after </s>', async () => {
    const [modern, legacy] = await Promise.all(
      ['tiny-nllb', 'tiny-nllb-legacy'].map((p) =>
        TranslationEngine.load({ modelDir: path.join(root, p), dtype: 'fp32' }),
      ),
    );
    const row = { srcLang: 'eng_Latn', tgtLang: 'deu_Latn', text: 'good morning' };
    const alias = { srcLang: 'en', tgtLang: 'de', text: 'good morning' };
    expect(modern!.prepare(alias)).toEqual(modern!.prepare(row));
    const ids = modern!.prepare(row).inputIds;
    const eng = ids[0]!;
    expect(legacy!.prepare(row).inputIds).toEqual([...ids.slice(1), eng]);
    expect(modern!.languages()).toContain('kor_Hang');
    expect(modern!.languages()).toContain('ko');
    await Promise.all([modern!.close(), legacy!.close()]);
  });

  it('Marian serves its one pair and forces nothing; another pair is refused naming it', async () => {
    const marian = await TranslationEngine.load({ modelDir: path.join(root, 'tiny-opus-mt-en-de'), dtype: 'fp32' });
    expect(marian.languages()).toEqual(['en']);
    expect(marian.targetLanguages()).toEqual(['de']);
    expect(() => marian.prepare({ srcLang: 'en', tgtLang: 'fr', text: 'hi' })).toThrow(
      'Unknown tgt_lang "fr". Supported languages: de.',
    );
    expect(() => marian.prepare({ srcLang: 'fr', tgtLang: 'de', text: 'hi' })).toThrow(
      'Unknown src_lang "fr". Supported languages: en.',
    );
    // Its config's bad word (the `<pad>` decoding starts from) is never written, even where it scores best.
    expect(marian.config.suppressTokenIds).toEqual([marian.config.padTokenId]);
    await marian.close();
  });
});
