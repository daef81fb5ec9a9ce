/**
 * The Grafana dashboard (deploy/grafana/mt-serve.json) and the Prometheus configs (deploy/prometheus/) against a
 * real model server: the generated tiny M2M100 behind the translation handler on real worker processes, a few
 * translations and one failed request sent, a worker SIGKILLed (so the death counter has a sample), and a fake
 * `nvidia-smi` first on PATH (what scripts/gpu-watch.test.ts does) so the GPU gauges have samples on this
 * GPU-less host through the real GpuMonitor. Then every PromQL expression of the dashboard is parsed with
 * Prometheus's grammar and every metric it names must be a sample on /metrics now — `_bucket`, `_sum`, `_count`
 * resolved through the family's TYPE — with the labels it matches on.
 */
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { loadConfig } from '../../common/config.js';
import { createLogger } from '../../common/logger.js';
import { makeDemoModel } from '../../model-server/tools/demo-model/index.js';
import { call } from '../../harness/http.js';
import { startTestServer, type TestServer } from '../../harness/model-server.js';
import { until } from '../../harness/polling.js';
import { createRouterApp } from '../../router/app.js';
import { Upstream } from '../../router/upstream/upstream.js';
import {
  familyOf,
  parseExposition,
  parsePromQL,
  substituteGrafanaVariables,
  type Exposition,
  type Selector,
} from './promql.js';

const root = new URL('../../', import.meta.url);
const dashboard = JSON.parse(readFileSync(new URL('deploy/grafana/mt-serve.json', root), 'utf8'));

/** Labels Prometheus adds to every series of a target (static labels, relabeling), never on /metrics itself. */
const TARGET_LABELS = new Set(['instance', 'job', 'namespace', 'pod', 'hardware', 'component']);

interface Query {
  where: string;
  expr: string;
}

type Panel = {
  id: number;
  type: string;
  title: string;
  datasource?: unknown;
  targets?: { expr: string; datasource?: unknown }[];
};

function panelsOf(board: { panels: (Panel & { panels?: Panel[] })[] }): Panel[] {
  return board.panels.flatMap((p) => [p, ...(p.panels ?? [])]);
}

