// The built-in page: pick a metric, filter, group, choose precision and range; the query it
// builds is the same language Grafana targets use, shown and editable. Talks only to the
// datasource's own endpoints (/metrics, /query), refreshes every few seconds.
"use strict";
(function () {
  const REFRESH_MS = 5000;
  const $ = (id) => document.getElementById(id);
  const state = { histograms: new Set(), payloads: {}, chart: null, timer: null, token: null };
  window.slicecount = state;  // for the browser test and for curious users

  function headers() {
    const h = { "Content-Type": "application/json", "Accept": "application/json" };
    const token = state.token || sessionStorage.getItem("slicecount-token");
    if (token) h.Authorization = "Bearer " + token;
    return h;
  }

  async function post(path, body) {
    const response = await fetch(path, { method: "POST", headers: headers(), body: JSON.stringify(body) });
    if (response.status === 401) {
      const token = window.prompt("This datasource needs its token (SLICECOUNT_TOKEN):");
      if (token) { sessionStorage.setItem("slicecount-token", token); state.token = token; return post(path, body); }
    }
    const data = await response.json();
    if (!response.ok) throw new Error(data.message || response.statusText);
    return data;
  }

  function fill(select, options, keep) {
    const previous = select.value;
    select.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
    if (keep && options.some(([v]) => v === previous)) select.value = previous;
  }

  function escapeRegex(text) { return text.replace(/[\\^$*+?.()|[\]{}\/]/g, "\\$&"); }

  function buildQuery() {
    const metric = $("metric").value;
    if (!metric) return "";
    const histogram = state.histograms.has(metric);
    const label = $("filter-label").value, value = $("filter-value").value;
    const matcher = label && value ? `{${label}=~"${value}"}` : "";
    const by = $("group-by").value;
    const fn = $("function").value;
    if (fn.startsWith("p")) {
      const selector = metric + matcher;
      const inner = by ? `sum by (${by}) (${selector})` : selector;
      return ["p50", "p95", "p99"].map((p) => `histogram_quantile(0.${p.slice(1)}, ${inner})`).join("\n");
    }
    // a histogram's observations are the sum of its bucket counters
    const selector = (histogram ? metric + ".bucket" : metric) + matcher;
    const rated = fn === "rate" ? `rate(${selector})` : selector;
    if (by) return `sum by (${by}) (${rated})`;
    return histogram ? `sum(${rated})` : rated;
  }

  function unitOf(fn) {
    if (fn.startsWith("p")) return "seconds";
    return fn === "rate" ? "per second" : "per slice";
  }

  async function loadMetrics() {
    const metrics = await post("metrics", {});
    state.histograms = new Set(metrics.filter((m) =>
      (m.payloads || []).some((p) => p.name === "function" && (p.options || []).some((o) => o.value === "p95"))
    ).map((m) => m.value));
    const names = metrics.map((m) => m.value).filter((n) => !/\.(bucket|sum_us)$/.test(n));
    fill($("metric"), names.map((n) => [n, state.histograms.has(n) ? n + " (histogram)" : n]), true);
    const precision = (metrics[0] && metrics[0].payloads.find((p) => p.name === "precision")) || { options: [] };
    fill($("precision"), precision.options.map((o) => [o.value, o.label]), true);
    $("status").textContent = `${names.length} metrics`;
    await loadPayloads();
  }

  async function loadPayloads() {
    const metric = $("metric").value;
    if (!metric) return;
    const detailed = await post("metrics", { metric, payload: {} });
    const entry = detailed.find((m) => m.value === metric) || { payloads: [] };
    state.payloads = {};
    for (const p of entry.payloads) state.payloads[p.name] = p;
    const labels = entry.payloads.filter((p) => !["function", "group_by", "precision"].includes(p.name));
    fill($("filter-label"), [["", "none"], ...labels.map((p) => [p.name, p.name])], true);
    fill($("group-by"), [["", "none"], ...labels.map((p) => [p.name, p.name])], true);
    const functions = state.histograms.has(metric)
      ? [["p", "p50 / p95 / p99"], ["rate", "rate of observations"], ["count", "observations per slice"]]
      : [["rate", "rate (per second)"], ["count", "count per slice"]];
    // a new kind of metric starts from its natural function (quantiles for a histogram)
    const kind = state.histograms.has(metric) ? "histogram" : "counter";
    fill($("function"), functions, kind === state.kind);
    state.kind = kind;
    fillValues();
    $("query").value = buildQuery();
  }

  function fillValues() {
    const payload = state.payloads[$("filter-label").value];
    const options = payload ? payload.options || [] : [];
    fill($("filter-value"), [["", "any"], ...options.map((o) => [o.value, o.label || o.value])], true);
  }

  async function run() {
    const text = $("query").value.trim();
    if (!text) return;
    const seconds = Number($("range").value);
    const to = new Date(), from = new Date(to.getTime() - seconds * 1000);
    const width = $("chart").clientWidth || 900;
    const precision = $("precision").value;
    const targets = text.split("\n").filter((t) => t.trim()).map((target, i) => ({
      refId: String.fromCharCode(65 + i), target, payload: precision && precision !== "auto" ? { precision } : {},
    }));
    const body = {
      range: { from: from.toISOString(), to: to.toISOString() },
      intervalMs: Math.max(1000, Math.round(seconds * 1000 / width)),
      maxDataPoints: width, targets,
    };
    try {
      const frames = await post("query", body);
      state.frames = frames;
      draw(frames.filter((f) => f.datapoints), unitOf($("function").value), width);
      $("message").textContent = frames.length ? "" : "no series for this query yet";
      $("status").textContent = `updated ${to.toLocaleTimeString()}`;
    } catch (error) {
      $("message").textContent = String(error.message || error);
    }
  }

  function draw(frames, unit, width) {
    const xs = frames.length ? frames[0].datapoints.map(([, t]) => t / 1000) : [];
    const data = [xs, ...frames.map((f) => f.datapoints.map(([v]) => v))];
    const palette = ["#0969da", "#cf222e", "#1a7f37", "#9a6700", "#8250df", "#bf3989", "#0550ae", "#953800"];
    const options = {
      width, height: 420,
      scales: { x: { time: true } },
      axes: [{}, { label: unit, size: 70, values: (u, ticks) => ticks.map((v) => formatValue(v, unit)) }],
      // quantiles are null where a slice saw no observation: show the points, not just lines
      series: [{}, ...frames.map((f, i) => ({
        label: f.target, stroke: palette[i % palette.length], width: 1.5, spanGaps: false,
        points: { show: unit === "seconds", size: 4, fill: palette[i % palette.length] },
      }))],
    };
    if (state.chart) state.chart.destroy();
    $("chart").replaceChildren();
    state.chart = new uPlot(options, data, $("chart"));
  }

  function formatValue(v, unit) {
    if (v == null) return "";
    if (unit === "seconds") return v >= 1 ? v.toFixed(2) + " s" : (v * 1000).toFixed(v < 0.01 ? 2 : 0) + " ms";
    const suffix = unit === "per second" ? "/s" : "";
    if (Math.abs(v) >= 1e6) return (v / 1e6).toFixed(1) + "M" + suffix;
    if (Math.abs(v) >= 1e3) return (v / 1e3).toFixed(1) + "k" + suffix;
    return (Number.isInteger(v) ? v : v.toFixed(2)) + suffix;
  }

  function rebuildAndRun() { $("query").value = buildQuery(); run(); }

  $("metric").addEventListener("change", async () => { await loadPayloads(); run(); });
  $("filter-label").addEventListener("change", () => { fillValues(); rebuildAndRun(); });
  for (const id of ["filter-value", "group-by", "function"]) $(id).addEventListener("change", rebuildAndRun);
  for (const id of ["precision", "range"]) $(id).addEventListener("change", run);
  $("controls").addEventListener("submit", (event) => { event.preventDefault(); run(); });

  loadMetrics().then(run).catch((error) => { $("message").textContent = String(error.message || error); });
  state.timer = setInterval(run, REFRESH_MS);
})();
