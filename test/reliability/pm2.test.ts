/**
 * Issues 6.2 and 6.4 under pm2 — the process manager production runs, with each front (the built-in one, and
 * nginx where it is installed): a router instance SIGKILLed under load is restarted by pm2 while the other
 * instance keeps serving; `pm2 reload router` under load with slow requests in
 * flight fails none of them; `npm stop` (scripts/stop.sh) under load answers every request already accepted.
 *
 * The apps are ecosystem.config.js's three, with its pm2 settings (cluster mode, wait_ready, kill_timeout), run
 * from source through tsx so the drill needs no build (harness/stack.ts under pm2); the model server is the fault-drill entry with every
 * batch slowed to 300 ms, so requests are always in flight when a process goes away. Everything is private to
 * this file: a temp PM2_HOME whose daemon is killed at the end, temp folders, free ports.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { background, drive, type Outcome, type Tally } from '../../harness/load.js';
import { PM2 } from '../../harness/pm2.js';
import { until } from '../../harness/polling.js';
import { startStack, translateBody, type Pm2Stack } from '../../harness/stack.js';

const SLOW_MS = 300;
/** Both fronts where nginx is installed (CI installs it), else the built-in one alone. */
const FRONTS = findNginx(process.env) ? (['builtin', 'nginx'] as const) : (['builtin'] as const);

