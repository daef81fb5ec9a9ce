/**
 * The upstream over several model servers (real HTTP servers on port 0 that answer like the model server's
 * inference port: `/ping`, `/v2/models/{lang}/ready`, `/predictions/{lang}`): languages learnt from the servers,
 * replicas balanced by outstanding requests, a refused host ejected at once and readmitted when it answers again,
 * an admission 503 sent once to another replica, a language with no host left answered 503 + Retry-After at once,
 * hosts of a name picked up as its resolution changes.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo } from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterEach, describe, expect, it } from 'vitest';
import { loadConfig } from '../../common/config.js';
import { ERRORS, ServeError, type ErrorCode } from '../../common/errors.js';
import { until } from '../../harness/polling.js';
import { freePort } from '../../harness/ports.js';
import { Upstream } from '../upstream/upstream.js';

/**
 * `work`'s time, ms, less the longest this event loop stalled meanwhile: the fake hosts and the upstream client run
 * here, so a stall of the process (a loaded machine, a collection) is no time the client spent waiting on anything.
 */
async function unstalled<T>(work: () => Promise<T>): Promise<[T, number]> {
  const delay = monitorEventLoopDelay({ resolution: 5 });
  delay.enable();
  const startedAt = performance.now();
  const value = await work();
  const ms = performance.now() - startedAt;
  delay.disable();
  return [value, Math.max(0, ms - delay.max / 1e6)];
}

interface FakeHost {
  name: string;
  origin: string;
  port: number;
  /** Languages it says are ready. */
  languages: Set<string>;
  /** Languages it says are registered but not ready (`/ready` 400: loading, or a worker restarting). */
  loading: Set<string>;
  /** Translations it answered, by language. */
  served: Map<string, number>;
  /** `/predictions` requests it received, answered or refused, all languages together. */
  received: number;
  /** When set, nothing is answered any more (a partition: no refusal, no reply). */
  silent: boolean;
  /**
   * When set, `/predictions` answers this 503 instead of translating: its code in `x-error-code`, and in
   * `x-reached-worker` whether a job of the request ran (absent: the answer does not say).
   */
  refuse: { code: ErrorCode; reached: boolean | undefined } | undefined;
  /** `/predictions` of a language it does not list: translated (default), or 404 as a model server without it. */
  unlisted: 'translate' | '404';
  /**
   * `/ping`: answered 200, never answered while the rest is (a busy event loop that reaches it late), 500, or its
   * connection torn down once (a keep-alive race), then 200 again.
   */
  ping: 'ok' | 'stalled' | 'unhealthy' | 'torn-once';
  /** `/ping`s received. */
  pings: number;
  /** Stop accepting connections (new ones are refused) while the open ones are still answered: a drain. */
  stopListening(): void;
  /** Requests held until `releaseAll` (texts starting with `hold`). */
  held: ServerResponse[];
  releaseAll(): void;
  close(): Promise<void>;
}

async function startFakeHost(name: string, languages: string[], port = 0, host = '127.0.0.1'): Promise<FakeHost> {
  const fake: FakeHost = {
    name,
    origin: '',
    port: 0,
    languages: new Set(languages),
    loading: new Set(),
    served: new Map(),
    received: 0,
    refuse: undefined,
    unlisted: 'translate',
    ping: 'ok',
    pings: 0,
    silent: false,
    held: [],
    releaseAll: () => {
      for (const res of fake.held.splice(0)) if (!res.destroyed) answer(res);
    },
    stopListening: () => void server.close(),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        if (!server.listening) return resolve();
        server.close(() => resolve());
      }),
  };
  const answer = (res: ServerResponse) =>
    res.writeHead(200, { 'content-type': 'application/json', 'x-worker-id': name }).end('{"translated":"ok"}');
  const server: Server = createServer((req, res) => {
    req.resume().on('end', () => {
      if (fake.silent) return;
      const url = req.url ?? '';
      if (url === '/ping') {
        fake.pings++;
        if (fake.ping === 'stalled') return;
        if (fake.ping === 'unhealthy') return void res.writeHead(500).end('{"status":"Unhealthy"}');
        if (fake.ping === 'torn-once') return void ((fake.ping = 'ok'), req.socket.resetAndDestroy());
        return void res.writeHead(200).end('{"status":"Healthy"}');
      }
      const ready = /^\/v2\/models\/(\w+)\/ready$/.exec(url);
      if (ready) {
        const status = fake.languages.has(ready[1]!) ? 200 : fake.loading.has(ready[1]!) ? 400 : 404;
        return void res.writeHead(status).end('{}');
      }
      const lang = /^\/predictions\/(\w+)$/.exec(url)?.[1] ?? '?';
      fake.received++;
      if (fake.unlisted === '404' && !fake.languages.has(lang)) {
        const body = { code: 404, type: 'ModelNotFoundException', message: `Model not found: ${lang}` };
        const headers = { 'x-error-code': 'MODEL_NOT_FOUND', 'x-reached-worker': 'false' };
        return void res.writeHead(404, headers).end(JSON.stringify(body));
      }
      if (fake.refuse !== undefined) {
        const { code, reached } = fake.refuse;
        const body = { code: 503, type: ERRORS[code].type, message: `${ERRORS[code].message} (from ${name})` };
        const headers: Record<string, string> = { 'retry-after': '1', 'x-error-code': code };
        if (reached !== undefined) headers['x-reached-worker'] = String(reached);
        return void res.writeHead(503, headers).end(JSON.stringify(body));
      }
      fake.served.set(lang, (fake.served.get(lang) ?? 0) + 1);
      if (String(req.headers['x-request-id']).startsWith('hold')) fake.held.push(res);
      else answer(res);
    });
  });
  await new Promise<void>((resolve) => server.listen(port, host, resolve));
  fake.port = (server.address() as AddressInfo).port;
  fake.origin = `http://${host}:${fake.port}`;
  return fake;
}

