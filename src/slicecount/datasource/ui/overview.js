// The overview: is the app healthy, at a glance. Every panel's target travels in ONE /query per
// refresh (the routes table's too); panels of metrics the app does not record stay hidden (the
// task runs of its Celery or RQ workers show when they record some).
// With a route chosen, the same charts are filtered to it and split by method and status.
import { post, prometheus, queryBody } from "./api.js";
import { Chart, PALETTE, sparkline } from "./charts.js";
import * as format from "./format.js";
import { routeRows } from "./routes.js";

const CLASS_COLORS = { "1xx": "#8c959f", "2xx": "#2da44e", "3xx": "#2f81f7", "4xx": "#d4a72c", "5xx": "#cf222e" };
const QUANTILE_COLORS = { P50: "#2da44e", P95: "#e16f24", P99: "#cf222e" };
const STATE_COLORS = { succeeded: "#2da44e", failed: "#cf222e", retried: "#d4a72c", rejected: "#8250df", revoked: "#8c959f" };
// The targets that read every bucket series of the duration histogram: in an app of many routes
// they are the ones past the service's limits, so the rest is asked again without them.
const HEAVY = new Set(["P50", "P95", "P99", "RB", "T50", "T95", "T99", "TW"]);
const EXEMPLAR_CELLS = 150;
/** Exemplar dots on the latency chart at most: the slowest of each of this many time cells. */
const TRACE_URL = document.querySelector('meta[name="slicecount-trace-url"]')?.content || "";

/** A string literal of the query language (same escapes as JSON for a route template). */
const literal = (text) => JSON.stringify(text);

/** The targets of one refresh, by refId. */
export function targets(route) {
  const only = route ? `{route=${literal(route)}}` : "";
  const t = {
    REQ: route ? `sum by (method, status) (rate(http.requests${only}))`
               : "sum by (status) (rate(http.requests))",
    P50: `histogram_quantile(0.5, sum(http.request.duration${only}))`,
    P95: `histogram_quantile(0.95, sum(http.request.duration${only}))`,
    P99: `histogram_quantile(0.99, sum(http.request.duration${only}))`,
    // db.queries has no route label: a route's queries come from its per-request histogram
    DB: route ? `sum(rate(http.request.queries.sum_us${only})) / 1000000`
              : "sum by (operation) (rate(db.queries))",
    DBR: `sum(http.request.queries.sum_us${only}) / sum(http.request.queries.bucket${only}) / 1000000`,
    THR: `sum by (limit) (rate(http.throttled${only}))`,
    UNQ: `sum(unique(http.unique_clients${only}))`,  // a union of the routes' clients, never a sum
    Anno: "#",  // every annotation (simPod's annotation query: tags to match, none = all)
  };
  if (!route) {
    t.RC = "sum by (route, status) (http.requests)";
    t.RR = "sum by (route) (rate(http.requests))";
    t.RB = "sum by (route, le) (http.request.duration.bucket)";
    // the task workers' runs (Celery, RQ): drawn when the app's workers record them
    t.TR = "sum by (state) (rate(tasks.runs))";
    t.T50 = "histogram_quantile(0.5, sum(tasks.duration))";
    t.T95 = "histogram_quantile(0.95, sum(tasks.duration))";
    t.T99 = "histogram_quantile(0.99, sum(tasks.duration))";
    t.TW = "histogram_quantile(0.95, sum by (queue) (tasks.queue_wait))";
  }
  return Object.entries(t).map(([refId, target]) => ({ refId, target }));
}

function line(frame, label, color) {
  return { label, color, t: frame.datapoints.map((p) => p[1] / 1000), v: frame.datapoints.map((p) => p[0]) };
}

