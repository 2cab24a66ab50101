// uPlot charts (vendored global `uPlot`) and SVG sparklines. Charts take their colours from the
// page's CSS (light or dark), start their y axis at 0, draw nulls as gaps, show annotations as
// markers and exemplars as dots linking to their traces, and report a dragged x range to
// `onZoom` instead of zooming on their own.
import * as format from "./format.js";

export const PALETTE = ["#2f81f7", "#e16f24", "#2da44e", "#bf3989", "#8250df", "#d4a72c", "#1b7c83", "#cf222e"];

function css(name) { return getComputedStyle(document.documentElement).getPropertyValue(name).trim(); }

/** Series of several timelines on one x axis (uPlot.join keeps gaps as gaps). */
export function aligned(lines) {
  if (!lines.length) return [[]];
  return uPlot.join(lines.map((l) => [l.t, l.v]));  // nulls retained: gaps stay gaps
}

function axis(fg, grid) {
  return { stroke: fg, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
}

function markers(annotations) {
  // DOM markers over the plot: a hover shows the annotation's text
  function place(u) {
    const over = u.over;
    over.querySelectorAll(".annotation").forEach((m) => m.remove());
    for (const a of annotations) {
      const x = u.valToPos(a.time / 1000, "x");
      if (!(x >= 0 && x <= over.clientWidth)) continue;
      const mark = document.createElement("div");
      mark.className = "annotation";
      mark.style.left = x + "px";
      mark.title = `${new Date(a.time).toLocaleString()}: ${a.text || a.title}${a.tags ? " [" + a.tags + "]" : ""}`;
      over.appendChild(mark);
    }
  }
  return { hooks: { ready: place, setSize: place, setScale: (u, key) => key === "x" && place(u) } };
}

/** A trace's link: the URL template with the trace id where `${__value.raw}` stands (Grafana's
 * syntax: the setting trace_url serves both), or none without a template. */
export function traceLink(template, traceId) {
  return template ? template.split("${__value.raw}").join(encodeURIComponent(traceId)) : "";
}

function dots(chart) {
  // DOM links over the plot at each exemplar's time and value; a hover says what it is
  function place(u) {
    const over = u.over;
    over.querySelectorAll(".exemplar").forEach((m) => m.remove());
    for (const e of chart.exemplars) {
      const x = u.valToPos(e.time, "x"), y = u.valToPos(e.value, "y");
      if (!(x >= 0 && x <= over.clientWidth && y >= 0 && y <= over.clientHeight)) continue;
      const href = traceLink(chart.traceUrl, e.traceId);
      const dot = document.createElement(href ? "a" : "span");
      dot.className = "exemplar";
      if (href) { dot.href = href; dot.target = "_blank"; dot.rel = "noopener"; }
      dot.style.left = x + "px"; dot.style.top = y + "px";
      dot.dataset.trace = e.traceId;
      dot.title = `trace ${e.traceId}: ${format.value(e.value, chart.unit)} at `
        + `${new Date(e.time * 1000).toLocaleTimeString()}${href ? "" : " (no trace_url set)"}`;
      over.appendChild(dot);
    }
  }
  chart.place = place;
  return { hooks: { ready: place, setSize: place, setScale: (u, key) => key === "x" && place(u) } };
}

export class Chart {
  constructor(element, unit, onZoom, height = 200) {
    this.element = element; this.unit = unit; this.onZoom = onZoom; this.height = height;
    this.plot = null; this.labels = ""; this.exemplars = []; this.traceUrl = ""; this.place = null;
  }

  /** Draw `lines` ({label, t: [s], v: [number|null], color}) with `annotations`, and
   * `exemplars` ({time: s, value, traceId}) as dots linking to `traceUrl`'s trace. */
  draw(lines, annotations, exemplars = [], traceUrl = "") {
    const labels = lines.map((l) => l.label + l.color).join("|") + "#" + JSON.stringify(annotations);
    const data = aligned(lines);
    this.exemplars = exemplars; this.traceUrl = traceUrl;
    if (this.plot && labels === this.labels) {
      this.plot.setData(data);
      if (this.place) this.place(this.plot);
      return;
    }
    this.destroy();
    this.labels = labels;
    const fg = css("--fg"), grid = css("--grid"), unit = this.unit;
    const options = {
      width: this.width(), height: this.height,
      cursor: { drag: { x: true, y: false, setScale: false }, sync: { key: "slicecount" } },
      scales: { x: { time: true, range: (u, min, max) => {
        // a slice is dated by its start: a dot later in the last one still shows
        const times = this.exemplars.map((e) => e.time);
        return [Math.min(min, ...times), Math.max(max, ...times)];
      } }, y: { range: (u, min, max) => {
        const top = Math.max(max || 0, ...this.exemplars.map((e) => e.value));  // every dot shows
        return [0, top > 0 ? top * 1.1 : 1];
      } } },
      axes: [axis(fg, grid),
             { ...axis(fg, grid), label: this.axisLabel(), size: 64,
               values: (u, ticks) => ticks.map((v) => format.value(v, unit)) }],
      legend: { live: true },
      series: [{ value: (u, v) => (v == null ? "" : new Date(v * 1000).toLocaleTimeString()) },
               ...lines.map((l) => ({ label: l.label, stroke: l.color, width: 1.5, spanGaps: false,
                                      points: { size: 4, fill: l.color },
                                      value: (u, v) => format.value(v, unit) }))],
      plugins: [markers(annotations), dots(this)],
      // uPlot updates the selection on every move of a drag: the zoom is taken once, at mouseup
      hooks: { ready: [(u) => u.over.addEventListener("mousedown", () => {
        document.addEventListener("mouseup", () => setTimeout(() => this.selected(u)), { once: true });
      })] },
    };
    this.plot = new uPlot(options, data, this.element);
  }

  axisLabel() {
    return { "/s": "per second", "%": "percent", s: "seconds" }[this.unit] || this.unit;
  }

  selected(u) {
    const { left, width } = u.select;
    if (width > 4) this.onZoom(u.posToVal(left, "x") * 1000, u.posToVal(left + width, "x") * 1000);
    // the cursor sync drew the drag on every chart of the page: clear it on all of them
    const none = { left: 0, width: 0, top: 0, height: 0 };
    for (const plot of uPlot.sync("slicecount").plots) plot.setSelect(none, false);
  }

  width() { return Math.max(240, this.element.clientWidth || 600); }
  resize() { if (this.plot) this.plot.setSize({ width: this.width(), height: this.height }); }
  destroy() {
    if (this.plot) this.plot.destroy();
    this.plot = null; this.place = null; this.element.replaceChildren();
  }
}

/** A sparkline as inline SVG: gaps (null) break the line. */
export function sparkline(values, color = PALETTE[0]) {
  const ns = "http://www.w3.org/2000/svg", w = 120, h = 28;
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${w} ${h}`);
  svg.setAttribute("class", "spark");
  svg.setAttribute("aria-hidden", "true");
  const max = Math.max(0, ...values.filter((v) => v != null));
  const step = values.length > 1 ? w / (values.length - 1) : 0;
  let d = "", pen = false, points = 0;
  values.forEach((v, i) => {
    if (v == null) { pen = false; return; }
    const y = h - 2 - (max > 0 ? (v / max) * (h - 4) : 0);
    d += `${pen ? "L" : "M"}${(i * step).toFixed(1)},${y.toFixed(1)}`;
    pen = true; points += 1;
  });
  const path = document.createElementNS(ns, "path");
  path.setAttribute("d", d);
  path.setAttribute("stroke", color);
  svg.appendChild(path);
  svg.dataset.points = points;
  return svg;
}
