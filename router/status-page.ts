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
    <table><thead><tr><th class="text">engine</th><th class="text">device</th><th class="text">dtype</th>
      <th class="text">languages</th><th class="text">workers</th><th>rows now</th><th>rows / step</th>
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
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var pollMs = 2000;
  var updates = 0;

  function el(tag, attrs, text) {
    var node = document.createElement(tag);
    for (var k in attrs || {}) node.setAttribute(k, attrs[k]);
    if (text !== undefined) node.textContent = text;
    return node;
  }
  function svgEl(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    for (var k in attrs) node.setAttribute(k, attrs[k]);
    return node;
  }
  function num(v, unit) {
    if (v === null || v === undefined) return "–";
    var text = v >= 100 ? Math.round(v).toLocaleString("en") : v >= 10 ? v.toFixed(1) : v.toFixed(2);
    return unit ? text + " " + unit : text;
  }
  function ms(v) {
    if (v === null || v === undefined) return "–";
    return v >= 1000 ? (v / 1000).toFixed(2) + " s" : v >= 10 ? Math.round(v) + " ms" : v.toFixed(1) + " ms";
  }
  function pct(v) { return v === null || v === undefined ? "–" : Math.round(v * 100) + "%"; }
  function bytes(v) {
    if (v === null || v === undefined) return "–";
    var units = ["B", "KiB", "MiB", "GiB"];
    var i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i++; }
    return (i === 0 ? v : v.toFixed(1)) + " " + units[i];
  }
  function pill(state) { return el("span", { "class": "pill " + state }, state); }
  function bar(fraction, label) {
    var cell = el("td", { "class": "text" });
    if (fraction === null) { cell.textContent = "–"; return cell; }
    var b = el("span", { "class": "bar" });
    var fill = el("i");
    fill.style.width = Math.max(0, Math.min(100, fraction * 100)) + "%";
    b.appendChild(fill);
    cell.appendChild(b);
    cell.appendChild(document.createTextNode(label));
    return cell;
  }

  /** A line (and its area) for each series over the same x axis, with a y scale from 0 to a round maximum. */
  function chart(svg, at, series, unit) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var w = svg.clientWidth || 600, h = svg.clientHeight || 170;
    svg.setAttribute("viewBox", "0 0 " + w + " " + h);
    var left = 44, right = 10, top = 10, bottom = 22;
    var max = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) max = v; }); });
    var step = niceStep(max);
    var yMax = Math.max(step * Math.ceil(max / step), step);
    var t0 = at.length ? at[0] : 0, t1 = at.length ? at[at.length - 1] : 1;
    var span = Math.max(t1 - t0, 1);
    function x(t) { return left + ((t - t0) / span) * (w - left - right); }
    function y(v) { return top + (1 - v / yMax) * (h - top - bottom); }
    for (var g = 0; g <= yMax + 1e-9; g += step) {
      svg.appendChild(svgEl("line", { x1: left, x2: w - right, y1: y(g), y2: y(g), stroke: "#e3e6ec" }));
      var label = svgEl("text", { x: left - 6, y: y(g) + 4, "text-anchor": "end" });
      label.textContent = step >= 1 ? String(Math.round(g)) : g.toFixed(Math.ceil(-Math.log10(step)));
      svg.appendChild(label);
    }
    var minutes = Math.round(span / 60000);
    var startLabel = svgEl("text", { x: left, y: h - 6 });
    startLabel.textContent = at.length > 1 ? "−" + (minutes >= 1 ? minutes + " min" : Math.round(span / 1000) + " s") : "";
    svg.appendChild(startLabel);
    var endLabel = svgEl("text", { x: w - right, y: h - 6, "text-anchor": "end" });
    endLabel.textContent = "now";
    svg.appendChild(endLabel);
    if (at.length < 2) {
      var wait = svgEl("text", { x: w / 2, y: h / 2, "text-anchor": "middle" });
      wait.textContent = "collecting samples…";
      svg.appendChild(wait);
      return;
    }
    series.forEach(function (s) {
      var points = s.values.map(function (v, i) { return x(at[i]).toFixed(1) + "," + y(v).toFixed(1); });
      if (s.fill) {
        svg.appendChild(svgEl("polygon", {
          points: x(at[0]).toFixed(1) + "," + y(0) + " " + points.join(" ") + " " + x(at[at.length - 1]).toFixed(1) + "," + y(0),
          fill: s.fill, stroke: "none"
        }));
      }
      svg.appendChild(svgEl("polyline", { points: points.join(" "), fill: "none", stroke: s.color, "stroke-width": s.width || 1.5,
        "stroke-linejoin": "round" }));
    });
  }
  function niceStep(max) {
    if (max <= 0) return 1;
    var raw = max / 4, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function spark(values) {
    var svg = svgEl("svg", { viewBox: "0 0 120 22", preserveAspectRatio: "none" });
    var max = Math.max.apply(null, values.concat([0.001]));
    var pts = values.map(function (v, i) {
      return (values.length > 1 ? (i / (values.length - 1)) * 118 + 1 : 1).toFixed(1) + "," + (21 - (v / max) * 19).toFixed(1);
    });
    if (pts.length > 1) svg.appendChild(svgEl("polyline", { points: pts.join(" "), fill: "none", stroke: "#2f6fed", "stroke-width": 1.3 }));
    return svg;
  }
  function sum(arrays) {
    var out = [];
    arrays.forEach(function (a) { a.forEach(function (v, i) { out[i] = (out[i] || 0) + v; }); });
    return out;
  }
  function workerText(workers) {
    if (!workers.length) return el("span", { "class": "pill none" }, "none");
    var span = el("span");
    workers.forEach(function (w, i) {
      if (i) span.appendChild(document.createTextNode(" "));
      span.appendChild(pill(w.state));
      span.appendChild(el("span", { "class": "muted" }, " pid " + (w.pid === null ? "–" : w.pid)));
    });
    return span;
  }

  function render(s) {
    var models = s.models;
    var gpus = {};
    s.gpus.forEach(function (g) { gpus[g.index] = g; });
    var totalRps = models.reduce(function (n, m) { return n + m.requestsPerS; }, 0);
    var totalQueue = models.reduce(function (n, m) { return n + m.queueDepth; }, 0);
    var worst = null, worstLang = "";
    models.forEach(function (m) { if (m.p99Ms !== null && (worst === null || m.p99Ms > worst)) { worst = m.p99Ms; worstLang = m.name; } });
    var hits = models.reduce(function (n, m) { return n + (m.cacheHits || 0); }, 0);
    var lookups = hits + models.reduce(function (n, m) { return n + (m.cacheMisses || 0); }, 0);
    document.getElementById("total-rps").textContent = num(totalRps);
    document.getElementById("total-rps-sub").textContent = "last " + s.windowS + " s, " + models.length + " languages";
    document.getElementById("total-queue").textContent = String(totalQueue);
    document.getElementById("worst-p99").textContent = ms(worst);
    document.getElementById("worst-p99-sub").textContent = worst === null ? "no request in the last minute" : worstLang + ", last " + s.windowS + " s";
    // Without CACHE_DISCLOSE the router leaves the cache's counters out (router/status.ts): operators only.
    var disclosed = s.cache.entries !== undefined;
    document.getElementById("cache-ratio").textContent = !s.cache.enabled ? "off" : !disclosed ? "on" : lookups ? pct(hits / lookups) : "–";
    document.getElementById("cache-sub").textContent = !s.cache.enabled
      ? "CACHE_MAX_BYTES=0"
      : !disclosed
        ? "figures on the metrics port (CACHE_DISCLOSE)"
        : "hits since start · " + bytes(s.cache.bytes) + " of " + bytes(s.cache.maxBytes) + " · " + s.cache.entries + " entries";
    if (s.gpus.length) {
      var util = s.gpus.map(function (g) { return g.utilizationPercent === null ? "n/a" : g.utilizationPercent + "%"; });
      document.getElementById("gpu-value").textContent = util.join(" · ");
      document.getElementById("gpu-sub").textContent = s.gpus.map(function (g) {
        return "GPU " + g.index + " " + g.name + " · " + bytes(g.memoryUsedBytes) + " / " + bytes(g.memoryTotalBytes);
      }).join("; ");
    } else {
      document.getElementById("gpu-value").textContent = "none";
      document.getElementById("gpu-sub").textContent = s.gpuError || "nvidia-smi reports no GPU";
    }

    var at = s.history.at;
    var perLang = models.map(function (m) { return s.history.models[m.name] || { requestsPerS: [], queueDepth: [] }; });
    var rpsSeries = sum(perLang.map(function (h) { return h.requestsPerS; }));
    if (rpsSeries.length) {
      document.getElementById("total-rps-sub").textContent += " · last " + s.sampleS + " s: " + num(rpsSeries[rpsSeries.length - 1]);
    }
    chart(document.getElementById("chart-rps"), at, [
      { values: rpsSeries, color: "#2f6fed", fill: "rgba(47, 111, 237, 0.14)", width: 2 }
    ]);
    chart(document.getElementById("chart-queue"), at, [
      { values: sum(perLang.map(function (h) { return h.queueDepth; })), color: "#d98a00", fill: "rgba(217, 138, 0, 0.14)", width: 2 }
    ]);

    var engines = document.getElementById("engines");
    engines.textContent = "";
    s.engines.forEach(function (e) {
      var g = e.gpuIndex === null ? undefined : gpus[e.gpuIndex];
      var tr = el("tr", { "data-engine": e.id });
      tr.appendChild(el("td", { "class": "text" }, e.id));
      tr.appendChild(el("td", { "class": "text", "data-field": "device", title: e.deviceFallback || "" },
        e.device + (e.deviceFallback ? " (fallback)" : "")));
      tr.appendChild(el("td", { "class": "text", "data-field": "dtype" }, e.dtype || "–"));
      tr.appendChild(el("td", { "class": "text" }, e.models.length + " (" + e.models.join(" ") + ")"));
      var wcell = el("td", { "class": "text" });
      wcell.appendChild(workerText(e.workers));
      tr.appendChild(wcell);
      tr.appendChild(el("td", { "data-field": "liveRows" }, String(e.liveRows)));
      tr.appendChild(el("td", { "data-field": "rowsPerStep" }, num(e.rowsPerStep)));
      tr.appendChild(g ? bar(g.utilizationPercent === null ? null : g.utilizationPercent / 100, (g.utilizationPercent === null ? "n/a" : g.utilizationPercent + "%"))
        : el("td", { "class": "text muted" }, "no GPU"));
      tr.appendChild(g && g.memoryUsedBytes !== null && g.memoryTotalBytes
        ? bar(g.memoryUsedBytes / g.memoryTotalBytes, bytes(g.memoryUsedBytes) + " / " + bytes(g.memoryTotalBytes))
        : el("td", { "class": "text muted" }, "–"));
      engines.appendChild(tr);
    });

    var body = document.getElementById("languages");
    body.textContent = "";
    models.forEach(function (m, i) {
      var tr = el("tr", { "data-lang": m.name });
      tr.appendChild(el("td", { "class": "lang" }, m.name));
      tr.appendChild(el("td", { "class": "text", "data-field": "device", title: m.deviceFallback || "" },
        m.device + (m.device !== m.requestedDevice ? " (asked " + m.requestedDevice + ")" : "")));
      var w = el("td", { "class": "text", "data-field": "worker" });
      w.appendChild(workerText(m.workers));
      tr.appendChild(w);
      tr.appendChild(el("td", { "data-field": "queueDepth" }, String(m.queueDepth)));
      tr.appendChild(el("td", { "data-field": "requestsPerS" }, num(m.requestsPerS)));
      tr.appendChild(el("td", { "data-field": "p50Ms" }, ms(m.p50Ms)));
      tr.appendChild(el("td", { "data-field": "p99Ms" }, ms(m.p99Ms)));
      tr.appendChild(el("td", { "data-field": "rowsPerStep" }, num(m.rowsPerStep)));
      tr.appendChild(el("td", { "data-field": "cacheHitRatio" }, pct(m.cacheHitRatio)));
      var sp = el("td", { "class": "spark" });
      sp.appendChild(spark(perLang[i].requestsPerS.slice(-60)));
      tr.appendChild(sp);
      body.appendChild(tr);
    });
    var keys = s.apiKeys || [];
    document.getElementById("keys-panel").hidden = keys.length === 0;
    var keyBody = document.getElementById("api-keys");
    keyBody.textContent = "";
    keys.forEach(function (k) {
      var tr = el("tr", { "data-key": k.id });
      tr.appendChild(el("td", { "class": "text" }, k.id));
      tr.appendChild(el("td", { "data-field": "requests" }, String(k.requests)));
      tr.appendChild(el("td", { "data-field": "characters" }, String(k.characters)));
      tr.appendChild(el("td", { "data-field": "characterQuota" }, k.characterQuota === null ? "none" : String(k.characterQuota)));
      tr.appendChild(k.characterQuota === null ? el("td", { "class": "text muted" }, "–")
        : bar(Math.min(1, k.characters / k.characterQuota), pct(k.characters / k.characterQuota)));
      keyBody.appendChild(tr);
    });
    document.getElementById("window-note").textContent =
      "Rates, percentiles, rows per decoder step and cache hits over the last " + s.windowS + " s (p50/p99: answered requests, inside the model server). Charts: one point every " +
      s.sampleS + " s.";
  }

  function setState(live, text) {
    var state = document.getElementById("state");
    state.className = live ? "live" : "stale";
    state.textContent = text;
  }

  function poll() {
    fetch("/status.json", { cache: "no-store", headers: { accept: "application/json" } })
      .then(function (res) {
        if (!res.ok) return res.json().then(function (e) { throw new Error(e.message || ("HTTP " + res.status)); });
        return res.json();
      })
      .then(function (s) {
        render(s);
        updates++;
        document.body.setAttribute("data-updates", String(updates));
        pollMs = Math.max(500, (s.sampleS || 2) * 1000);
        setState(true, "live · " + new Date(s.time).toLocaleTimeString("en-GB"));
      })
      .catch(function (err) { setState(false, "stale: " + err.message + " · retrying"); })
      .then(function () { setTimeout(poll, pollMs); });
  }
  poll();
})();
</script>
</body>
</html>
`;