const FAST = { probeIntervalMs: 50, probeTimeoutMs: 500, refreshIntervalMs: 200 };
/** Probes and reads a minute apart: a check in a test is one that traffic asked for. */
const RARE = { probeIntervalMs: 60_000, refreshIntervalMs: 60_000 };

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

function upstreamOver(
  sources: string[],
  languages: string[],
  options: Partial<typeof FAST> & { resolve?: (name: string) => Promise<string[]> } = {},
) {
  const upstream = new Upstream({
    modelServers: { sources, languages, ...FAST, ...options },
    connections: 4,
    timeoutMs: 5_000,
  });
  cleanups.push(() => upstream.close());
  return upstream;
}

const translate = (upstream: Upstream, tgtLang: string, requestId = 'r') =>
  upstream.translate({ tgtLang, body: { src_lang: 'de', src_text: 'x' }, requestId });

async function failure(promise: Promise<unknown>): Promise<ServeError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(err).toBeInstanceOf(ServeError);
  return err as ServeError;
}

async function startHosts(...specs: [string, string[]][]): Promise<FakeHost[]> {
  const hosts = await Promise.all(specs.map(([name, langs]) => startFakeHost(name, langs)));
  for (const h of hosts) cleanups.push(() => (h.releaseAll(), h.close()));
  return hosts;
}

const healthy = (upstream: Upstream, n: number) => () =>
  upstream.modelServers!.hosts.filter((h) => h.health === 'healthy').length === n;

