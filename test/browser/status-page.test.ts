/**
 * The status page in a real browser: a whole stack in fresh processes (model server with its workers on the
 * generated tiny model, the 14 languages of setup_config.json, a router, the built-in front and, where nginx is
 * installed, an nginx front beside it), and Debian's headless Chromium driven by playwright-core. The page is
 * loaded through the fronts only; the test waits for live data, checks every language and its figures, sends
 * translation traffic and watches the figures and charts move without a reload, and saves a screenshot under
 * test-results/ for a person to look at.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findNginx } from '../../front/nginx.js';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { startFront, startStack, type Stack } from '../../harness/stack.js';

const CHROMIUM = '/usr/bin/chromium';
const ROOT = new URL('../../', import.meta.url);
const LANGUAGES = Object.keys(
  (JSON.parse(readFileSync(new URL('setup_config.json', ROOT), 'utf8')) as { cuda_id: Record<string, string> }).cuda_id,
);
const SCREENSHOT_DIR = path.join(ROOT.pathname, 'test-results');
const hasChromium = existsSync(CHROMIUM);
if (!hasChromium) {
  console.warn(
    'status-page.test: chromium is not installed; the status page is NOT tested in a browser (apt-get install chromium)',
  );
}

describe.skipIf(!hasChromium)('status page in headless Chromium', () => {
  let dir: string;
  let stack: Stack;
  let fronts: { kind: string; url: string }[];
  /** The nginx front this file starts beside the stack's own (stopped in afterAll: the stack does not know it). */
  let nginxFront: Awaited<ReturnType<typeof startFront>> | undefined;
  let context: BrowserContext;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-status-page-'));
    const modelDir = path.join(dir, 'tiny');
    makeDemoModel('tiny', modelDir);
    stack = await startStack({
      languages: LANGUAGES,
      handler: 'translation',
      modelDir,
      front: 'builtin',
      register: { maxBatchDelayMs: 5 },
      // The page and x-cache show the cache's figures only to operators who ask.
      env: { CACHE_DISCLOSE: 'true' },
    });
    fronts = [{ kind: 'builtin', url: stack.frontUrl! }];
    if (findNginx(process.env)) {
      nginxFront = await startFront({
        dir: stack.dir,
        env: stack.env,
        routerUrl: stack.routerUrls[0]!,
        kind: 'nginx',
        name: 'front-nginx',
      });
      fronts.push({ kind: 'nginx', url: nginxFront.url });
    } else {
      console.warn('status-page.test: nginx is not installed; the page is tested through the built-in front only');
    }
    context = await chromium.launchPersistentContext(path.join(dir, 'chromium-profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: [
        '--headless',
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
      viewport: { width: 1440, height: 1100 },
    });
  });

  afterAll(async () => {
    await context?.close();
    await nginxFront?.proc.stop(5_000);
    await stack?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** The page's cell text for a language and field. */
  const cell = (page: Page, lang: string, field: string) =>
    page.locator(`tr[data-lang="${lang}"] td[data-field="${field}"]`).innerText();
  const updates = async (page: Page) => Number(await page.locator('body').getAttribute('data-updates'));

  it('shows every language live through each front, and names no internal port', async () => {
    const internalPorts = [stack.inference, stack.management, stack.metrics, ...stack.routerUrls].map(
      (u) => new URL(u).port,
    );
    for (const front of fronts) {
      const page = await context.newPage();
      try {
        const response = await page.goto(`${front.url}/status`);
        expect(response?.status(), front.kind).toBe(200);
        expect(response?.headers()['x-front']).toBe(front.kind);
        await page.waitForFunction(() => Number(document.body.dataset.updates) >= 1, undefined, { timeout: 15_000 });
        await expect.poll(() => page.locator('#state').getAttribute('class')).toBe('live');
        expect(await page.locator('tr[data-lang]').count()).toBe(LANGUAGES.length);
        for (const lang of LANGUAGES) {
          // setup_config.json pins every language here to GPU 0; without one (or its CUDA provider) it runs on the CPU.
          expect(await cell(page, lang, 'device')).toMatch(/^(cuda:0|cpu \(asked cuda:0\))$/);
          expect(await cell(page, lang, 'worker')).toMatch(/^ready pid \d+$/);
          expect(await cell(page, lang, 'queueDepth')).toMatch(/^\d+$/);
        }
        // What the page and its data say, through this front, never names a port behind it.
        const html = await (await fetch(`${front.url}/status`)).text();
        const json = await (await fetch(`${front.url}/status.json`)).text();
        // One engine serves all 14, shown with the weights' type its workers report (fp32, or int8 files the
        // demo model also writes, which MODEL_DTYPE=auto prefers on the CPU).
        const engines = (JSON.parse(json) as { engines: { dtype: string }[] }).engines;
        expect(engines).toHaveLength(1);
        expect(['fp32', 'fp16', 'q8', 'q8-rows']).toContain(engines[0]!.dtype);
        expect(await page.locator('tr[data-engine]').count()).toBe(1);
        expect(await page.locator('tr[data-engine] td[data-field="dtype"]').innerText()).toBe(engines[0]!.dtype);
        expect(await page.locator('tr[data-engine] td[data-field="family"]').innerText()).toBe('M2M100');
        for (const port of internalPorts) {
          expect(html).not.toContain(`:${port}`);
          expect(json).not.toContain(`:${port}`);
        }
        expect(json).not.toContain(stack.dir);
      } finally {
        await page.close();
      }
    }
  });

  it('moves under translation traffic without a reload, and the cache hits count', async () => {
    const front = fronts[fronts.length - 1]!;
    const page = await context.newPage();
    try {
      await page.goto(`${front.url}/status`);
      await page.waitForFunction(() => Number(document.body.dataset.updates) >= 1, undefined, { timeout: 15_000 });
      const idle = await cell(page, 'ko', 'requestsPerS');
      const loadedAt = await updates(page);

      // A repeated sentence answers from the cache through the front and the router; no-cache skips it.
      const translate = (lang: string, text: string, headers: Record<string, string> = {}) =>
        fetch(front.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ src_lang: 'en', src_text: text, tgt_lang: lang }),
        });
      const first = await translate('ko', 'The status page is live.');
      const again = await translate('ko', 'The status page is live.');
      const bypass = await translate('ko', 'The status page is live.', { 'cache-control': 'no-cache' });
      expect([first.status, again.status, bypass.status]).toEqual([200, 200, 200]);
      expect([first.headers.get('x-cache'), again.headers.get('x-cache'), bypass.headers.get('x-cache')]).toEqual([
        'miss',
        'hit',
        null,
      ]);
      expect(await again.text()).toBe(await first.text());

      // Eight clients for ~8 s, every language, one sentence in three seen before.
      const stopAt = Date.now() + 8_000;
      let sent = 0;
      const client = async (c: number) => {
        for (let i = 0; Date.now() < stopAt; i++) {
          const lang = LANGUAGES[(c + i) % LANGUAGES.length]!;
          const text = i % 3 === 0 ? `Common sentence ${i % 6}.` : `Client ${c} says hello number ${i}.`;
          const res = await translate(lang, text);
          expect(res.status).toBe(200);
          await res.arrayBuffer();
          sent += 1;
        }
      };
      await Promise.all(Array.from({ length: 8 }, (_, c) => client(c)));
      expect(sent).toBeGreaterThan(50);

      // The page catches up by polling: more updates, the figures of every language moved.
      await page.waitForFunction((n) => Number(document.body.dataset.updates) >= n + 3, loadedAt, {
        timeout: 15_000,
      });
      await expect.poll(() => cell(page, 'ko', 'requestsPerS'), { timeout: 10_000 }).not.toBe(idle);
      for (const lang of LANGUAGES) {
        expect(Number(await cell(page, lang, 'requestsPerS')), lang).toBeGreaterThan(0);
        expect(await cell(page, lang, 'p50Ms'), lang).toMatch(/^\d+(\.\d+)? (ms|s)$/);
        expect(await cell(page, lang, 'p99Ms'), lang).toMatch(/^\d+(\.\d+)? (ms|s)$/);
        expect(await cell(page, lang, 'rowsPerStep'), lang).toMatch(/^\d+(\.\d+)?$/);
        expect(await cell(page, lang, 'cacheHitRatio'), lang).toMatch(/^\d+%$/);
      }
      expect(Number(await cell(page, 'ko', 'cacheHitRatio').then((t) => t.replace('%', '')))).toBeGreaterThan(0);
      expect(Number(await page.locator('#total-rps').innerText())).toBeGreaterThan(0);
      // Both charts drew a line over the samples taken meanwhile.
      for (const chart of ['#chart-rps', '#chart-queue']) {
        await expect.poll(() => page.locator(`${chart} polyline`).count(), { timeout: 10_000 }).toBeGreaterThan(0);
      }

      mkdirSync(SCREENSHOT_DIR, { recursive: true });
      const file = path.join(SCREENSHOT_DIR, 'status-page.png');
      await page.screenshot({ path: file, fullPage: true });
      console.log(`status-page.test: screenshot (${front.kind} front) at ${file}`);
    } finally {
      await page.close();
    }
  });
});
