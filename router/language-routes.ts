/**
 * @module router/language-routes — which store entry serves a (source, target) pair, for `POST /` and the DeepL and
 * LibreTranslate APIs alike, and what the served models can do, for their language lists. The choice itself is
 * setup_config.json's (common/config/setup-config.ts `entryFor`); what this adds is `auto`: when a pair's own model
 * could serve the target, the texts' language is detected here so that English text to `de` reaches `en-de`.
 */
import { entryFor, PAIR_ENTRY, servedPairs, type SetupConfig } from '../common/config/setup-config.js';
import { ServeError } from '../common/errors.js';
import { AUTO_LANGUAGE } from '../common/translation-contract.js';
import { DETECTABLE_LANGUAGES, detectLanguage } from '../model-server/text/detect-language.js';

export interface LanguageRoutes {
  /** Every target some model writes, in setup_config.json's order (the request parser's list: keep it one array). */
  readonly targets: readonly string[];
  /** Every source some model reads: the default model's languages, then the pairs' sources. */
  readonly sources: readonly string[];
  /** What `src` can be translated into: the default model's languages and the pairs from `src`. */
  targetsFrom(src: string): string[];
  /** Whether `src` (or `auto`, when any model writes `tgt`) → `tgt` is served, before any text is seen. */
  serves(src: string, tgt: string): boolean;
  /**
   * The store entry serving `texts` from `src` to `tgt`; undefined when none does. With `auto` and a pair's model
   * writing `tgt`, each text is detected: when all of them are in the one language of such a pair, its entry.
   */
  entryFor(src: string, tgt: string, texts: string | readonly string[]): string | undefined;
  /** The router's refusal of a pair no entry serves, naming those served (the APIs word their own). */
  unserved(src: string, tgt: string): ServeError;
}

/**
 * The routes of `setup` (setup_config.json with pairs); without one, the default model serves `languages` from any
 * source, each target on its own entry.
 */
export function createLanguageRoutes(languages: readonly string[], setup?: SetupConfig): LanguageRoutes {
  const config: SetupConfig = setup ?? { cuda_id: Object.fromEntries(languages.map((lang) => [lang, '0'])) };
  const own = Object.keys(config.cuda_id);
  const pairs = Object.keys(config.pairs ?? {}).map((pair) => PAIR_ENTRY.exec(pair)!.slice(1, 3) as [string, string]);
  const targets = [...new Set([...own, ...pairs.map(([, tgt]) => tgt)])];
  const sources = [...new Set([...own, ...pairs.map(([src]) => src)])];
  // Targets that some pair's model writes: only requests to these pay for detection.
  const pairTargets = new Set(pairs.map(([, tgt]) => tgt));
  return {
    targets,
    sources,
    targetsFrom: (src) => [...new Set([...own, ...pairs.filter(([from]) => from === src).map(([, tgt]) => tgt)])],
    serves: (src, tgt) =>
      src === AUTO_LANGUAGE
        ? Object.hasOwn(config.cuda_id, tgt) || pairTargets.has(tgt)
        : entryFor(config, src, tgt) !== undefined,
    entryFor: (src, tgt, texts) => {
      if (src !== AUTO_LANGUAGE || !pairTargets.has(tgt)) return entryFor(config, src, tgt);
      const detected = detectedLanguage(texts);
      const pair = detected === undefined ? undefined : `${detected}-${tgt}`;
      if (pair !== undefined && config.pairs?.[pair] !== undefined) return pair;
      return entryFor(config, src, tgt);
    },
    unserved: (src, tgt) =>
      new ServeError('UNKNOWN_LANGUAGE', `Pair ${src} → ${tgt} is not served; served: ${servedPairs(config)}.`),
  };
}

/**
 * The one language all of `texts` are in (blank ones aside), or undefined when any is unsure or two differ. Strict
 * detection, as the model server's: a pair's model is chosen only on the evidence that would have it chosen there.
 */
function detectedLanguage(texts: string | readonly string[]): string | undefined {
  let language: string | undefined;
  for (const text of typeof texts === 'string' ? [texts] : texts) {
    if (text.trim() === '') continue;
    const { lang } = detectLanguage(text, DETECTABLE_LANGUAGES);
    if (lang === null || (language !== undefined && lang !== language)) return undefined;
    language = lang;
  }
  return language;
}