describe('several model servers', () => {
  it('routes each language to the hosts that serve it; a replicated one goes to the least outstanding', async () => {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en', 'fr']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko', 'fr']);
    await until('both healthy', healthy(upstream, 2), 5_000);

    for (let i = 0; i < 4; i++) {
      expect((await translate(upstream, 'ko')).headers['x-worker-id']).toBe('a');
      expect((await translate(upstream, 'fr')).headers['x-worker-id']).toBe('b');
    }
    // Held requests spread evenly; once one host's are answered, every later en request goes to it.
    const held = [0, 1, 2, 3].map((i) => translate(upstream, 'en', `hold-${i}`));
    await until('4 held', () => a!.held.length + b!.held.length === 4, 5_000, 5);
    expect([a!.held.length, b!.held.length]).toEqual([2, 2]);
    a!.releaseAll();
    await until('a idle', () => upstream.outstanding[a!.origin] === 0, 5_000, 5);
    for (let i = 0; i < 5; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('a');
    b!.releaseAll();
    await Promise.all(held);
    expect(upstream.outstanding).toEqual({ [a!.origin]: 0, [b!.origin]: 0 });
  });

  it('a host that goes away is ejected at once: its languages get 503 + Retry-After, a replica takes the rest; back, it is readmitted', async () => {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en', 'fr']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko', 'fr']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    const port = a!.port;
    await a!.close();

    // The first en requests may still pick a: refused, it is ejected and the request goes to b.
    for (let i = 0; i < 6; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('b');
    const [err, ms] = await unstalled(() => failure(translate(upstream, 'ko')));
    expect(ms).toBeLessThan(100);
    expect(err.status).toBe(503);
    expect(err.retryAfterS).toBe(1);
    expect(err.toBody()).toEqual({
      code: 503,
      type: 'ServiceUnavailableException',
      message:
        'Model ko is unavailable now, no model server has it ready: 1 down, 1 answering without it; retry later.',
    });
    expect(upstream.modelServers!.hosts.find((h) => h.origin === a!.origin)?.health).toBe('ejected');

    const back = await startFakeHost('a2', ['en', 'ko'], port);
    cleanups.push(() => back.close());
    await until('a readmitted', healthy(upstream, 2), 5_000);
    expect((await translate(upstream, 'ko')).headers['x-worker-id']).toBe('a2');
  });

  it('a host that reports a language not ready gets none of it: 503 + Retry-After at once, never a 404; ready, it takes it', async () => {
    // a is back from a restart and has registered en only so far; b never serves ko.
    const [a, b] = await startHosts(['a', ['en']], ['b', ['en']]);
    b!.unlisted = '404';
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    const [err, ms] = await unstalled(() => failure(translate(upstream, 'ko')));
    expect(ms).toBeLessThan(100);
    expect([err.status, err.retryAfterS]).toEqual([503, 1]);
    expect(err.message).toBe(
      'Model ko is unavailable now, no model server has it ready: 2 answering without it; retry later.',
    );
    expect(a!.served.get('ko')).toBeUndefined();
    expect(b!.served.get('ko')).toBeUndefined();
    // Registered and ready on a: the next read lists it, and ko goes there only.
    a!.languages.add('ko');
    await until('ko ready on a', () => upstream.modelServers!.route('ko').kind === 'hosts', 5_000);
    for (let i = 0; i < 3; i++) expect((await translate(upstream, 'ko')).headers['x-worker-id']).toBe('a');
    expect(b!.served.get('ko')).toBeUndefined();
  });

  it('a host that dies with requests in flight (a crashed model server): they go to a replica, else 503 + Retry-After, not 502', async () => {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    const ko = failure(translate(upstream, 'ko', 'hold-ko')); // its handler attached before it can fail
    const en = [translate(upstream, 'en', 'hold-en-1'), translate(upstream, 'en', 'hold-en-2')];
    await until('all three held', () => a!.held.length === 2 && b!.held.length === 1, 5_000, 5);
    await a!.close();
    const err = await ko;
    expect([err.status, err.retryAfterS]).toEqual([503, 1]);
    // The en request a held went to b (its work died with a: nothing is done twice).
    await until('b holds both en requests', () => b!.held.length === 2, 5_000, 5);
    b!.releaseAll();
    for (const reply of await Promise.all(en)) expect(reply.headers['x-worker-id']).toBe('b');
  });

  it('a host that dies and then accepts every new connection only to tear it (a port still open while its process exits): 503 + Retry-After, not 502', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('healthy', healthy(upstream, 1), 5_000);
    await translate(upstream, 'en'); // heard from just now: a torn probe alone would not eject it
    const held = failure(translate(upstream, 'en', 'hold-en')); // its handler attached before it can fail
    await until('held', () => a!.held.length === 1, 5_000, 5);
    await a!.close();
    const tearing = createNetServer((socket) => socket.resetAndDestroy());
    await new Promise<void>((resolve) => tearing.listen(a!.port, '127.0.0.1', resolve));
    cleanups.push(() => new Promise<void>((resolve) => tearing.close(() => resolve())));
    // One after another: each awaited as it is sent, so none fails unheard.
    const errors = [await held, await failure(translate(upstream, 'en')), await failure(translate(upstream, 'en'))];
    for (const err of errors) expect([err.status, err.retryAfterS], err.message).toEqual([503, 1]);
  });

  it('a host refused at first (still starting) that then translates is checked at once: when it dies, 503 + Retry-After, not 502', async () => {
    const port = await freePort();
    // Probes a minute apart: the next periodic one comes too late to tell the router what traffic already showed.
    const upstream = upstreamOver([`http://127.0.0.1:${port}`], ['en'], RARE);
    await until('refused at first', () => upstream.modelServers!.hosts[0]?.health === 'ejected', 5_000, 5);
    const a = await startFakeHost('a', ['en'], port);
    cleanups.push(() => (a.releaseAll(), a.close()));
    // Nobody admitted yet: the router tries it anyway, and it translates.
    expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('a');
    await until('a admitted', healthy(upstream, 1), 2_000, 5);
    const held = failure(translate(upstream, 'en', 'hold-en')); // its handler attached before it can fail
    await until('held', () => a.held.length === 1, 5_000, 5);
    await a.close();
    const errors = [await held, await failure(translate(upstream, 'en'))];
    for (const err of errors) expect([err.status, err.retryAfterS], err.message).toEqual([503, 1]);
  });

  it('a language registered since the last read is routed on its first request (the hosts are asked about it first)', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en', 'ko'], { refreshIntervalMs: 60_000 });
    await until('healthy', healthy(upstream, 1), 5_000);
    a!.languages.add('ko');
    expect((await translate(upstream, 'ko')).headers['x-worker-id']).toBe('a');
  });

  it('a 404 from a host that listed the language (unregistered since its read) reaches the client as 503 + Retry-After', async () => {
    const [a] = await startHosts(['a', ['en']]);
    a!.unlisted = '404';
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('healthy', healthy(upstream, 1), 5_000);
    a!.languages.delete('en');
    const err = await failure(translate(upstream, 'en'));
    expect([err.status, err.code, err.retryAfterS]).toEqual([503, 'NO_WORKER', 1]);
  });

  it('a host that goes silent (no refusal) is ejected by the probe: its in-flight requests fail then, not at the timeout', async () => {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    a!.silent = true;
    const silentAt = performance.now();
    const stuck = translate(upstream, 'ko');
    const err = await failure(stuck);
    const failedAfterMs = performance.now() - silentAt;
    // Probe period 50 ms + limit 500 ms, against the request's own 5 s timeout.
    expect(failedAfterMs).toBeLessThan(1_000);
    expect(err.toBody()).toEqual({
      code: 502,
      type: 'BadGatewayException',
      message: expect.stringMatching(
        /^Model server stopped answering: nothing from it for \d+ ms, health probe included\.$/,
      ),
    });
    expect(Number(/for (\d+) ms/.exec(err.message)![1])).toBeGreaterThanOrEqual(500);
    expect(upstream.modelServers!.hosts.find((h) => h.origin === a!.origin)?.health).toBe('ejected');
    expect((await failure(translate(upstream, 'ko'))).status).toBe(503);
    for (let i = 0; i < 4; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('b');
    a!.silent = false;
    await until('a readmitted', healthy(upstream, 2), 5_000);
    expect((await translate(upstream, 'ko')).headers['x-worker-id']).toBe('a');
  });

  it('an admission 503 that reached no worker is sent once to another replica; one that reached a worker, or does not say, never', async () => {
    const [a, b] = await startHosts(['a', ['en']], ['b', ['en']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    const received = () => a!.received + b!.received;
    a!.refuse = { code: 'QUEUE_FULL', reached: false };
    for (let i = 0; i < 6; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('b');
    // Both full: the client hears the second refusal, with its Retry-After, after two tries only.
    a!.refuse = b!.refuse = { code: 'OVERLOADED', reached: false };
    let before = received();
    const err = await failure(translate(upstream, 'en'));
    expect([err.status, err.code, err.retryAfterS]).toEqual([503, 'OVERLOADED', 1]);
    expect(received() - before).toBe(2);
    // A document whose first sentences ran before the rest was refused (shutdown, unregistered): sent once only,
    // whatever the refusal's code. So is a refusal that does not say, and a failure that is no refusal.
    for (const refuse of [
      { code: 'SHUTTING_DOWN', reached: true },
      { code: 'NO_WORKER', reached: true },
      { code: 'QUEUE_FULL', reached: undefined },
      { code: 'PREDICTION_FAILED', reached: false },
    ] as const) {
      a!.refuse = b!.refuse = refuse;
      before = received();
      const once = await failure(translate(upstream, 'en'));
      expect([once.code, once.reachedWorker]).toEqual([refuse.code, refuse.reached]);
      expect(received() - before, refuse.code).toBe(1);
    }
  });

  it('one host, down (a restart): 503 + Retry-After at once, and it recovers on its own once it reports ready', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('healthy', healthy(upstream, 1), 5_000);
    const port = a!.port;
    await a!.close();
    for (let i = 0; i < 3; i++) {
      const [err, ms] = await unstalled(() => failure(translate(upstream, 'en')));
      expect(ms).toBeLessThan(100);
      expect([err.status, err.retryAfterS]).toEqual([503, 1]);
    }
    // Back, with its model still loading: answering, but not ready, so still 503.
    const back = await startFakeHost('a2', [], port);
    cleanups.push(() => back.close());
    await until('a2 readmitted', healthy(upstream, 1), 5_000);
    expect((await failure(translate(upstream, 'en'))).status).toBe(503);
    back.languages.add('en');
    await until('en ready', () => upstream.modelServers!.route('en').kind === 'hosts', 5_000);
    expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('a2');
  });

  it('a worker restarting on a host that had the language ready: the host keeps it (its queue waits), no 503', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('en ready on a', () => upstream.modelServers!.hosts[0]?.ready.has('en') === true, 5_000);
    // Its worker died: registered, not ready, until the restarted worker loads.
    a!.languages.delete('en');
    a!.loading.add('en');
    await until('a re-read', () => upstream.modelServers!.hosts[0]?.ready.has('en') === false, 5_000);
    expect(upstream.modelServers!.route('en')).toEqual({ kind: 'hosts', origins: [a!.origin] });
    expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('a');
  });

  it('a model server never heard from since the router started: a 502 in milliseconds', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const port = a!.port;
    await a!.close();
    const upstream = upstreamOver([`http://127.0.0.1:${port}`], ['en']);
    const err = await failure(translate(upstream, 'en'));
    expect(err.status).toBe(502);
  });

  it('a name stands for all its addresses, re-resolved while running', async () => {
    const first = await startFakeHost('one', ['en'], 0, '127.0.0.1');
    cleanups.push(() => first.close());
    const second = await startFakeHost('two', ['en'], first.port, '127.0.0.2');
    cleanups.push(() => second.close());
    let addresses = ['127.0.0.1'];
    const upstream = upstreamOver([`http://model-servers.test:${first.port}`], ['en'], {
      resolve: async (name) => {
        expect(name).toBe('model-servers.test');
        return addresses;
      },
    });
    await until('one host', healthy(upstream, 1), 5_000);
    addresses = ['127.0.0.1', '127.0.0.2'];
    await until('two hosts', healthy(upstream, 2), 5_000);
    const holds = [0, 1, 2, 3].map((i) => translate(upstream, 'en', `hold-${i}`));
    await until('both take a share', () => first.held.length === 2 && second.held.length === 2, 5_000, 5);
    first.releaseAll();
    second.releaseAll();
    await Promise.all(holds);
    addresses = ['127.0.0.2'];
    await until('one left', () => upstream.modelServers!.hosts.length === 1, 5_000);
    for (let i = 0; i < 3; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('two');
  });
});

