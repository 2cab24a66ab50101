// The page: two tabs (Overview, Explore) over one time range, all of it in the URL; one
// refresh at a time, on a timer while the range is live; the token form when the service
// answers 401. Only the service's own endpoints are called.
import { AuthNeeded, setToken } from "./api.js";
import { Explore } from "./explore.js";
import * as format from "./format.js";
import { Overview } from "./overview.js";
import * as url from "./state.js";

const $ = (id) => document.getElementById(id);
const page = { state: url.read(), refreshes: 0, timer: null, busy: false, again: false, drawnAt: null, error: "" };
window.slicecount = page;  // for the browser tests and for curious users

function go(changes, replace = false) {
  const state = { ...page.state, ...changes };
  const next = url.search(state);
  history[replace ? "replaceState" : "pushState"](null, "", next);
  apply(state);
}

function zoom(from, to) { go({ from, to }); }

page.overview = new Overview($("overview"), { onZoom: zoom, onRoute: (route) => go({ route, tab: "overview" }) });
page.explore = new Explore({ onZoom: zoom, onQuery: (q) => go({ q }, q === page.state.q) });

function message(text) { page.error = text; $("message").textContent = text; $("message").hidden = !text; }

async function refresh() {
  if (page.busy) { page.again = true; return; }  // one request at a time, the latest state next
  page.busy = true;
  const state = page.state, range = url.timeRange(state);
  const view = state.tab === "explore" ? page.explore : page.overview;
  const started = performance.now();
  try {
    await view.refresh(state, range);
    page.refreshes += 1;
    if (page.drawnAt === null) page.drawnAt = performance.now();
    $("token-form").hidden = true;
    message("");
    const slice = state.tab === "overview" && page.overview.slice ? ` · ${format.slice(page.overview.slice)} slices` : "";
    $("status").textContent = `${range.live ? "updated " : "fixed range, read "}`
      + `${new Date().toLocaleTimeString()}${slice} · ${Math.round(performance.now() - started)} ms`;
  } catch (error) {
    if (error instanceof AuthNeeded) {
      clearInterval(page.timer);  // nothing to refresh until a token is given
      $("token-form").hidden = false;
      $("token-reason").textContent = error.message;
      message("");
    } else {
      message(String(error.message || error));
    }
  } finally {
    page.busy = false;
    if (page.again) { page.again = false; refresh(); }
  }
}

function controls(state) {
  const zoomed = state.from !== null;
  const range = $("range");
  range.querySelector("option[data-custom]")?.remove();
  if (zoomed) {
    const custom = new Option(`${new Date(state.from).toLocaleString()} – ${new Date(state.to).toLocaleTimeString()}`, "custom");
    custom.dataset.custom = "1";
    range.add(custom, 0);
    range.value = "custom";
  } else {
    if (![...range.options].some((o) => Number(o.value) === state.range)) {
      const extra = new Option(format.slice(state.range), String(state.range));
      extra.dataset.custom = "1";
      range.add(extra);
    }
    range.value = String(state.range);
  }
  $("unzoom").hidden = !zoomed;
  const refresh = $("refresh");
  if (![...refresh.options].some((o) => Number(o.value) === state.refresh)) refresh.add(new Option(`${state.refresh} s`, String(state.refresh)));
  refresh.value = String(state.refresh);
  refresh.disabled = zoomed;  // a fixed range does not change: nothing to refresh
  for (const tab of ["overview", "explore"]) {
    $(tab).hidden = state.tab !== tab;
    $("tab-" + tab).setAttribute("aria-selected", String(state.tab === tab));
  }
}

function apply(state) {
  page.state = state;
  controls(state);
  clearInterval(page.timer);
  if (state.refresh > 0 && state.from === null) page.timer = setInterval(refresh, state.refresh * 1000);
  refresh();
}

$("range").addEventListener("change", (e) => {
  if (e.target.value !== "custom") go({ range: Number(e.target.value), from: null, to: null });
});
$("unzoom").addEventListener("click", () => go({ from: null, to: null }));
$("refresh").addEventListener("change", (e) => go({ refresh: Number(e.target.value) }, true));
for (const tab of ["overview", "explore"]) {
  $("tab-" + tab).addEventListener("click", (e) => {
    if (e.button === 0 && !e.metaKey && !e.ctrlKey) { e.preventDefault(); go({ tab }); }
  });
}
$("token-form").addEventListener("submit", (e) => {
  e.preventDefault();
  setToken($("token").value.trim());
  $("token").value = "";
  apply(page.state);
});
window.addEventListener("popstate", () => apply(url.read()));
let resizing = null;
window.addEventListener("resize", () => {
  clearTimeout(resizing);
  resizing = setTimeout(() => { page.overview.resize(); page.explore.plot.resize(); }, 100);
});
// the charts take their colours from the CSS: a new scheme builds them again
matchMedia("(prefers-color-scheme: dark)").addEventListener("change", () => {
  page.overview.forget(); page.explore.plot.labels = "";
  if (page.overview.frames.length) page.overview.render(page.state, url.timeRange(page.state));
});

apply(page.state);