describe.each(FRONTS)('under pm2 (router ×2 in cluster mode, %s front)', (FRONT) => {
  let stack: Pm2Stack;
  let urls: { front: string; router: string };
  const run = (file: string, args: string[], timeoutMs?: number) => stack.pm2.run(file, args, timeoutMs);
  const routers = async () => (await stack.pm2.jlist()).filter((p) => p.name === 'router');

  beforeAll(async () => {
    // Registered as `npm start` does, once the model server answers; ready when the front answers too.
    stack = await startStack({
      supervisor: 'pm2',
      name: 'reliability-pm2',
      handler: 'echo',
      front: FRONT,
      routers: 2,
      languages: ['ko', 'en'],
      faults: { ko: `slow:${SLOW_MS}`, en: `slow:${SLOW_MS}` },
      register: { batchSize: 8, maxBatchDelayMs: 5 },
      env: {
        LOG_LEVEL: 'warn',
        // The router's deadline is 2 + 1 s, the front's 1 s more: a request lost with a killed instance ends in 4 s.
        // A job runs one 300 ms batch (its queue time is not counted): 2 s is far from what a job takes, and its
        // queue time here (16 clients, 8 a batch) well under the router's 1 s more.
        RESPONSE_TIMEOUT_S: '2',
        ROUTER_TIMEOUT_SLACK_MS: '1000',
        FRONT_TIMEOUT_SLACK_MS: '1000',
      },
    });
    urls = { front: stack.frontUrl!, router: stack.routerUrls[0]! };
    expect(await routers()).toHaveLength(2);
  });

  afterAll(() => stack?.stop());

  /** Background traffic to `url`, counting the requests answered so far (any status). */
  const load = (url: string, concurrency: number) => {
    let answered = 0;
    const traffic = background({
      url: () => url,
      body: (i) => translateBody(i % 2 ? 'ko' : 'en', `text ${i}`),
      concurrency,
      onOutcome: () => void answered++,
    });
    return { ...traffic, answered: () => answered };
  };

  it('SIGKILL of one router instance: pm2 restarts it, the other keeps serving, the front answers every request', async () => {
    const [victim, survivor] = await routers();
    const traffic = load(urls.front, 16);
    await until('traffic', async () => (await fetch(`${urls.front}/health`)).ok);
    process.kill(victim!.pid, 'SIGKILL');
    const restarted = await until('pm2 to restart the instance', async () => {
      const now = await routers();
      const fresh = now.find((p) => p.pid !== victim!.pid && p.pid !== survivor!.pid);
      return fresh?.pm2_env.status === 'online' ? fresh : undefined;
    });
    // Traffic keeps flowing through both instances again before the tally closes.
    const direct = await drive({
      url: () => urls.router,
      body: (i) => translateBody('ko', `after ${i}`),
      concurrency: 8,
      count: 48,
    });
    const tally = await traffic.stop();

    expect(restarted.pm2_env.restart_time).toBeGreaterThanOrEqual(1);
    expect((await routers()).map((p) => p.pid)).toContain(survivor!.pid);
    // Only what the killed instance held can fail, and it fails clearly. Both fronts send a request whose
    // connection to the router failed before any answer once more, on a new connection (a translation has no side
    // effects): the victim's pooled connections, dead all at once, and its in-flight requests are recovered that
    // way. What can still fail: a request whose resend met the dying instance too (the front's 502), and a
    // connection the cluster master was handing to the instance as it died, which stays open in the master,
    // unanswered (Node's round-robin handoff): the front's bounded wait turns it into its 504.
    expect(tally.unanswered, tally.toString()).toBe(0);
    expect(tally.malformed).toBe(0);
    const failed = tally.status(502) + tally.status(504);
    expect(tally.errorCount, tally.toString()).toBe(failed);
    for (const m of tally.messages.keys())
      expect(['Router is unavailable.', 'Router did not answer in time.']).toContain(m);
    // 16 clients over 2 instances: at most 8 on the victim. (Drills here: 1 failed, the master's held handoff.)
    expect(failed, tally.toString()).toBeLessThanOrEqual(8);
    expect(tally.ok + failed).toBe(tally.sent);
    expect(tally.ok).toBeGreaterThan(16);
    expect(direct.toJSON()).toMatchObject({ sent: 48, ok: 48, unanswered: 0 });
  });

  it('pm2 reload router with slow requests in flight: zero failed requests, through the front and straight to the router', async () => {
    const before = (await routers()).map((p) => p.pid);
    const viaFront = load(urls.front, 16);
    const direct = load(urls.router, 8);
    // Every client has had an answer (its next slow request is in flight) before the reload, and again after it.
    const servedSince = (from: number[]) => viaFront.answered() >= from[0]! + 16 && direct.answered() >= from[1]! + 8;
    await until('traffic through both paths before the reload', () => servedSince([0, 0]));
    const reload = await run(PM2, ['reload', 'router'], 120_000);
    expect(reload.code, reload.out).toBe(0);
    const atReload = [viaFront.answered(), direct.answered()];
    await until('traffic through both paths after the reload', () => servedSince(atReload));
    const [front, router] = await Promise.all([viaFront.stop(), direct.stop()]);

    const after = (await routers()).map((p) => p.pid);
    expect(after).toHaveLength(2);
    for (const pid of after) expect(before).not.toContain(pid);
    for (const [what, tally] of [
      ['front', front],
      ['router', router],
    ] as const) {
      expect(tally.toJSON(), `${what}: ${tally}`).toMatchObject({ errors: {}, unanswered: 0 });
      expect(tally.ok, what).toBe(tally.sent);
      expect(tally.ok, what).toBeGreaterThan(20);
    }
  });

  it('npm stop under load: every request accepted before the stop is answered 200; then nothing listens', async () => {
    const outcomes: { o: Outcome; sentAt: number }[] = [];
    const traffic = background({
      url: () => urls.front,
      body: (i) => translateBody('ko', `last ${i}`),
      concurrency: 16,
      onOutcome: (o) => outcomes.push({ o, sentAt: performance.now() - o.latencyMs }),
    });
    await until('requests in flight', () => outcomes.length >= 32);
    const stopAt = performance.now();
    const stopped = await run('npm', ['stop', '--silent'], 120_000);
    const tally: Tally = await traffic.stop();

    expect(stopped.code, stopped.out).toBe(0);
    expect(stopped.out).toContain('mt-serve stopped');
    // Sent before the stop began → answered, and answered 200: the drain finished them.
    const before = outcomes.filter((x) => x.sentAt < stopAt);
    expect(before.length).toBeGreaterThan(32);
    expect(before.filter((x) => x.o.status !== 200).map((x) => `${x.o.status} ${x.o.kind}`)).toEqual([]);
    // Sent after it: answered 200 while the drain still took them, else not taken at all — refused at connect, or
    // an idle keep-alive connection the stopping front closed before reading the request. Never an error answer.
    for (const x of outcomes.filter((y) => y.sentAt >= stopAt)) {
      expect([200, 0]).toContain(x.o.status);
      if (x.o.status === 0) expect(['ECONNREFUSED', 'UND_ERR_SOCKET', 'ECONNRESET']).toContain(x.o.kind);
    }
    expect(tally.malformed).toBe(0);
    expect(await stack.pm2.jlist()).toEqual([]);
  });
});
