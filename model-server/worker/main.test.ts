import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { resolveEntry } from '../../common/entry.js';
import { makeDemoModel } from '../tools/demo-model/index.js';
import { TranslationEngine } from '../engine/engine.js';
import type {
  BatchDoneMessage,
  BatchItem,
  FromWorker,
  ItemMessage,
  ProgressMessage,
  ToWorker,
  SentenceItem,
  WorkerOptions,
} from '../protocol.js';

let dir: string;
const workers: ChildProcess[] = [];

beforeAll(() => {
  dir = mkdtempSync(path.join(tmpdir(), 'worker-main-'));
  makeDemoModel('tiny-joinable', dir);
});
afterEach(() => {
  for (const child of workers.splice(0)) if (child.exitCode === null) child.kill('SIGKILL');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/**
 * The real worker entry over IPC, as the frontend forks it, with every message it sent kept in order; given `fault`,
 * the fault-drill entry (the same worker loop with that fault injected).
 */
class TestWorker {
  readonly child: ChildProcess;
  readonly received: FromWorker[] = [];
  #waiting: { until: (m: FromWorker) => boolean; resolve: (m: FromWorker) => void }[] = [];

  constructor(fault?: string) {
    const entry =
      fault === undefined
        ? resolveEntry(import.meta.url, './main')
        : resolveEntry(import.meta.url, '../../harness/fault-worker');
    this.child = fork(entry.file, [], {
      execArgv: entry.execArgv,
      serialization: 'advanced',
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      env: { ...process.env, MT_WORKER_LOG_LEVEL: 'silent', ...(fault === undefined ? {} : { MT_TEST_FAULT: fault }) },
    });
    workers.push(this.child);
    this.child.on('message', (message: FromWorker) => {
      this.received.push(message);
      this.#waiting = this.#waiting.filter((w) => !(w.until(message) && (w.resolve(message), true)));
    });
  }

  send(message: ToWorker): void {
    this.child.send(message);
  }

  /** The next message (from now on) that satisfies `until`. A hang fails the test by its timeout. */
  next(until: (m: FromWorker) => boolean): Promise<FromWorker> {
    return new Promise((resolve) => this.#waiting.push({ until, resolve }));
  }

  async start(options: Partial<WorkerOptions> = {}): Promise<void> {
    const ready = this.next((m) => m.type === 'ready');
    this.send({
      type: 'init',
      workerId: 'w-test',
      handler: 'translation',
      modelDir: dir,
      device: { kind: 'cpu' },
      options: { intraOpThreads: 1, numBeams: 2, maxNewTokens: 64, ...options },
    });
    await ready;
  }

  items(): ItemMessage[] {
    return this.received.filter((m): m is ItemMessage => m.type === 'item');
  }
}

const WORDS = 'the quick brown fox jumps over lazy dog hello world good morning thank you please'.split(' ');
/** `count` translation jobs of varied length: enough decoder work that a cancel sent at once finds them running. */
function jobs(prefix: string, count: number): BatchItem<SentenceItem>[] {
  return Array.from({ length: count }, (_, i) => ({
    id: `${prefix}${i}`,
    model: ['de', 'fr', 'ja'][i % 3]!,
    body: { srcLang: 'en', text: Array.from({ length: 3 + (i % 17) }, (_, j) => WORDS[(i + j) % 15]).join(' ') },
  }));
}

describe('worker main', () => {
  it('a cancel answers each named job it holds exactly once with the reason error; other ids are ignored', async () => {
    const worker = new TestWorker();
    await worker.start();
    const items = jobs('j', 96);
    // Cancel the two jobs that generate longest (same options in process), once the worker says it is stepping.
    const reference = await TranslationEngine.load({ modelDir: dir, intraOpThreads: 1 });
    const lengths = await Promise.all(
      items.map(async ({ model, body: { text } }) => {
        const out = await reference.translate([{ srcLang: 'en', text, tgtLang: model }], {
          numBeams: 2,
          maxNewTokens: 64,
          capBySourceLength: true,
        });
        return out[0]!.generatedTokens;
      }),
    );
    await reference.close();
    const [longest, second] = items
      .map((item, i) => ({ id: item.id, tokens: lengths[i]! }))
      .sort((a, b) => b.tokens - a.tokens);
    expect(second!.tokens).toBeGreaterThanOrEqual(15);
    const stepping = worker.next((m) => m.type === 'progress' && m.liveRows > 0);
    const done = worker.next((m) => m.type === 'batch-done');
    worker.send({ type: 'batch', batchId: 1, items });
    await stepping;
    worker.send({ type: 'cancel', ids: [longest!.id, 'never-sent'], reason: 'client-gone' });
    worker.send({ type: 'cancel', ids: [second!.id], reason: 'deadline' });
    await done;
    // Cancelling a job already answered changes nothing: no second reply, and the worker keeps serving.
    worker.send({ type: 'cancel', ids: ['j5', 'j1'], reason: 'deadline' });
    const again = worker.next((m) => m.type === 'batch-done');
    worker.send({ type: 'batch', batchId: 2, items: jobs('k', 2) });
    await again;

    const replies = worker.items();
    expect(replies.map((m) => m.id).sort()).toEqual([...items, ...jobs('k', 2)].map((item) => item.id).sort());
    const byId = new Map(replies.map((m) => [m.id, m.outcome]));
    expect(byId.get(longest!.id)).toEqual({
      ok: false,
      error: { code: 'CLIENT_CLOSED', message: 'Client closed the request.' },
    });
    expect(byId.get(second!.id)).toEqual({
      ok: false,
      error: { code: 'REQUEST_TIMEOUT', message: 'Request timed out: cancelled in the worker.' },
    });
    const failed = replies.filter((m) => !m.outcome.ok).map((m) => m.id);
    expect(failed.sort()).toEqual([longest!.id, second!.id].sort());
  });

  it('a cancel reaches jobs held back before the handler (fault slow): answered at once, never run', async () => {
    const worker = new TestWorker('slow:300');
    const ready = worker.next((m) => m.type === 'ready');
    worker.send({
      type: 'init',
      workerId: 'w-slow',
      handler: 'translation',
      modelDir: dir,
      device: { kind: 'cpu' },
      options: { intraOpThreads: 1, numBeams: 1, maxNewTokens: 16 },
    });
    await ready;
    const done = worker.next((m) => m.type === 'batch-done');
    worker.send({ type: 'batch', batchId: 1, items: jobs('s', 3) });
    const cancelled = worker.next((m) => m.type === 'item');
    worker.send({ type: 'cancel', ids: ['s1'], reason: 'deadline' });
    expect(await cancelled).toMatchObject({ type: 'item', id: 's1', outcome: { ok: false } });
    await done;
    expect(
      worker
        .items()
        .map((m) => m.id)
        .sort(),
    ).toEqual(['s0', 's1', 's2']);
    expect(worker.items().filter((m) => m.outcome.ok).length).toBe(2);
  });

  it('sends progress while it holds work, at most every ~200 ms, and once when it becomes idle', async () => {
    const worker = new TestWorker();
    await worker.start({ numBeams: 4 });
    // Batches of 256 decoder rows (the engine's), two in flight so that it never idles, for at least a second.
    const started = performance.now();
    let sent = 0;
    let answered = 0;
    const sendBatch = () => worker.send({ type: 'batch', batchId: sent, items: jobs(`b${sent++}-`, 64) });
    const allDone = new Promise<void>((resolve) => {
      worker.child.on('message', (m: FromWorker) => {
        if (m.type !== 'batch-done') return;
        answered++;
        if (performance.now() - started < 1000) sendBatch();
        else if (answered === sent) resolve();
      });
    });
    sendBatch();
    sendBatch();
    await allDone;
    // The idle progress follows the last batch-done, possibly in the same IPC read (then it is already here).
    const lastDoneAt = worker.received.map((m) => m.type).lastIndexOf('batch-done');
    const afterLast = worker.received.slice(lastDoneAt);
    const idle = (afterLast.find((m) => m.type === 'progress') ??
      (await worker.next((m) => m.type === 'progress'))) as ProgressMessage;
    const busyMs = performance.now() - started;

    const lastDone = worker.received.filter((m): m is BatchDoneMessage => m.type === 'batch-done').at(-1)!;
    expect(idle).toEqual({ type: 'progress', steps: lastDone.steps, liveRows: 0 });
    const during = worker.received.filter((m): m is ProgressMessage => m.type === 'progress' && m !== idle);
    // At least one a second of work (what a watchdog waiting seconds needs), however slow the steps here are.
    expect(busyMs).toBeGreaterThan(1000);
    expect(during.length).toBeGreaterThanOrEqual(Math.floor(busyMs / 1000));
    expect(during.some((m) => m.liveRows > 0)).toBe(true);
    // Throttled: at most one per 200 ms of work (and the first step's).
    expect(during.length).toBeLessThanOrEqual(Math.ceil(busyMs / 200) + 1);
    // Step counters only grow.
    const runs = [...during.map((m) => m.steps.runs), idle.steps.runs];
    expect(runs).toEqual([...runs].sort((a, b) => a - b));
    expect(idle.steps.runs).toBeGreaterThan(runs[0]!);
  });
});