describe('a busy model server is not a dead one', () => {
  /** Sends `lang` one request after another for `ms`, each answered at once by its host; returns the answers. */
  async function flow(upstream: Upstream, lang: string, ms: number): Promise<(string | number)[]> {
    const answers: (string | number)[] = [];
    for (const endAt = performance.now() + ms; performance.now() < endAt;) {
      answers.push(
        await translate(upstream, lang).then(
          (reply) => reply.headers['x-worker-id']!,
          (err: ServeError) => err.status,
        ),
      );
      await new Promise((r) => setTimeout(r, 10));
    }
    return answers;
  }

  /** Host a serves en and ko, host b en only; one ko request is held in flight on a. */
  async function koHeldOnA() {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    const held = translate(upstream, 'ko', 'hold-0');
    await until('held', () => a!.held.length === 1, 5_000, 5);
    return { a: a!, upstream, held };
  }

  it('10k-client crowd regression (2,563 × 502): a host whose /ping stalls while it answers requests stays in, and what it holds in flight is answered', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('healthy', healthy(upstream, 1), 5_000);
    a!.ping = 'stalled';
    const held = translate(upstream, 'en', 'hold-0');
    await until('held', () => a!.held.length === 1, 5_000, 5);
    // Three probe limits (500 ms) and more: every probe of the window times out, and answers keep coming.
    const answers = await flow(upstream, 'en', 1_800);
    expect(answers.length).toBeGreaterThan(20);
    expect(new Set(answers)).toEqual(new Set(['a']));
    expect(upstream.modelServers!.hosts[0]!.health).toBe('healthy');
    // The router's /health too: a host that answers traffic answers, whatever its /ping takes.
    expect(await upstream.ping(500)).toBe(true);
    a!.releaseAll();
    expect((await held).headers['x-worker-id']).toBe('a');
  });

  it('a host whose /ping stalls while it answers keeps its languages: they are not refused as if it were gone', async () => {
    const [a, b] = await startHosts(['a', ['en', 'ko']], ['b', ['en']]);
    const upstream = upstreamOver([a!.origin, b!.origin], ['en', 'ko']);
    await until('both healthy', healthy(upstream, 2), 5_000);
    a!.ping = 'stalled';
    const answers = await flow(upstream, 'ko', 1_800);
    expect(new Set(answers)).toEqual(new Set(['a']));
    expect(healthy(upstream, 2)()).toBe(true);
    // It stalls everything now: silent on every channel, it is ejected within a probe period and limit.
    a!.silent = true;
    await until('a ejected', healthy(upstream, 1), 2_000, 5);
  });

  it('a host whose probe connection is torn once while it answers (a keep-alive race) stays in: no request refused', async () => {
    const [a] = await startHosts(['a', ['en']]);
    const upstream = upstreamOver([a!.origin], ['en']);
    await until('healthy', healthy(upstream, 1), 5_000);
    a!.ping = 'torn-once';
    const answers = await flow(upstream, 'en', 400);
    expect(a!.ping).toBe('ok'); // a probe was torn
    expect(new Set(answers)).toEqual(new Set(['a']));
    expect(healthy(upstream, 1)()).toBe(true);
  });

  it('a host never admitted that translates while its /ping says Unhealthy is checked once for it, not once per answer', async () => {
    const [a] = await startHosts(['a', ['en']]);
    a!.ping = 'unhealthy';
    // Probes a minute apart: every /ping after the first is one that traffic asked for.
    const upstream = upstreamOver([a!.origin], ['en'], RARE);
    await until('ejected', () => upstream.modelServers!.hosts[0]?.health === 'ejected', 5_000, 5);
    const pingsBefore = a!.pings;
    // Never heard from, so tried anyway: eight clients for a second, every request translated.
    const answers = (await Promise.all(Array.from({ length: 8 }, () => flow(upstream, 'en', 1_000)))).flat();
    expect(new Set(answers)).toEqual(new Set(['a']));
    expect(answers.length).toBeGreaterThan(20);
    expect(a!.pings - pingsBefore).toBe(1); // one check, at the first answer (409 in a run before: one per answer)
  });

  it('a host whose /ping says Unhealthy takes nothing new, and answers what it holds in flight', async () => {
    const { a, upstream, held } = await koHeldOnA();
    a.ping = 'unhealthy';
    await until('a ejected', healthy(upstream, 1), 5_000, 5);
    expect((await failure(translate(upstream, 'ko'))).code).toBe('NO_WORKER');
    for (let i = 0; i < 4; i++) expect((await translate(upstream, 'en')).headers['x-worker-id']).toBe('b');
    a.releaseAll();
    expect((await held).headers['x-worker-id']).toBe('a');
    a.ping = 'ok';
    await until('a readmitted', healthy(upstream, 2), 5_000);
  });

  it('a host that refuses new connections (draining) is ejected, and answers what it holds on its open ones', async () => {
    const { a, upstream, held } = await koHeldOnA();
    a.stopListening();
    // A second ko request needs a new connection: refused, the host is ejected and ko has nowhere else to go.
    expect((await failure(translate(upstream, 'ko'))).code).toBe('NO_WORKER');
    expect(upstream.modelServers!.hosts.find((h) => h.origin === a.origin)?.health).toBe('ejected');
    a.releaseAll();
    expect((await held).headers['x-worker-id']).toBe('a');
  });
});

describe('MODEL_SERVERS', () => {
  it('is a comma-separated list of base URLs; empty means INFERENCE_ADDRESS; a bad entry is named', () => {
    expect(loadConfig({}).router.modelServers).toEqual(['http://127.0.0.1:9999']);
    expect(loadConfig({ INFERENCE_ADDRESS: '10.0.0.5:9999' }).router.modelServers).toEqual(['http://10.0.0.5:9999']);
    expect(
      loadConfig({ MODEL_SERVERS: 'http://10.0.0.1:9999, 10.0.0.2:9999,http://mt-model-server:9999' }).router
        .modelServers,
    ).toEqual(['http://10.0.0.1:9999', 'http://10.0.0.2:9999', 'http://mt-model-server:9999']);
    expect(() => loadConfig({ MODEL_SERVERS: 'http://10.0.0.1:9999,10.0.0.2' })).toThrow(
      'MODEL_SERVERS="http://10.0.0.1:9999,10.0.0.2": expected comma-separated http://host:port, got "10.0.0.2"',
    );
  });
});
