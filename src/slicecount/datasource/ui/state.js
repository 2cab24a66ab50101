// The page's state lives in the URL (shareable, back button): ?tab=explore, ?route=/x,
// ?range=3600 (the last hour, live) or ?from=<ms>&to=<ms> (a zoomed, fixed range), ?refresh=10.
export const DEFAULTS = Object.freeze({ tab: "overview", route: "", range: 3600, from: null, to: null,
                                        refresh: 10, q: "" });

function positive(text, fallback) {
  const n = Number(text);
  return text !== null && Number.isFinite(n) && n >= 0 ? n : fallback;
}

export function read(search = location.search) {
  const p = new URLSearchParams(search);
  const state = {
    tab: p.get("tab") === "explore" ? "explore" : "overview",
    route: p.get("route") || "",
    range: positive(p.get("range"), DEFAULTS.range) || DEFAULTS.range,
    from: null, to: null,
    refresh: positive(p.get("refresh"), DEFAULTS.refresh),
    q: p.get("q") || "",
  };
  const from = positive(p.get("from"), null), to = positive(p.get("to"), null);
  if (from !== null && to !== null && to > from) { state.from = from; state.to = to; }
  return state;
}

export function search(state) {
  const p = new URLSearchParams();
  if (state.tab !== DEFAULTS.tab) p.set("tab", state.tab);
  if (state.tab === "overview" && state.route) p.set("route", state.route);
  if (state.tab === "explore" && state.q) p.set("q", state.q);
  if (state.from !== null) { p.set("from", Math.round(state.from)); p.set("to", Math.round(state.to)); }
  else if (state.range !== DEFAULTS.range) p.set("range", state.range);
  if (state.refresh !== DEFAULTS.refresh) p.set("refresh", state.refresh);
  const text = p.toString();
  return text ? "?" + text : location.pathname;
}

/** The time range to read now: a zoomed one as it is, else the last `range` seconds. */
export function timeRange(state, now = Date.now()) {
  if (state.from !== null) return { from: state.from, to: state.to, live: false };
  return { from: now - state.range * 1000, to: now, live: true };
}
