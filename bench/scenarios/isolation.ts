/**
 * @module bench/scenarios/isolation — figure 11, isolation end to end: while 800 closed-loop clients flood one
 * language (`en`) through the front, the p50 of another language (`ko`, its own engine: ENGINE_SHARING=language)
 * through the front (:7777's path) against straight to its model server (:9999), taking turns request by request
 * so that drift hits both alike (target ≤ 1.5×); then 10,000 concurrent clients through the front and the router's
 * resident memory before and at its peak (it must stay bounded: the router holds a bounded line per language and
 * refuses the rest at once with 503 + Retry-After).
 *
 * The tiny model: what is measured is the serving stack's queueing, not generation.
 */
import { performance } from 'node:perf_hooks';
import { Agent, Pool, request } from 'undici';
import type { BenchContext, Scenario } from '../lib/context.js';
import { runClosedLoop } from '../lib/load-generator.js';
import { treeMemory } from '../../harness/proc-tree.js';
import { checkTarget, formatBytes, section, type Section } from '../lib/report.js';
import { startRunStack } from '../lib/stack.js';
import { median } from '../lib/stats.js';

const FLOOD = 'en';
const PROBE = 'ko';
const FLOOD_CLIENTS = 800;
const CROWD = 10_000;

async function run(ctx: BenchContext): Promise<Section> {
  const { settings } = ctx;
  const s = section(
    'isolation',
    '11. Isolation: a flood of one language, and 10,000 clients',
    `${FLOOD_CLIENTS} closed-loop clients flood "${FLOOD}" through the front; "${PROBE}" (its own engine) is probed one request at a time, ` +
      `alternately through the front and straight to :9999. Then ${CROWD} concurrent clients through the front, and the router's memory.`,
  );
  const modelDir = await ctx.model('tiny');
  const stack = await startRunStack(ctx, {
    name: 'isolation',
    modelDir,
    languages: [FLOOD, PROBE],
    engineSharing: 'language',
    maxNewTokens: 16,
  });
  const pairs = settings.mode === 'full' ? 300 : settings.mode === 'quick' ? 100 : 20;
  const front = new Pool(stack.frontUrl!, { connections: 1 });
  const direct = new Pool(stack.inference, { connections: 1 });
  const probe = async (viaFront: boolean, i: number): Promise<number> => {
    const text = `Probe sentence number ${i}.`;
    const started = performance.now();
    const res = await (viaFront ? front : direct).request({
      path: viaFront ? '/' : `/predictions/${PROBE}`,
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(
        viaFront ? { src_lang: 'en', src_text: text, tgt_lang: PROBE } : { src_lang: 'en', src_text: text },
      ),
      signal: ctx.signal,
    });
    await res.body.arrayBuffer();
    if (res.statusCode !== 200) throw new Error(`probe ${viaFront ? 'front' : ':9999'} answered ${res.statusCode}`);
    return performance.now() - started;
  };
  const viaFront: number[] = [];
  const straight: number[] = [];
  let floodAnswers = { ok: 0, failed: 0 };
  const routerPid = stack.routers[0]!.pid;
  let routerBefore = 0;
  let routerPeak = 0;
  let crowd = { ok: 0, refused: 0, other: 0 };
  /** The crowd's answers other than 200 and 503 + Retry-After, by status or the client's error code. */
  let crowdOther: Record<string, number> = {};
  try {
    for (let i = 0; i < 5; i += 1) await Promise.all([probe(true, -i), probe(false, -i)]);
    const stopFlood = new AbortController();
    const flood = runClosedLoop({
      origin: stack.frontUrl!,
      concurrency: FLOOD_CLIENTS,
      request: (seq) => ({
        path: '/',
        body: JSON.stringify({ src_lang: 'de', src_text: `Flood sentence ${seq}.`, tgt_lang: FLOOD }),
      }),
      minWindowMs: 24 * 3_600_000,
      signal: stopFlood.signal,
    });
    // The flood fills the lines before the probes start.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    for (let i = 0; i < pairs && !ctx.signal.aborted; i += 1) {
      const frontFirst = i % 2 === 0;
      const first = await probe(frontFirst, i);
      const second = await probe(!frontFirst, i);
      (frontFirst ? viaFront : straight).push(first);
      (frontFirst ? straight : viaFront).push(second);
    }
    stopFlood.abort();
    const result = await flood;
    floodAnswers = { ok: result.ok, failed: result.failed };

    routerBefore = treeMemory([routerPid]).rssBytes;
    routerPeak = routerBefore;
    const sampler = setInterval(() => (routerPeak = Math.max(routerPeak, treeMemory([routerPid]).rssBytes)), 100);
    const agent = new Agent({ connections: CROWD, keepAliveTimeout: 5_000 });
    // Each answer as its class: 200, a 503 with Retry-After (the refusal the issue asks for), else the status with
    // what it lacked, or the client's error code (ECONNRESET: the front dropped it; UND_ERR_CONNECT_TIMEOUT: the
    // front never accepted it).
    const answers = await Promise.all(
      Array.from({ length: CROWD }, (_, i) =>
        request(`${stack.frontUrl!}/`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ src_lang: 'de', src_text: `Crowd sentence ${i}.`, tgt_lang: FLOOD }),
          dispatcher: agent,
          headersTimeout: 120_000,
          bodyTimeout: 120_000,
        }).then(
          async (res) => {
            await res.body.arrayBuffer();
            if (res.statusCode !== 503) return String(res.statusCode);
            return res.headers['retry-after'] === undefined ? '503 without Retry-After' : '503';
          },
          (err: { code?: string }) => err.code ?? 'error',
        ),
      ),
    );
    clearInterval(sampler);
    await agent.destroy();
    crowd = {
      ok: answers.filter((a) => a === '200').length,
      refused: answers.filter((a) => a === '503').length,
      other: answers.filter((a) => a !== '200' && a !== '503').length,
    };
    for (const a of answers) if (a !== '200' && a !== '503') crowdOther[a] = (crowdOther[a] ?? 0) + 1;
  } finally {
    await Promise.all([front.close(), direct.close()]);
    await stack.stop();
  }

  const ratio = median(viaFront) / median(straight);
  s.tables.push({
    title: `"${PROBE}" during a flood of "${FLOOD}"`,
    columns: ['Path', 'probes', 'p50 ms'],
    rows: [
      ['front → router → model server', viaFront.length, median(viaFront)],
      ['model server :9999', straight.length, median(straight)],
    ],
    note: `The flood meanwhile: ${floodAnswers.ok} answered 200, ${floodAnswers.failed} refused or failed (503 + Retry-After when a line is full).`,
  });
  s.targets.push(
    checkTarget(`"${PROBE}" p50 through the front ÷ straight to :9999 during the flood`, ratio, '<=', 1.5, '×'),
  );
  s.tables.push({
    title: `${CROWD} concurrent clients through the front`,
    columns: ['answered 200', '503 + Retry-After', 'other', 'router RSS before', 'router RSS peak'],
    rows: [[crowd.ok, crowd.refused, crowd.other, formatBytes(routerBefore), formatBytes(routerPeak)]],
    note:
      'RSS of the router cluster process tree (its instances), sampled every 100 ms. Other: ' +
      (crowd.other === 0
        ? 'none.'
        : `${Object.entries(crowdOther)
            .map(([what, n]) => `${n} × ${what}`)
            .join(', ')} (a status without a body the router wrote, or the client's error code).`),
  });
  s.data = { viaFront, straight, ratio, floodAnswers, crowd, crowdOther, routerBefore, routerPeak };
  return s;
}

export const isolationScenario: Scenario = {
  id: 'isolation',
  title: '11. Isolation: a flood of one language, and 10,000 clients',
  run,
};
