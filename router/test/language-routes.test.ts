/**
 * The router's choice of entry (router/language-routes.ts) without a server: which texts `auto` sends to a pair's
 * model, that no text is detected for a target no pair writes, and what the lists are made of.
 */
import { describe, expect, it, vi } from 'vitest';

const detections = vi.hoisted(() => ({ count: 0 }));
vi.mock('../../model-server/text/detect-language.js', async (original) => {
  const actual = await original<typeof import('../../model-server/text/detect-language.js')>();
  return {
    ...actual,
    detectLanguage: (...args: Parameters<typeof actual.detectLanguage>) => {
      detections.count += 1;
      return actual.detectLanguage(...args);
    },
  };
});

// Its tier shares a module registry across files (vitest.config.ts): imported afresh, so that it sees the mock.
vi.resetModules();
const { createLanguageRoutes } = await import('../language-routes.js');

const routes = createLanguageRoutes(['de', 'ko'], {
  cuda_id: { de: '0', ko: '0' },
  pairs: { 'en-de': { model_dir: 'opus', cuda_id: '0' } },
});
const english = 'good morning the quick brown fox jumps over the lazy dog';
const french = 'bonjour mes amis, comment allez-vous ce matin';

describe('createLanguageRoutes', () => {
  it("sends auto text to a pair's entry only when every text is in its source", () => {
    expect(routes.entryFor('auto', 'de', english)).toBe('en-de');
    expect(routes.entryFor('auto', 'de', [english, '  ', english])).toBe('en-de');
    expect(routes.entryFor('auto', 'de', [english, french])).toBe('de');
    expect(routes.entryFor('auto', 'de', [french, english])).toBe('de');
    expect(routes.entryFor('auto', 'de', french)).toBe('de');
    // Too little to tell: the target's model detects, as without pairs.
    expect(routes.entryFor('auto', 'de', 'Hi')).toBe('de');
    expect(routes.entryFor('en', 'de', french)).toBe('en-de');
    expect(routes.entryFor('fr', 'de', english)).toBe('de');
  });

  it('detects nothing for a target no pair writes, nor for a named source', () => {
    detections.count = 0;
    expect(routes.entryFor('auto', 'ko', english)).toBe('ko');
    expect(routes.entryFor('en', 'de', english)).toBe('en-de');
    expect(detections.count).toBe(0);
    expect(routes.entryFor('auto', 'de', [english, english])).toBe('en-de');
    expect(detections.count).toBe(2);
  });

  it('lists what the models can do, and refuses what none does', () => {
    const pairOnly = createLanguageRoutes(['ko'], {
      cuda_id: { ko: '0' },
      pairs: { 'en-de': { model_dir: 'opus', cuda_id: '0' } },
    });
    expect(pairOnly.sources).toEqual(['ko', 'en']);
    expect(pairOnly.targets).toEqual(['ko', 'de']);
    expect(pairOnly.targetsFrom('en')).toEqual(['ko', 'de']);
    expect(pairOnly.targetsFrom('ko')).toEqual(['ko']);
    expect([pairOnly.serves('en', 'de'), pairOnly.serves('ko', 'de'), pairOnly.serves('auto', 'de')]).toEqual([
      true,
      false,
      true,
    ]);
    expect(pairOnly.entryFor('auto', 'de', french)).toBeUndefined();
    expect(pairOnly.unserved('fr', 'de').message).toBe('Pair fr → de is not served; served: any → ko, en → de.');
    const plain = createLanguageRoutes(['de', 'ko']);
    expect([plain.sources, plain.targets, plain.entryFor('auto', 'de', english)]).toEqual([
      ['de', 'ko'],
      ['de', 'ko'],
      'de',
    ]);
  });
});
