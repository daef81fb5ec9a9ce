import { describe, expect, it } from 'vitest';
import type { SearchSettings } from '../decoding.js';
import { emptyGeneratorStats } from './generator-stats.js';
import { Sequences } from './sequences.js';

const EOS = 2;
const GREEDY: SearchSettings = {
  strategy: 'greedy',
  numBeams: 1,
  maxNewTokens: 8,
  minNewTokens: 0,
  lengthPenalty: 1,
  earlyStopping: false,
  forcedTokenId: 5,
};

/** A queue of `n` sequences, all admitted (generating), each with its abort controller. */
function generating(n: number) {
  const stats = emptyGeneratorStats();
  const sequences = new Sequences(stats, EOS);
  const controllers = Array.from({ length: n }, () => new AbortController());
  const answers = controllers.map((c, i) =>
    sequences.add({ inputIds: [i, EOS], settings: GREEDY }, { signal: c.signal }).then(
      (hyp) => ({ ok: hyp.tokens }),
      (err: Error) => ({ error: err.message }),
    ),
  );
  const states = sequences.admit(n, true, false).map((a) => a.state);
  return { stats, sequences, controllers, answers, states };
}

describe('Sequences: every sequence answered once, cancelled ones by the loop at a step boundary', () => {
  it('a sequence cancelled while generating is marked for the next boundary and rejects with its reason there', async () => {
    const { stats, sequences, controllers, answers, states } = generating(2);
    controllers[0]!.abort(new Error('client gone'));
    expect([...sequences.cancelled.keys()]).toEqual([states[0]]);
    for (const [state, error] of [...sequences.cancelled]) sequences.reject(state, error);
    states[1]!.addFinished({ tokens: [5, 9, EOS], logprob: 0 });
    sequences.finish(states[1]!);
    expect(await Promise.all(answers)).toEqual([{ error: 'client gone' }, { ok: [5, 9, EOS] }]);
    expect(stats).toMatchObject({ cancelled: 1, failed: 0, cappedRows: 0 });
    expect(sequences.cancelled.size).toBe(0);
  });

  it('one that finishes in the run its cancel came during resolves with its answer, counted as finished, not cancelled', async () => {
    const { stats, sequences, controllers, answers, states } = generating(1);
    controllers[0]!.abort(new Error('client gone'));
    states[0]!.addFinished({ tokens: [5, 7, EOS], logprob: 0 });
    sequences.finish(states[0]!);
    expect(await answers[0]).toEqual({ ok: [5, 7, EOS] });
    expect(stats).toMatchObject({ cancelled: 0, failed: 0 });
    // Nothing is left for the next boundary to gather out or answer a second time.
    expect(sequences.cancelled.size).toBe(0);
  });

  it('a waiting one leaves the queue at once; an aborted signal is refused', async () => {
    const stats = emptyGeneratorStats();
    const sequences = new Sequences(stats, EOS);
    const controller = new AbortController();
    const waiting = sequences.add({ inputIds: [1, EOS], settings: GREEDY }, { signal: controller.signal });
    controller.abort(new Error('deadline'));
    await expect(waiting).rejects.toThrow('deadline');
    expect(sequences.waiting).toBe(0);
    expect(stats.cancelled).toBe(1);
    await expect(
      sequences.add({ inputIds: [1, EOS], settings: GREEDY }, { signal: controller.signal }),
    ).rejects.toThrow('deadline');
  });
});
