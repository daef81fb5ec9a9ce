/**
 * @module router/status-page-script — the status page's inline script (router/status-page.ts): it polls
 * `/status.json` (with the admin key given as `#key=…`, for the API keys' table), fills the cards and tables, and
 * draws the SVG charts from the document's `history`.
 */
export const STATUS_PAGE_SCRIPT = `(function () {
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
      tr.appendChild(el("td", { "class": "text", "data-field": "family" }, e.family || "–"));
      tr.appendChild(el("td", { "class": "text", "data-field": "device", title: e.deviceFallback || "" },
        e.device + (e.deviceFallback ? " (fallback)" : "")));
      tr.appendChild(el("td", { "class": "text", "data-field": "dtype" }, e.dtype || "–"));
      tr.appendChild(el("td", { "class": "text", "data-field": "pairs", title: e.models.join(" ") },
        e.pairs.length ? e.pairs.join(", ") : e.models.join(" ")));
      var wcell = el("td", { "class": "text" });
      wcell.appendChild(workerText(e.workers));
      tr.appendChild(wcell);
      tr.appendChild(el("td", { "class": "text", "data-field": "memory" },
        bytes(e.weightsBytes) + " · " + bytes(e.residentBytes)));
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

  // The API keys' table is answered to an admin key only. One given after "#key=" in the page's address is sent with
  // each poll: the fragment never leaves the browser, so it is in no URL a server or proxy logs.
  var adminKey = /(?:^#|&)key=([^&]+)/.exec(location.hash);
  var headers = { accept: "application/json" };
  if (adminKey) headers.authorization = "Bearer " + decodeURIComponent(adminKey[1]);

  function poll() {
    fetch("/status.json", { cache: "no-store", headers: headers })
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
})();`;
