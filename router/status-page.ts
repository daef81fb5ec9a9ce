/**
 * @module router/status-page — the status page the router serves at `GET /status`: one HTML document with its CSS
 * and script inline, no build step and nothing fetched but `/status.json` (same origin, so it works through nginx
 * and the built-in front alike). It polls every sample interval the document names (2 s) rather than holding a
 * server-sent event stream: a poll is answered by whichever router instance pm2 picks, holds no connection, and
 * passes proxies that buffer. The charts are hand-drawn SVG from the document's `history`.
 *
 * Elements the browser test reads: `body[data-updates]` (successful polls), `tr[data-lang]` rows with
 * `td[data-field]` cells, `#state` (live or stale).
 */
import { STATUS_PAGE_SCRIPT } from './status-page-script.js';

export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mt-serve status</title>
<style>
  :root {
    --bg: #f5f6f8; --panel: #ffffff; --ink: #1d2330; --muted: #6b7385; --line: #e3e6ec;
    --accent: #2f6fed; --accent-soft: rgba(47, 111, 237, 0.14); --warn: #d98a00; --bad: #d0453a; --good: #1f9d55;
  }
  * { box-sizing: border-box; }
  body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; background: var(--bg);
    color: var(--ink); }
  header { display: flex; align-items: baseline; gap: 16px; padding: 18px 28px 8px; }
  h1 { font-size: 20px; margin: 0; font-weight: 650; letter-spacing: -0.01em; }
  h1 span { color: var(--muted); font-weight: 400; }
  h2 { font-size: 13px; text-transform: uppercase; letter-spacing: 0.06em; color: var(--muted); margin: 0 0 10px;
    font-weight: 600; }
  #state { margin-left: auto; font-size: 13px; color: var(--muted); display: flex; align-items: center; gap: 6px; }
  #state::before { content: ""; width: 9px; height: 9px; border-radius: 50%; background: var(--muted); }
  #state.live::before { background: var(--good); box-shadow: 0 0 0 3px rgba(31, 157, 85, 0.18); }
  #state.stale { color: var(--bad); }
  #state.stale::before { background: var(--bad); }
  main { padding: 8px 28px 28px; display: grid; gap: 16px; }
  .cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(170px, 1fr)); gap: 16px; }
  .card, .panel { background: var(--panel); border: 1px solid var(--line); border-radius: 10px; padding: 14px 16px; }
  .card .label { color: var(--muted); font-size: 12px; text-transform: uppercase; letter-spacing: 0.05em; }
  .card .value { font-size: 26px; font-weight: 650; margin-top: 4px; font-variant-numeric: tabular-nums; }
  .card .sub { color: var(--muted); font-size: 12px; margin-top: 2px; }
  .charts { display: grid; grid-template-columns: repeat(auto-fit, minmax(380px, 1fr)); gap: 16px; }
  svg.chart { width: 100%; height: 170px; display: block; }
  svg text { font-size: 11px; fill: var(--muted); font-variant-numeric: tabular-nums; }
  table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
  th { text-align: right; font-weight: 600; color: var(--muted); font-size: 12px; padding: 6px 8px;
    border-bottom: 1px solid var(--line); white-space: nowrap; }
  td { text-align: right; padding: 6px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
  th:first-child, td:first-child, td.text, th.text { text-align: left; }
  tr:last-child td { border-bottom: none; }
  td.lang { font-weight: 650; }
  .pill { display: inline-block; padding: 1px 7px; border-radius: 9px; font-size: 12px; background: #eef1f6; }
  .pill.ready { background: rgba(31, 157, 85, 0.12); color: var(--good); }
  .pill.starting, .pill.stopping { background: rgba(217, 138, 0, 0.14); color: var(--warn); }
  .pill.dead, .pill.none { background: rgba(208, 69, 58, 0.12); color: var(--bad); }
  .muted { color: var(--muted); }
  .bar { display: inline-block; width: 70px; height: 7px; border-radius: 4px; background: #eef1f6;
    vertical-align: middle; margin-right: 6px; overflow: hidden; }
  .bar i { display: block; height: 100%; background: var(--accent); }
  td.spark svg { width: 120px; height: 22px; display: block; margin-left: auto; }
  .note { color: var(--muted); font-size: 12px; margin-top: 8px; }
</style>
</head>
<body data-updates="0">
<header>
  <h1>mt-serve <span>status</span></h1>
  <div id="state">connecting…</div>
</header>
<main>
  <section class="cards">
    <div class="card"><div class="label">Requests / s</div><div class="value" id="total-rps">–</div>
      <div class="sub" id="total-rps-sub">last minute, all languages</div></div>
    <div class="card"><div class="label">Queue depth</div><div class="value" id="total-queue">–</div>
      <div class="sub">jobs waiting now</div></div>
    <div class="card"><div class="label">Worst p99</div><div class="value" id="worst-p99">–</div>
      <div class="sub" id="worst-p99-sub">last minute</div></div>
    <div class="card"><div class="label">Cache</div><div class="value" id="cache-ratio">–</div>
      <div class="sub" id="cache-sub">hit ratio since start</div></div>
    <div class="card" id="gpu-card"><div class="label">GPU</div><div class="value" id="gpu-value">–</div>
      <div class="sub" id="gpu-sub"></div></div>
  </section>
  <section class="charts">
    <div class="panel"><h2>Throughput · requests/s</h2><svg class="chart" id="chart-rps"></svg></div>
    <div class="panel"><h2>Queue depth · jobs waiting</h2><svg class="chart" id="chart-queue"></svg></div>
  </section>
  <section class="panel">
    <h2>Engines</h2>
    <table><thead><tr><th class="text">engine</th><th class="text">family</th><th class="text">device</th>
      <th class="text">dtype</th><th class="text">pairs</th><th class="text">workers</th>
      <th class="text">memory: weights · resident</th><th>rows now</th><th>rows / step</th>
      <th class="text">GPU utilisation</th><th class="text">GPU memory</th></tr></thead>
      <tbody id="engines"></tbody></table>
  </section>
  <section class="panel">
    <h2>Languages</h2>
    <table><thead><tr><th class="text">lang</th><th class="text">device</th><th class="text">worker</th>
      <th>queue</th><th>req/s</th><th>p50</th><th>p99</th><th>rows / step</th><th>cache hits</th>
      <th>last 5 min</th></tr></thead>
      <tbody id="languages"></tbody></table>
    <div class="note" id="window-note"></div>
  </section>
  <section class="panel" id="keys-panel" hidden>
    <h2>API keys</h2>
    <table><thead><tr><th class="text">key id</th><th>requests</th><th>characters</th><th>quota</th>
      <th class="text">quota used</th></tr></thead>
      <tbody id="api-keys"></tbody></table>
  </section>
</main>
<script>
${STATUS_PAGE_SCRIPT}
</script>
</body>
</html>
`;
