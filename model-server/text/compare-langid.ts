/**
 * @module model-server/text/compare-langid — compares npm language-identification libraries on the
 * served languages: accuracy on langid-set.json (whole sentences and 20-character prefixes), speed and
 * install size. Prints the table that docs/text.md quotes.
 *
 *     node --import tsx model-server/text/compare-langid.ts
 *
 * tinyld (the one used) and franc (devDependency) are always compared. cld3-asm and eld are compared
 * when present: `npm install --no-save cld3-asm@4.0.0 eld@2.1.0` first.
 */
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { franc } from 'franc';
import { detect } from 'tinyld';
import set from './langid-set.json' with { type: 'json' };

type Detector = (text: string) => string | null;

const SET: Record<string, readonly string[]> = set;
const LANGS = Object.keys(SET);
const PREFIX_CHARS = 20;
const TIMING_ROUNDS = 5;

// franc answers in ISO 639-3 (Standard Arabic is "arb", Mandarin "cmn").
const TO_639_3: Record<string, string> = {
  ko: 'kor',
  en: 'eng',
  zh: 'cmn',
  es: 'spa',
  fr: 'fra',
  ru: 'rus',
  id: 'ind',
  ja: 'jpn',
  vi: 'vie',
  de: 'deu',
  it: 'ita',
  hi: 'hin',
  ar: 'arb',
  pt: 'por',
};
const FROM_639_3 = new Map(Object.entries(TO_639_3).map(([two, three]) => [three, two]));

/** Bytes on disk of `name` in node_modules and of everything it depends on, each package once. */
function installBytes(name: string, seen = new Set<string>()): number {
  if (seen.has(name)) return 0;
  seen.add(name);
  const dir = path.join('node_modules', name);
  if (!existsSync(dir)) return 0;
  const du = (p: string): number =>
    statSync(p).isDirectory() ? readdirSync(p).reduce((sum, f) => sum + du(path.join(p, f)), 0) : statSync(p).size;
  const manifest = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as {
    dependencies?: Record<string, string>;
  };
  return Object.keys(manifest.dependencies ?? {}).reduce((sum, dep) => sum + installBytes(dep, seen), du(dir));
}

/** Optional libraries, loaded by name so that the script runs without them. */
async function optional(name: string): Promise<Record<string, unknown> | null> {
  try {
    return (await import(name)) as Record<string, unknown>;
  } catch {
    return null;
  }
}

async function detectors(): Promise<Array<[string, string, Detector]>> {
  const francOnly = Object.values(TO_639_3);
  const list: Array<[string, string, Detector]> = [
    ['tinyld 1.3.4', 'tinyld', (text) => detect(text, { only: LANGS }) || null],
    ['franc 6.2.0', 'franc', (text) => FROM_639_3.get(franc(text, { only: francOnly, minLength: 1 })) ?? null],
  ];
  const cld3 = await optional('cld3-asm');
  if (cld3 !== null) {
    type Identifier = { findLanguage(text: string): { language: string } };
    type Factory = { create(minBytes: number, maxBytes: number): Identifier };
    // Its default minimum (140 bytes) answers "und" for most single sentences.
    const factory = (await (cld3.loadModule as () => Promise<Factory>)()).create(0, 1000);
    // cld3 cannot be restricted to candidates: its answer is scored as given ("ms" for Indonesian is wrong).
    list.push(['cld3-asm 4.0.0', 'cld3-asm', (text) => factory.findLanguage(text).language.replace(/-Latn$/, '')]);
  }
  const eld = await optional('eld/large');
  if (eld !== null) {
    const detector = eld.eld as { setLanguageSubset(l: string[]): void; detect(t: string): { language: string } };
    detector.setLanguageSubset(LANGS);
    list.push(['eld 2.1.0 (large)', 'eld', (text) => detector.detect(text).language || null]);
  }
  return list;
}

function accuracy(detector: Detector, cut: (s: string) => string): { right: number; worst: string } {
  let right = 0;
  let worst = 'none missed';
  let worstShare = 2;
  for (const lang of LANGS) {
    const hits = SET[lang]!.filter((s) => detector(cut(s)) === lang).length;
    right += hits;
    if (hits < SET[lang]!.length && hits / SET[lang]!.length < worstShare) {
      worstShare = hits / SET[lang]!.length;
      worst = `${lang} ${hits}/${SET[lang]!.length}`;
    }
  }
  return { right, worst };
}

function microsPerSentence(detector: Detector, sentences: readonly string[]): number {
  for (const s of sentences) detector(s);
  const start = process.hrtime.bigint();
  for (let round = 0; round < TIMING_ROUNDS; round++) for (const s of sentences) detector(s);
  return Number(process.hrtime.bigint() - start) / 1000 / (TIMING_ROUNDS * sentences.length);
}

const sentences = LANGS.flatMap((lang) => SET[lang]!);
const prefix = (s: string): string => [...s].slice(0, PREFIX_CHARS).join('');
const pct = (n: number): string => `${((100 * n) / sentences.length).toFixed(1)}%`;
console.log(`${sentences.length} sentences, ${LANGS.length} languages; Node ${process.version}`);
console.log(
  '| library | accuracy (sentences) | worst language | accuracy (20-char prefixes) | µs / sentence | install size |',
);
console.log('|---|---|---|---|---|---|');
for (const [name, pkg, detector] of await detectors()) {
  const whole = accuracy(detector, (s) => s);
  const short = accuracy(detector, prefix);
  const micros = microsPerSentence(detector, sentences).toFixed(0);
  const mib = (installBytes(pkg) / 2 ** 20).toFixed(1);
  console.log(`| ${name} | ${pct(whole.right)} | ${whole.worst} | ${pct(short.right)} | ${micros} | ${mib} MiB |`);
}
