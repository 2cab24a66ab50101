// Explore: pick a metric, a label filter, a group-by, the precision; the query it builds is the
// language Grafana targets use, shown and editable. /metrics is asked only when this tab opens.
import { post, queryBody } from "./api.js";
import { Chart, PALETTE } from "./charts.js";

const $ = (id) => document.getElementById(id);

function fill(select, options, keep) {
  const previous = select.value;
  select.replaceChildren(...options.map(([value, label]) => new Option(label, value)));
  if (keep && options.some(([v]) => v === previous)) select.value = previous;
}

export class Explore {
  constructor({ onQuery, onZoom }) {
    this.onQuery = onQuery;
    this.histograms = new Set(); this.payloads = {}; this.kind = null;
    this.loaded = null; this.frames = null; this.chart = null; this.shown = null;
    this.plot = new Chart($("chart"), "", onZoom, 380);
    $("metric").addEventListener("change", async () => { await this.loadPayloads(); this.changed(); });
    $("filter-label").addEventListener("change", () => { this.fillValues(); this.changed(); });
    for (const id of ["filter-value", "group-by", "function"]) $(id).addEventListener("change", () => this.changed());
    $("precision").addEventListener("change", () => this.onQuery($("query").value));
    $("controls").addEventListener("submit", (e) => { e.preventDefault(); this.onQuery($("query").value); });
  }

  changed() { $("query").value = this.buildQuery(); this.onQuery($("query").value); }

  /** Metrics and precisions, once. */
  async load() {
    if (!this.loaded) this.loaded = this.loadMetrics();
    await this.loaded;
  }

  buildQuery() {
    const metric = $("metric").value;
    if (!metric) return "";
    const histogram = this.histograms.has(metric);
    const label = $("filter-label").value, value = $("filter-value").value;
    // the value comes regex-escaped (Grafana's format); a quote would still end the string
    const matcher = label && value ? `{${label}=~"${value.replace(/"/g, '\\"')}"}` : "";
    const by = $("group-by").value, fn = $("function").value;
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

  unit() {
    const fn = $("function").value;
    if (fn.startsWith("p")) return "s";
    return fn === "rate" ? "/s" : "per slice";
  }

  async loadMetrics() {
    const metrics = await post("metrics", {});
    this.histograms = new Set(metrics.filter((m) => (m.payloads || []).some(
      (p) => p.name === "function" && (p.options || []).some((o) => o.value === "p95"))).map((m) => m.value));
    const names = metrics.map((m) => m.value).filter((n) => !/\.(bucket|sum_us)$/.test(n));
    fill($("metric"), names.map((n) => [n, this.histograms.has(n) ? n + " (histogram)" : n]), true);
    const precision = (metrics[0] && metrics[0].payloads.find((p) => p.name === "precision")) || { options: [] };
    fill($("precision"), precision.options.map((o) => [o.value, o.label]), true);
    await this.loadPayloads();
  }

  async loadPayloads() {
    const metric = $("metric").value;
    if (!metric) return;
    const detailed = await post("metrics", { metric, payload: {} });
    const entry = detailed.find((m) => m.value === metric) || { payloads: [] };
    this.payloads = Object.fromEntries(entry.payloads.map((p) => [p.name, p]));
    const labels = entry.payloads.filter((p) => !["function", "group_by", "precision"].includes(p.name));
    fill($("filter-label"), [["", "none"], ...labels.map((p) => [p.name, p.name])], true);
    fill($("group-by"), [["", "none"], ...labels.map((p) => [p.name, p.name])], true);
    const histogram = this.histograms.has(metric);
    const functions = histogram
      ? [["p", "p50 / p95 / p99"], ["rate", "rate of observations"], ["count", "observations per slice"]]
      : [["rate", "rate (per second)"], ["count", "count per slice"]];
    // a new kind of metric starts from its natural function (quantiles for a histogram)
    const kind = histogram ? "histogram" : "counter";
    fill($("function"), functions, kind === this.kind);
    this.kind = kind;
    this.fillValues();
    $("query").value = this.buildQuery();
  }

  fillValues() {
    const payload = this.payloads[$("filter-label").value];
    const options = payload ? payload.options || [] : [];
    fill($("filter-value"), [["", "any"], ...options.map((o) => [o.value, o.label || o.value])], true);
  }

  async refresh(state, range) {
    await this.load();
    // the URL's query is what runs: the query box follows the URL when it changed (a submit,
    // the back button), never on a timer tick, which would undo what the user is typing
    if (state.q !== this.shown) {
      $("query").value = state.q || this.buildQuery();
      this.shown = state.q;
    }
    const text = (state.q || this.buildQuery()).trim();
    if (!text) {
      $("explore-message").textContent = $("metric").options.length ? ""
        : "No metrics recorded yet: instrument the app with this Redis and they appear here.";
      return;
    }
    const precision = $("precision").value;
    const targets = text.split("\n").filter((t) => t.trim()).map((target, i) => ({
      refId: String.fromCharCode(65 + i), target,
      payload: precision && precision !== "auto" ? { precision } : {},
    }));
    const frames = await post("query", queryBody(range, $("chart").clientWidth || 900, targets));
    this.frames = frames;
    const series = frames.filter((f) => f.datapoints);
    this.plot.unit = this.unit();
    this.plot.labels = "";  // the unit may have changed: build the chart anew
    this.plot.draw(series.map((f, i) => ({
      label: f.target, color: PALETTE[i % PALETTE.length],
      t: f.datapoints.map((p) => p[1] / 1000), v: f.datapoints.map((p) => p[0]) })), []);
    this.chart = this.plot.plot;
    $("explore-message").textContent = frames.length ? "" : "no series for this query yet";
  }
}
