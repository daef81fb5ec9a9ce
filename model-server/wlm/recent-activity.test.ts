import { until } from '../../harness/polling.js';
import { describe, expect, it } from 'vitest';
import { RecentActivity } from './recent-activity.js';

function clocked() {
  let now = 1_000_000;
  const activity = new RecentActivity({ windowMs: 10_000, sampleMs: 1_000, historyMs: 5_000, now: () => now });
  return { activity, advance: (ms: number) => (now += ms) };
}

describe('RecentActivity', () => {
  it('rates over the window come from the sample one window ago', () => {
    const { activity, advance } = clocked();
    for (let s = 0; s < 20; s++) {
      // 5 requests a second for 10 s, then 1 a second.
      for (let i = 0; i < (s < 10 ? 5 : 1); i++) activity.requestDone('ko', 200, 10);
      advance(1_000);
      activity.sample(new Map([['ko', s]]));
    }
    expect(activity.model('ko').requestsPerS).toBeCloseTo(1, 5);
    expect(activity.model('en')).toMatchObject({ requestsPerS: 0, p50Ms: null, p99Ms: null, cacheHitRatio: null });
  });

  it('before a window has passed, rates run from the start', () => {
    const { activity, advance } = clocked();
    for (let i = 0; i < 6; i++) activity.requestDone('ko', 200, 5);
    advance(2_000);
    expect(activity.model('ko').requestsPerS).toBeCloseTo(3, 5);
  });

  it('p50 and p99 of the answered requests in the window; errors counted apart', () => {
    const { activity, advance } = clocked();
    for (let i = 1; i <= 100; i++) activity.requestDone('ko', 200, i);
    activity.requestDone('ko', 503, 0.1);
    let figures = activity.model('ko');
    expect(figures.p50Ms).toBe(50);
    expect(figures.p99Ms).toBe(99);
    advance(11_000);
    activity.requestDone('ko', 200, 500);
    figures = activity.model('ko');
    // The first hundred left the window.
    expect(figures.p50Ms).toBe(500);
    expect(figures.p99Ms).toBe(500);
  });

  it('cache hit ratio and rows per decoder step over the window', () => {
    const { activity, advance } = clocked();
    activity.cacheLookups('ko', 1, 3);
    activity.stepsDone('cpu|tiny', 10, 640);
    expect(activity.model('ko').cacheHitRatio).toBe(0.25);
    expect(activity.rowsPerStep('cpu|tiny')).toBe(64);
    expect(activity.rowsPerStep('other')).toBeNull();
    for (let s = 0; s < 11; s++) {
      advance(1_000);
      activity.sample(new Map());
    }
    activity.cacheLookups('ko', 3, 0);
    activity.stepsDone('cpu|tiny', 2, 4);
    expect(activity.model('ko')).toMatchObject({ cacheHitRatio: 1, cacheHits: 4, cacheMisses: 3 });
    expect(activity.rowsPerStep('cpu|tiny')).toBe(2);
  });

  it('history: requests/s between samples and the queue depth at each, bounded in length', () => {
    const { activity, advance } = clocked();
    for (let s = 0; s < 8; s++) {
      for (let i = 0; i < s; i++) activity.requestDone('ko', 200, 1);
      advance(1_000);
      activity.sample(new Map([['ko', 10 * s]]));
    }
    const history = activity.history();
    // 5 s of samples at 1 s: 6 kept, 5 intervals.
    expect(history.at).toHaveLength(5);
    expect(history.models.ko!.requestsPerS).toEqual([3, 4, 5, 6, 7]);
    expect(history.models.ko!.queueDepth).toEqual([30, 40, 50, 60, 70]);
  });

  it('samples on its own timer until the server closes', async () => {
    const activity = new RecentActivity({ sampleMs: 20 });
    let depth = 0;
    let closing = false;
    let polledAfterClosing = 0;
    activity.start(() => {
      if (closing) polledAfterClosing++;
      return closing ? undefined : new Map([['ko', ++depth]]);
    });
    // Three samples taken by its own timer, however slowly a busy machine runs it.
    await until('three samples', () => activity.history().at.length >= 3, 10_000, 5);
    closing = true;
    // Once the server says it is closing the timer stops: one more poll sees it, none after.
    await until('the poll that sees the close', () => polledAfterClosing > 0, 10_000, 5);
    const taken = activity.history().at.length;
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(polledAfterClosing).toBe(1);
    expect(activity.history().at.length).toBe(taken);
  });
});
