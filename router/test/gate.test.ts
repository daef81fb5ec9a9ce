/** The router's per-language admission gate: its bounds, its FIFO order, refusals, and waiters that give up. */
import { describe, expect, it } from 'vitest';
import { Gate, GateRefusedError, type Release } from '../upstream/gate.js';

const settle = () => new Promise((resolve) => setImmediate(resolve));

describe('Gate', () => {
  it('admits up to its limit at once, queues up to its queue limit, refuses the rest at once', async () => {
    const gate = new Gate(2, 1);
    const a = gate.enter();
    const b = gate.enter();
    expect(typeof a).toBe('function');
    expect(typeof b).toBe('function');
    const c = gate.enter();
    expect(c).toBeInstanceOf(Promise);
    expect(() => gate.enter()).toThrow(GateRefusedError);
    expect(gate.stats).toEqual({ active: 2, waiting: 1, refused: 1 });

    let cReleased: Release | undefined;
    void (c as Promise<Release>).then((r) => (cReleased = r));
    (a as Release)();
    await settle();
    // The freed place went to the waiter: still 2 active, nobody waiting.
    expect(cReleased).toBeTypeOf('function');
    expect(gate.stats).toEqual({ active: 2, waiting: 0, refused: 1 });
    (b as Release)();
    cReleased!();
    expect(gate.stats).toEqual({ active: 0, waiting: 0, refused: 1 });
  });

  it('hands places out in arrival order, and a newcomer never overtakes the line', async () => {
    const gate = new Gate(1, 3);
    const first = gate.enter() as Release;
    const order: string[] = [];
    const waiters = ['w1', 'w2', 'w3'].map((name) =>
      (gate.enter() as Promise<Release>).then((release) => {
        order.push(name);
        return release;
      }),
    );
    first();
    // The place freed by `first` went to w1: a newcomer must queue behind w2 and w3, not take a place now.
    const newcomer = gate.enter();
    expect(newcomer).toBeInstanceOf(Promise);
    const last = (newcomer as Promise<Release>).then((release) => {
      order.push('newcomer');
      return release;
    });
    for (const w of [...waiters, last]) (await w)();
    expect(order).toEqual(['w1', 'w2', 'w3', 'newcomer']);
    expect(gate.stats.active).toBe(0);
  });

  it('a waiter whose signal aborts leaves the line and never takes a place', async () => {
    const gate = new Gate(1, 2);
    const held = gate.enter() as Release;
    const quitter = new AbortController();
    const leaving = gate.enter(quitter.signal) as Promise<Release>;
    const staying = gate.enter() as Promise<Release>;
    quitter.abort();
    await expect(leaving).rejects.toMatchObject({ reason: 'aborted' });
    expect(gate.stats).toEqual({ active: 1, waiting: 1, refused: 0 });
    held();
    (await staying)();
    expect(gate.stats).toEqual({ active: 0, waiting: 0, refused: 0 });
    expect(() => gate.enter(AbortSignal.abort())).toThrow(GateRefusedError);
  });

  it('refuseWaiting refuses every waiter (full), and the places held stay held', async () => {
    const gate = new Gate(1, 3);
    const held = gate.enter() as Release;
    const controller = new AbortController();
    const waiters = [gate.enter(), gate.enter(controller.signal)].map((w) =>
      (w as Promise<Release>).then(
        () => 'admitted',
        (err: GateRefusedError) => err.reason,
      ),
    );
    gate.refuseWaiting();
    expect(await Promise.all(waiters)).toEqual(['full', 'full']);
    controller.abort(); // its listener is gone: nothing happens
    expect(gate.stats).toEqual({ active: 1, waiting: 0, refused: 2 });
    held();
    expect(gate.stats).toEqual({ active: 0, waiting: 0, refused: 2 });
  });

  it('a release called twice frees one place only', () => {
    const gate = new Gate(2, 0);
    const a = gate.enter() as Release;
    gate.enter();
    a();
    a();
    expect(gate.stats.active).toBe(1);
  });

  it('refuses bounds that make no sense', () => {
    expect(() => new Gate(0, 1)).toThrow('gate limit must be an integer ≥ 1, got 0');
    expect(() => new Gate(1, -1)).toThrow('gate queue limit must be an integer ≥ 0, got -1');
  });
});
