/**
 * @module bench/scenarios/router-hop — the router's own cost: the router cluster (×2, request validation and the
 * per-request log line on, log written to a file as under pm2) against the least a Node forwarding hop can do
 * (`http.createServer` + an undici Pool + `JSON.parse` of the body, ×2 in node:cluster), both in front of the
 * same fake model server that answers at once. Requests/s at 64 connections, side by side in one run, arms
 * alternating; the figure is router ÷ minimal hop (target ≥ 0.5). Beside it, the CPU time each hop's processes
 * spent per request (from /proc): on a machine shared with other work, requests/s moves with everyone else's load,
 * CPU per request much less.
 *
 * The load is wrk (`-t2 -c64`, as the issue measured) when it is installed, else the project's closed-loop
 * generator at concurrency 64; the report says which. The fake model server and the minimal hop are this file run
 * as a script (`upstream` / `minimal-hop <instances> <upstream url>`), so the scenario needs nothing outside it.
 */
import { spawnSync } from 'node:child_process';
import cluster from 'node:cluster';
import { readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Pool } from 'undici';
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop } from '../lib/load-generator.js';
import { tsExecArgv } from '../lib/probe-runner.js';
import { CPU_TICK_US, cpuTicks } from '../../harness/proc-tree.js';
import { startProcess, type ManagedProcess } from '../../harness/process-registry.js';
import { checkTarget, formatNumber, formatRatio, section, type Section } from '../lib/report.js';
import { alternatingOrder, median } from '../lib/stats.js';

type Arm = 'router' | 'minimal hop';
const ARMS: Arm[] = ['router', 'minimal hop'];
const INSTANCES = 2;
const CONNECTIONS = 64;
const BODY = JSON.stringify({ src_lang: 'en', src_text: 'Hello, how are you today?', tgt_lang: 'ko' });
/** What the fake model server answers, with the identification headers the router passes on and logs. */
const REPLY = JSON.stringify({ translated: 'olleH' });
const REPLY_HEADERS = {
  'content-type': 'application/json',
  'x-model-name': 'ko',
  'x-worker-id': 'w-0',
  'x-device': 'cpu',
};

const self = fileURLToPath(import.meta.url);
const root = fileURLToPath(new URL('../../', import.meta.url));
const ext = import.meta.url.endsWith('.ts') ? 'ts' : 'js';

