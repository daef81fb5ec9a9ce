/**
 * The README's parameter table of the DeepL API says of each parameter what `TRANSLATE_PARAMETERS` (the code that
 * handles it) does: honoured, mapped, ignored or unsupported.
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { TRANSLATE_PARAMETERS } from '../../router/apis/deepl.js';

const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
const section = readme.split('## Drop-in for DeepL and LibreTranslate clients')[1]?.split('\n## ')[0] ?? '';
const rows = section.split('\n').filter((line) => line.startsWith('| '));

describe('README: Drop-in for DeepL and LibreTranslate clients', () => {
  it.each(Object.entries(TRANSLATE_PARAMETERS))('documents %s as the code handles it', (name, rule) => {
    const row = rows.find((line) => line.includes(`\`${name}\``) && !line.startsWith('| LibreTranslate'));
    expect(row, `no row names \`${name}\``).toBeDefined();
    const here = row!.split(' | ').at(-1)!;
    expect(here.startsWith(rule.handling)).toBe(true);
  });
});