/** Frames of one target summed by `key` (one timeline per target): null only where all are. */
function summed(frames, key) {
  const groups = new Map();
  for (const f of frames) {
    const k = key(f);
    const g = groups.get(k);
    if (!g) { groups.set(k, { ...f, datapoints: f.datapoints.map((p) => [...p]) }); continue; }
    f.datapoints.forEach(([v], i) => {
      if (v != null) g.datapoints[i][0] = (g.datapoints[i][0] ?? 0) + v;
    });
  }
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

const statusClass = (f) => String((f.tags || {}).status || "?")[0] + "xx";

/** Each frame with its status class's colour (5xx red, 2xx green...), lighter for the second
 * and later lines of one class (several methods or statuses). */
function byClass(frames) {
  const seen = {};
  return frames.map((f) => {
    const k = statusClass(f), n = (seen[k] = (seen[k] || 0) + 1) - 1;
    const base = CLASS_COLORS[k] || PALETTE[0];
    return [f, n ? base + ["b0", "80", "60"][Math.min(n - 1, 2)] : base];
  });
}

function errorRatio(requests) {
  if (!requests.length) return [];
  const [[, all]] = summed(requests, () => "all");
  const errors = summed(requests.filter((f) => statusClass(f) === "5xx"), () => "5xx");
  const bad = errors.length ? errors[0][1].datapoints : [];
  const v = all.datapoints.map(([n], i) => (n > 0 ? 100 * ((bad[i] && bad[i][0]) || 0) / n : null));
  return [{ label: "5xx share", color: CLASS_COLORS["5xx"], t: all.datapoints.map((p) => p[1] / 1000), v }];
}

function sliceOf(frames) {
  const points = frames.length ? frames[0].datapoints : [];
  return points.length > 1 ? (points[1][1] - points[0][1]) / 1000 : 0;
}

const PANELS = [
  { id: "requests", unit: "/s", core: true,
    title: (route) => (route ? "Requests by method and status" : "Requests by status class"),
    lines: (by, route) => (route
      ? byClass(by.REQ).map(([f, color]) => line(f, `${f.tags.method || "?"} ${f.tags.status || "?"}`, color))
      : summed(by.REQ, statusClass).map(([k, f]) => line(f, k, CLASS_COLORS[k] || PALETTE[0]))) },
  { id: "errors", unit: "%", core: true, title: () => "Error ratio (5xx share of requests)",
    lines: (by) => errorRatio(by.REQ) },
  { id: "latency", unit: "s", core: true, title: () => "Latency p50 / p95 / p99",
    lines: (by) => ["P50", "P95", "P99"].flatMap((r) => by[r].map((f) => line(f, r.toLowerCase(), QUANTILE_COLORS[r]))) },
  { id: "db-rate", unit: "/s", title: () => "DB queries per second",
    lines: (by, route) => by.DB.map((f, i) => line(f, route ? "queries" : f.tags.operation || "all", PALETTE[i % PALETTE.length])) },
  { id: "db-per-request", unit: "queries", title: () => "DB queries per request",
    lines: (by) => by.DBR.map((f) => line(f, "mean per request", PALETTE[4])) },
  { id: "throttled", unit: "/s", title: () => "Throttled requests (429 by a limit)",
    lines: (by) => by.THR.map((f, i) => line(f, `limit ${f.tags.limit || "?"}`, PALETTE[(i + 1) % PALETTE.length])) },
  { id: "clients", unit: "clients", title: () => "Unique clients",
    lines: (by) => by.UNQ.map((f) => line(f, `distinct per ${format.slice(sliceOf(by.UNQ))}`, PALETTE[6])) },
  { id: "task-runs", unit: "/s", title: () => "Task runs by state",
    lines: (by) => (by.TR || []).map((f, i) => line(f, f.tags.state || "?", STATE_COLORS[f.tags.state] || PALETTE[i % PALETTE.length])) },
  { id: "task-duration", unit: "s", title: () => "Task run time p50 / p95 / p99",
    lines: (by) => [["T50", "P50"], ["T95", "P95"], ["T99", "P99"]].flatMap(([r, q]) => (by[r] || []).map((f) => line(f, q.toLowerCase(), QUANTILE_COLORS[q]))) },
  { id: "task-wait", unit: "s", title: () => "Task queue wait p95",
    lines: (by) => (by.TW || []).map((f, i) => line(f, f.tags.queue || "all queues", PALETTE[i % PALETTE.length])) },
];

export class Overview {
  constructor(root, { onZoom, onRoute }) {
    this.root = root; this.onRoute = onRoute;
    this.grid = root.querySelector("#panels");
    this.charts = {}; this.rows = []; this.frames = []; this.slice = 0; this.refused = "";
    this.exemplars = [];
    for (const spec of PANELS) {
      const panel = document.createElement("article");
      panel.className = "panel"; panel.id = "panel-" + spec.id; panel.hidden = true;
      panel.innerHTML = '<h3></h3><div class="chart"></div><p class="empty" hidden></p>';
      this.grid.appendChild(panel);
      this.charts[spec.id] = new Chart(panel.querySelector(".chart"), spec.unit, onZoom);
    }
  }

  async refresh(state, range) {
    const width = this.grid.querySelector(".chart").clientWidth || this.grid.clientWidth / 2 || 600;
    const wanted = targets(state.route);
    this.refused = "";
    // asked beside the panels' /query; without them (any failure) the chart draws all the same
    const exemplars = exemplarsOf(state.route, range).catch(() => []);
    try {
      this.frames = await post("query", queryBody(range, width, wanted));
    } catch (error) {
      if (error.status !== 422) throw error;
      // one target past a limit must not blank the page: the rest draws, latency says why
      this.frames = await post("query", queryBody(range, width, wanted.filter((t) => !HEAVY.has(t.refId))));
      this.refused = error.message;
    }
    this.exemplars = await exemplars;
    this.render(state, range);
  }

  render(state, range) {
    const by = Object.fromEntries(targets(state.route).map((t) => [t.refId, []]));
    for (const f of this.frames) (by[f.refId] || (by[f.refId] = [])).push(f);
    const annotations = by.Anno.flatMap((table) => table.rows.map(([time, , title, text, tags]) => ({ time, title, text, tags })));
    this.slice = sliceOf(by.REQ);
    this.crumbs(state.route);
    const noRequests = !by.REQ.length;
    const nothing = noRequests && !(by.TR || []).length;  // a worker alone has its panels
    this.root.querySelector("#empty-state").hidden = !nothing;
    this.root.querySelector("#empty-state").textContent = state.route
      ? `No requests to ${state.route} in this range.`
      : "No requests or task runs recorded in this range yet. Instrument the app (SliceCount(app), "
        + "SliceCountMiddleware, Django's middleware) or its Celery or RQ workers with this Redis: "
        + "they appear here within seconds.";
    for (const spec of PANELS) {
      const panel = this.root.querySelector("#panel-" + spec.id), chart = this.charts[spec.id];
      const lines = spec.lines(by, state.route);
      const drawn = lines.some((l) => l.v.some((v) => v != null));
      panel.hidden = !drawn && !(spec.core && !noRequests);
      panel.querySelector("h3").textContent = spec.title(state.route);
      panel.querySelector(".empty").hidden = drawn;
      panel.querySelector(".empty").textContent = spec.id === "latency" && this.refused
        ? "Not drawn: " + this.refused : "No data in this range yet.";
      const traced = spec.id === "latency" ? this.exemplars : [];
      if (drawn) chart.draw(lines, annotations, traced, TRACE_URL); else chart.destroy();
    }
    this.table(state.route ? [] : routeRows(by.RC, by.RR, by.RB, (range.to - range.from) / 1000));
    this.root.querySelector("#routes-section").hidden = Boolean(state.route) || noRequests;
  }

  crumbs(route) {
    const nav = this.root.querySelector("#crumbs");
    if (!route) { nav.replaceChildren(); return; }
    const back = document.createElement("a");
    back.href = "?"; back.textContent = "All routes"; back.id = "back-to-overview";
    back.addEventListener("click", (e) => { if (plain(e)) { e.preventDefault(); this.onRoute(""); } });
    const here = document.createElement("strong");
    here.textContent = route;
    nav.replaceChildren(back, " › ", here);
  }

  table(rows) {
    this.rows = rows;
    const body = this.root.querySelector("#routes tbody");
    body.replaceChildren(...rows.map((r) => {
      const tr = document.createElement("tr");
      tr.dataset.route = r.route;
      const link = document.createElement("a");
      link.href = "?route=" + encodeURIComponent(r.route);
      link.textContent = r.route || "(no route)";
      const cells = [link, format.rate(r.rate), format.percent(100 * r.errorRatio),
                     r.p95 == null ? "–" : format.seconds(r.p95), sparkline(r.spark)];
      for (const [i, content] of cells.entries()) {
        const td = document.createElement("td");
        td.append(content);
        if (i > 0 && i < 4) td.className = "num";
        if (i === 2 && r.errorRatio > 0.01) td.classList.add("bad");
        tr.appendChild(td);
      }
      tr.addEventListener("click", (e) => { if (plain(e)) { e.preventDefault(); this.onRoute(r.route); } });
      return tr;
    }));
  }

  resize() { for (const c of Object.values(this.charts)) c.resize(); }
  /** Forget the charts (the colour scheme changed): the next render builds them anew. */
  forget() { for (const c of Object.values(this.charts)) c.destroy(); }
}

/** The latency chart's exemplars (a traced request's trace beside its duration), asked of
 * the Prometheus API as Grafana does: the slowest of each time cell, oldest first. */
async function exemplarsOf(route, range) {
  const only = route ? `{route=${literal(route)}}` : "";
  const data = await prometheus("api/v1/query_exemplars", {
    query: `http_request_duration_seconds_bucket${only}`,
    start: String(range.from / 1000), end: String(range.to / 1000),
  });
  const cell = (range.to - range.from) / 1000 / EXEMPLAR_CELLS, slowest = new Map();
  for (const series of data || []) {
    for (const e of series.exemplars) {
      const time = Number(e.timestamp), value = Number(e.value);
      const at = Math.floor((time - range.from / 1000) / cell), kept = slowest.get(at);
      if (!kept || value > kept.value) slowest.set(at, { time, value, traceId: e.labels.trace_id || "" });
    }
  }
  return [...slowest.values()].sort((a, b) => a.time - b.time);
}

/** A plain left click (a modified one opens the link in a new tab, as links do). */
function plain(e) { return e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey; }