interface Measured {
  requestsPerS: number;
  p50Ms: number;
  errors: number;
  /** CPU time (user + system) of the hop's processes per request answered, µs; NaN where /proc is missing. */
  cpuUsPerRequest: number;
  requests: number;
}

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const wrk = hasWrk();
  const s = section(
    'router-hop',
    '9. Router hop cost on an instant upstream',
    `The router cluster (×${INSTANCES}, validation and the per-request log line on) against a minimal Node forwarding hop ` +
      `(http.createServer + undici Pool + JSON.parse, ×${INSTANCES}), both forwarding to one fake model server that answers at once; ` +
      `${wrk ? `wrk -t2 -c${CONNECTIONS}` : `the closed-loop generator at concurrency ${CONNECTIONS} (wrk is not installed)`}.`,
  );
  const started: ManagedProcess[] = [];
  const results = new Map<Arm, Measured[]>(ARMS.map((a) => [a, []]));
  try {
    const upstream = startProcess({
      name: 'router-hop upstream',
      file: self,
      args: ['upstream'],
      execArgv: tsExecArgv(),
      cwd: root,
      logFile: path.join(ctx.workDir, 'router-hop-upstream.log'),
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
    });
    started.push(upstream);
    const upstreamUrl = `http://127.0.0.1:${portOf(await upstream.waitForLine(/"listening"/, 60_000))}`;
    const minimal = startProcess({
      name: 'router-hop minimal hop',
      file: self,
      args: ['minimal-hop', String(INSTANCES), upstreamUrl],
      execArgv: tsExecArgv(),
      cwd: root,
      logFile: path.join(ctx.workDir, 'router-hop-minimal.log'),
      env: { PATH: process.env.PATH, HOME: process.env.HOME },
    });
    started.push(minimal);
    const router = startProcess({
      name: 'router-hop router',
      file: path.join(root, 'bench', `router-cluster.${ext}`),
      args: [String(INSTANCES)],
      execArgv: tsExecArgv(),
      cwd: root,
      logFile: path.join(ctx.workDir, 'router-hop-router.log'),
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        LOG_LEVEL: 'info',
        ROUTER_ADDRESS: '127.0.0.1:0',
        INFERENCE_ADDRESS: upstreamUrl,
        ROUTER_UPSTREAM_CONNECTIONS: String(CONNECTIONS),
        SETUP_CONFIG: path.join(root, 'setup_config.json'),
      },
    });
    started.push(router);
    const origins: Record<Arm, string> = {
      'minimal hop': `http://127.0.0.1:${portOf(await minimal.waitForLine(/"listening"/, 60_000))}`,
      router: `http://127.0.0.1:${portOf(await router.waitForLine(/router cluster listening/, 60_000))}`,
    };
    const windowS = Math.max(1, Math.round(settings.echoWindowMs / 1000));
    const repeats = Math.max(2, settings.loadRepeats);
    const roots: Record<Arm, number> = { 'minimal hop': minimal.pid, router: router.pid };
    const measure = async (arm: Arm): Promise<Measured> => {
      const before = cpuTicks(roots[arm]);
      const m = wrk ? runWrk(origins[arm], windowS, ctx.workDir) : await runGenerator(ctx, origins[arm], windowS);
      const ticks = cpuTicks(roots[arm]) - before;
      return { ...m, cpuUsPerRequest: (ticks * CPU_TICK_US) / m.requests };
    };
    // One unrecorded window per arm first: both start cold (JIT, connection pools).
    for (const arm of ARMS) await measure(arm);
    for (const [r, round] of alternatingOrder(ARMS, repeats).entries()) {
      for (const arm of round) {
        if (ctx.signal.aborted) break;
        const m = await measure(arm);
        ctx.log(
          `router-hop ${arm} (${r + 1}/${repeats}): ${formatNumber(m.requestsPerS)} req/s, p50 ${formatNumber(m.p50Ms)} ms, ${formatNumber(m.cpuUsPerRequest)} µs CPU/request`,
        );
        results.get(arm)!.push(m);
      }
    }
  } finally {
    await Promise.all(started.map((p) => p.stop(5_000)));
  }
  const med = (arm: Arm, pick: (m: Measured) => number) => median(results.get(arm)!.map(pick));
  const ratio = med('router', (m) => m.requestsPerS) / med('minimal hop', (m) => m.requestsPerS);
  const cpuRatio = med('minimal hop', (m) => m.cpuUsPerRequest) / med('router', (m) => m.cpuUsPerRequest);
  s.tables.push({
    title: 'Requests/s through each hop (same upstream, same load)',
    columns: ['Hop', 'requests/s', 'p50 ms', 'µs CPU per request', 'errors'],
    rows: ARMS.map((arm) => [
      arm,
      med(arm, (m) => m.requestsPerS),
      med(arm, (m) => m.p50Ms),
      med(arm, (m) => m.cpuUsPerRequest),
      results.get(arm)!.reduce((n, m) => n + m.errors, 0),
    ]),
    note:
      `Medians of ${Math.max(2, settings.loadRepeats)} alternating repeats of ${Math.max(1, Math.round(settings.echoWindowMs / 1000))} s; ` +
      `router ÷ minimal hop ${formatRatio(ratio)} in requests/s, ${formatRatio(cpuRatio)} in requests per CPU second.`,
  });
  s.targets.push(checkTarget('router requests/s ÷ minimal hop requests/s', ratio, '>=', 0.5));
  s.notes.push(
    `Requests per CPU second, router ÷ minimal hop: ${formatRatio(cpuRatio)} (the same comparison, less moved by other load on the machine).`,
  );
  s.data = { ratio, cpuRatio, wrk, results: Object.fromEntries(results) };
  return s;
}

function hasWrk(): boolean {
  return spawnSync('wrk', ['--version'], { stdio: 'ignore' }).error === undefined;
}

function portOf(line: string): number {
  return (JSON.parse(line) as { port: number }).port;
}