/** Every PromQL expression of the dashboard: panel targets and the query variables' label_values() selectors. */
function queries(): Query[] {
  const list: Query[] = [];
  for (const p of panelsOf(dashboard)) {
    for (const t of p.targets ?? []) list.push({ where: `panel "${p.title}"`, expr: t.expr });
  }
  for (const v of dashboard.templating.list as { name: string; type: string; query: { query: string } }[]) {
    if (v.type !== 'query') continue;
    // label_values(<series selector>, <label>): the selector is PromQL; the label must be on it.
    const match = /^label_values\((.+),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$/.exec(v.query.query);
    expect(match, `variable $${v.name}: ${v.query.query}`).not.toBeNull();
    list.push({ where: `variable $${v.name}`, expr: match![1]! });
    list.push({ where: `variable $${v.name} (label)`, expr: `${match![1]!.replace(/\{.*\}$/, '')}{${match![2]}!=""}` });
  }
  return list;
}

describe('Grafana dashboard and Prometheus config against a live model server', () => {
  let t: TestServer;
  let dir: string;
  let scrape: Exposition;
  let scrapeText: string;
  const savedPath = process.env.PATH;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'mt-serve-deploy-'));
    const bin = path.join(dir, 'bin');
    mkdirSync(bin);
    // What `nvidia-smi --query-gpu=index,name,utilization.gpu,memory.used,memory.total --format=csv,noheader,nounits`
    // prints on a one-GPU host (MiB, no units).
    writeFileSync(path.join(bin, 'nvidia-smi'), '#!/bin/sh\necho "0, NVIDIA H100 80GB HBM3, 37, 10240, 81559"\n');
    chmodSync(path.join(bin, 'nvidia-smi'), 0o755);
    process.env.PATH = `${bin}${path.delimiter}${savedPath}`;

    const modelDir = path.join(dir, 'tiny');
    makeDemoModel('tiny', modelDir);
    t = await startTestServer({
      entries: ['ko', 'en'],
      handler: 'translation',
      modelDir,
      setupConfig: { cuda_id: { ko: '0', en: '0' } },
      config: { numBeams: 1, maxNewTokens: 8, intraOpThreads: 1, cacheDisclose: true },
    });
    for (const m of ['ko', 'en']) {
      const res = await call(`${t.management}/models?url=${m}&batch_size=8&max_batch_delay=5`, { method: 'POST' });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const server = t;
    const translate = (model: string, text: string | string[]) =>
      call(`${server.inference}/predictions/${model}`, { body: { src_lang: 'en', src_text: text } });
    const answers = await Promise.all([
      translate('ko', 'Hello world'),
      translate('en', ['Good morning', 'How are you?']),
      translate('ko', 'See you tomorrow'),
    ]);
    for (const a of answers) expect(a.status, JSON.stringify(a.body)).toBe(200);
    // A sentence translated before: a translation cache hit.
    expect((await translate('ko', 'Hello world')).headers.get('x-cache')).toBe('hit');
    expect((await call(`${t.inference}/predictions/ko`, { body: { src_lang: 'xx', src_text: 'hi' } })).status).toBe(
      400,
    );

    // A worker death, so mt_worker_deaths_total has a sample; then wait for its restart and translate again.
    const describeKo = async () => (await call(`${server.management}/models/ko`)).body[0];
    const pid = (await describeKo()).workers[0].pid as number;
    process.kill(pid, 'SIGKILL');
    await until(
      'the worker restarted after SIGKILL',
      async () => {
        const w = (await describeKo()).workers[0];
        return w && w.pid !== pid && w.status === 'READY';
      },
      30_000,
    );
    expect((await translate('ko', 'Back again')).status).toBe(200);

    scrapeText = (await call(`${t.metrics}/metrics`)).body as string;
    scrape = parseExposition(scrapeText);
  });

  afterAll(async () => {
    process.env.PATH = savedPath;
    await t?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('is an importable dashboard: a Prometheus datasource variable used by every panel and query', () => {
    expect(dashboard).toMatchObject({ uid: 'mt-serve', title: expect.any(String), schemaVersion: expect.any(Number) });
    expect(dashboard.id ?? null).toBeNull();
    const vars = dashboard.templating.list as { name: string; type: string; query: unknown; datasource?: unknown }[];
    expect(vars.find((v) => v.name === 'datasource')).toMatchObject({ type: 'datasource', query: 'prometheus' });
    const ds = { type: 'prometheus', uid: '${datasource}' };
    for (const v of vars.filter((v) => v.type === 'query')) expect(v.datasource, `$${v.name}`).toEqual(ds);
    const panels = panelsOf(dashboard);
    expect(new Set(panels.map((p) => p.id)).size).toBe(panels.length);
    for (const p of panels.filter((p) => p.type !== 'row')) {
      expect(p.datasource, p.title).toEqual(ds);
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const target of p.targets!) expect(target.datasource, p.title).toEqual(ds);
    }
  });

  it('parses every PromQL expression with the Prometheus grammar', () => {
    const all = queries();
    expect(all.length).toBeGreaterThan(20);
    for (const q of all) {
      const parsed = parsePromQL(substituteGrafanaVariables(q.expr));
      expect(parsed.errors, `${q.where}: ${q.expr}`).toEqual([]);
      expect(parsed.selectors.length, `${q.where}: ${q.expr}`).toBeGreaterThan(0);
    }
  });

  it('names only metrics that the model server exposes now, with the labels it matches and groups on', () => {
    const used = new Set<string>();
    for (const q of queries()) {
      const parsed = parsePromQL(substituteGrafanaVariables(q.expr));
      const labelsInQuery = new Set<string>(['le', ...TARGET_LABELS]);
      for (const s of parsed.selectors) {
        const labels = scrape.samples.get(s.metric);
        expect(labels, `${q.where}: ${s.metric} is not on /metrics`).toBeDefined();
        used.add(s.metric);
        for (const l of labels!) labelsInQuery.add(l);
        for (const m of s.matchers) {
          if (TARGET_LABELS.has(m)) continue;
          expect([...labels!], `${q.where}: ${s.metric} has no label ${m}`).toContain(m);
        }
        checkHistogramUse(q, s, scrape);
      }
      // by (...) / on (...) labels must exist on some metric of the expression (le and target labels aside).
      for (const l of parsed.groupingLabels) expect([...labelsInQuery], `${q.where}: by (${l})`).toContain(l);
    }
    // The subjects the dashboard is for, each read from its mt_ metric.
    for (const name of [
      'mt_requests_total',
      'mt_jobs_total',
      'mt_request_duration_seconds_bucket',
      'mt_queue_wait_seconds_bucket',
      'mt_inference_seconds_bucket',
      'mt_queue_depth',
      'mt_batch_size_sum',
      'mt_batch_size_count',
      'mt_engine_step_rows_total',
      'mt_engine_steps_total',
      'mt_workers',
      'mt_worker_deaths_total',
      'mt_gpu_utilization_percent',
      'mt_gpu_memory_used_bytes',
      'mt_cache_hits_total',
      'mt_cache_misses_total',
      'mt_cache_bytes',
    ]) {
      expect([...used], name).toContain(name);
    }
  });

  it('has GPU samples from the real GpuMonitor (fake nvidia-smi) and histogram families typed as such', () => {
    expect(scrapeText).toMatch(/^mt_gpu_utilization_percent\{device_id="0"\} 37$/m);
    expect(scrapeText).toMatch(/^mt_gpu_memory_used_bytes\{device_id="0"\} 10737418240$/m);
    expect(familyOf('mt_request_duration_seconds_bucket', scrape.types)).toEqual({
      family: 'mt_request_duration_seconds',
      type: 'histogram',
    });
    expect(familyOf('mt_batch_size_sum', scrape.types)).toEqual({ family: 'mt_batch_size', type: 'histogram' });
    // A counter whose name ends like a suffix is its own family, not a histogram's part.
    expect(familyOf('mt_engine_steps_total', scrape.types)).toEqual({
      family: 'mt_engine_steps_total',
      type: 'counter',
    });
  });

  it('prometheus.yml scrapes the metrics port the config loader defaults to; the router exposes no metrics', async () => {
    const prom = parseYaml(readFileSync(new URL('deploy/prometheus/prometheus.yml', root), 'utf8'));
    const metrics = loadConfig({}).modelServer.metrics;
    const jobs = prom.scrape_configs as { job_name: string; metrics_path: string; static_configs: any[] }[];
    expect(jobs.map((j) => j.job_name)).toEqual(['mt-model-server']);
    expect(jobs[0]!.metrics_path).toBe('/metrics');
    expect(jobs[0]!.static_configs[0].targets).toEqual([`${metrics.host}:${metrics.port}`]);
    // The path Prometheus scrapes is the one the test scraped (t.metrics is the same app on port 0).
    expect((await fetch(`${t.metrics}${jobs[0]!.metrics_path}`)).status).toBe(200);

    const k8s = parseYaml(readFileSync(new URL('deploy/prometheus/kubernetes-scrape.yml', root), 'utf8'));
    const job = k8s.scrape_configs[0];
    expect(job.metrics_path).toBe('/metrics');
    const targetLabels = (job.relabel_configs as { target_label?: string }[]).map((r) => r.target_label);
    // The adapter rule maps series to pods by these two labels.
    expect(targetLabels).toEqual(expect.arrayContaining(['namespace', 'pod']));

    // If the router grows a /metrics, scrape it too (and update this test).
    const upstream = new Upstream({ url: 'http://127.0.0.1:9', connections: 1, timeoutMs: 1000 });
    const router = createRouterApp(
      { maxBodyBytes: 1024, languages: ['en'], logBodies: false },
      { upstream, logger: createLogger('test', 'silent') },
    );
    expect((await router.request('/metrics')).status).toBe(404);
    await upstream.close();
  });
});

/** A `_bucket` series only inside histogram_quantile, of a histogram family, with `le` kept by every aggregation. */
function checkHistogramUse(q: Query, s: Selector, scrape: Exposition): void {
  const { family, type } = familyOf(s.metric, scrape.types);
  if (s.metric.endsWith('_bucket') && type === 'histogram') {
    expect(s.inHistogramQuantile, `${q.where}: ${s.metric} outside histogram_quantile`).toBe(true);
    for (const grouping of s.groupingsToQuantile) expect(grouping, `${q.where}: by (…) drops le`).toContain('le');
  }
  if (s.inHistogramQuantile) {
    expect(type, `${q.where}: histogram_quantile over ${family}`).toBe('histogram');
    expect(s.metric, q.where).toBe(`${family}_bucket`);
  }
}
