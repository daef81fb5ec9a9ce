/**
 * @module router/apis/deepl-languages — DeepL's language codes ↔ the served M2M100 languages: the source codes
 * (`EN`), the target codes with DeepL's regional variants (`EN-GB`, `EN-US`, `PT-BR`, `PT-PT`, `ZH-HANS`), and the
 * English names DeepL's `/v2/languages` lists.
 */

/** DeepL target codes that stand for one served language (the model writes one variety of it). */
const TARGET_VARIANTS: Readonly<Record<string, readonly string[]>> = {
  en: ['EN-GB', 'EN-US'],
  pt: ['PT-BR', 'PT-PT'],
  zh: ['ZH', 'ZH-HANS'],
};

/** Target codes DeepL still accepts though it no longer lists them. */
const TARGET_ALIASES: Readonly<Record<string, string>> = { EN: 'en', PT: 'pt' };

const VARIANT_NAMES: Readonly<Record<string, string>> = {
  'EN-GB': 'English (British)',
  'EN-US': 'English (American)',
  'PT-BR': 'Portuguese (Brazilian)',
  'PT-PT': 'Portuguese (European)',
  ZH: 'Chinese (simplified)',
  'ZH-HANS': 'Chinese (simplified)',
};

const displayNames = new Intl.DisplayNames(['en'], { type: 'language' });
const nameOf = (lang: string) => displayNames.of(lang) ?? lang;

export interface DeepLLanguage {
  language: string;
  name: string;
  supports_formality?: boolean;
}

/** The served languages as DeepL names them, for `/v2/languages`. */
export interface DeepLLanguages {
  source: DeepLLanguage[];
  /** Formality cannot be chosen here: `supports_formality` is false for every target. */
  target: DeepLLanguage[];
  /** A `source_lang` value (any case) → the served language, or undefined when not served. */
  sourceOf(code: string): string | undefined;
  /** A `target_lang` value (any case) → the served language, or undefined when not served. */
  targetOf(code: string): string | undefined;
  /** Whether a model translates the served language `src` (or `auto`) into `tgt`. */
  serves(src: string, tgt: string): boolean;
}

/**
 * The languages some model reads (`sources`) and writes (`written`), the one list when they are the same; `serves`
 * tells which pairs of them a model translates (every pair when one model serves them all).
 */
export function deeplLanguages(
  sources: readonly string[],
  written: readonly string[] = sources,
  serves: (src: string, tgt: string) => boolean = () => true,
): DeepLLanguages {
  const targets = new Map<string, string>();
  for (const lang of [...written].sort())
    for (const code of TARGET_VARIANTS[lang] ?? [lang.toUpperCase()]) targets.set(code, lang);
  for (const [code, lang] of Object.entries(TARGET_ALIASES)) if (written.includes(lang)) targets.set(code, lang);
  const listed = [...targets.keys()].filter((code) => TARGET_ALIASES[code] === undefined);
  const read = new Set(sources);
  return {
    source: [...sources].sort().map((lang) => ({ language: lang.toUpperCase(), name: nameOf(lang) })),
    target: listed.map((code) => ({
      language: code,
      name: VARIANT_NAMES[code] ?? nameOf(targets.get(code)!),
      supports_formality: false,
    })),
    sourceOf: (code) => {
      const lang = code.toLowerCase();
      return read.has(lang) ? lang : undefined;
    },
    targetOf: (code) => targets.get(code.toUpperCase()),
    serves,
  };
}