function runWrk(origin: string, seconds: number, dir: string): Measured {
  const script = path.join(dir, 'router-hop-post.lua');
  writeFileSync(
    script,
    `wrk.method = "POST"\nwrk.body = '${BODY}'\nwrk.headers["Content-Type"] = "application/json"\n`,
  );
  const out = spawnSync('wrk', ['-t2', `-c${CONNECTIONS}`, `-d${seconds}s`, '--latency', '-s', script, `${origin}/`], {
    encoding: 'utf8',
  });
  if (out.status !== 0) throw new Error(`wrk failed: ${out.stderr}`);
  const rps = /Requests\/sec:\s+([\d.]+)/.exec(out.stdout);
  const total = /(\d+) requests in/.exec(out.stdout);
  const p50 = /50%\s+([\d.]+)(us|ms|s)\b/.exec(out.stdout);
  const non2xx = /Non-2xx or 3xx responses:\s+(\d+)/.exec(out.stdout);
  const socketErrors = /Socket errors:.*?(\d+).*?(\d+).*?(\d+).*?(\d+)/.exec(out.stdout);
  const unit = { us: 0.001, ms: 1, s: 1000 } as const;
  return {
    requests: total ? Number(total[1]) : NaN,
    cpuUsPerRequest: NaN,
    requestsPerS: rps ? Number(rps[1]) : NaN,
    p50Ms: p50 ? Number(p50[1]) * unit[p50[2] as keyof typeof unit] : NaN,
    errors:
      (non2xx ? Number(non2xx[1]) : 0) + (socketErrors ? socketErrors.slice(1).reduce((n, v) => n + Number(v), 0) : 0),
  };
}

async function runGenerator(ctx: BenchContext, origin: string, seconds: number): Promise<Measured> {
  const result = await runClosedLoop({
    origin,
    concurrency: CONNECTIONS,
    request: () => ({ path: '/', method: 'POST', body: BODY, headers: { 'content-type': 'application/json' } }),
    warmupMs: 500,
    minWindowMs: seconds * 1000,
    onWindowEnd: 'drain',
    signal: ctx.signal,
  });
  return {
    requestsPerS: result.requestsPerS,
    p50Ms: result.latency.p50,
    errors: result.failed,
    requests: result.answeredTotal,
    cpuUsPerRequest: NaN,
  };
}

// ── the two helper processes (this file run as a script) ──────────────────────────────────────────────

/** The fake model server: answers every request at once, after reading its body. */
function serveUpstream(): void {
  const server = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(200, REPLY_HEADERS).end(REPLY));
  });
  server.keepAliveTimeout = 75_000;
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${JSON.stringify({ msg: 'listening', port: (server.address() as AddressInfo).port })}\n`);
  });
  process.on('SIGTERM', () => process.exit(0));
}

/** The minimal forwarding hop: read the body, JSON.parse it, POST it on with an undici Pool, answer the reply. */
function serveMinimalHop(instances: number, upstreamUrl: string): void {
  if (cluster.isPrimary) {
    let listening = 0;
    for (let i = 0; i < instances; i++) {
      cluster.fork().on('message', (m: { port?: number }) => {
        if (++listening === instances) process.stdout.write(`${JSON.stringify({ msg: 'listening', port: m.port })}\n`);
      });
    }
    process.on('SIGTERM', () => {
      for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGKILL');
      process.exit(0);
    });
    return;
  }
  const pool = new Pool(upstreamUrl, { connections: CONNECTIONS });
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const input = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>;
      pool
        .request({
          method: 'POST',
          path: `/predictions/${String(input.tgt_lang)}`,
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ src_lang: input.src_lang, src_text: input.src_text }),
        })
        .then(async (r) => {
          const body = Buffer.from(await r.body.arrayBuffer());
          res.writeHead(r.statusCode, { 'content-type': 'application/json' }).end(body);
        })
        .catch(() => res.writeHead(502).end());
    });
  });
  server.keepAliveTimeout = 75_000;
  server.listen(0, '127.0.0.1', () => process.send?.({ port: (server.address() as AddressInfo).port }));
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [role, a, b] = process.argv.slice(2);
  if (role === 'upstream') serveUpstream();
  else if (role === 'minimal-hop') serveMinimalHop(Number(a), b!);
  else {
    process.stderr.write('usage: router-hop.ts upstream | minimal-hop <instances> <upstream url>\n');
    process.exit(2);
  }
}

export const routerHopScenario: Scenario = {
  id: 'router-hop',
  title: '9. Router hop cost on an instant upstream',
  run,
};
