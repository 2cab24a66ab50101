// The routes table's figures over the whole range, from the counts the overview's one /query
// brought back: requests per second, the share of 5xx answers, and p95 of the duration
// histogram summed over the range (Prometheus' interpolation, as histogram_quantile does).

function total(frame) {
  let sum = 0;
  for (const [v] of frame.datapoints) if (v != null) sum += v;
  return sum;
}

function bound(le) { return le === "+Inf" ? Infinity : Number(le); }

/** Prometheus' estimate from non-cumulative bucket counts (slicecount's `quantile`). */
export function quantile(q, buckets) {
  const sorted = [...buckets].filter(([le]) => !Number.isNaN(le)).sort((a, b) => a[0] - b[0]);
  const all = sorted.reduce((s, [, n]) => s + n, 0);
  if (!(all > 0)) return null;
  const rank = q * all;
  let cumulative = 0, lower = 0;
  for (const [le, n] of sorted) {
    if (n > 0 && cumulative + n >= rank) {
      return le === Infinity ? lower : lower + (le - lower) * (rank - cumulative) / n;
    }
    cumulative += n;
    if (le !== Infinity) lower = le;
  }
  return lower;
}

/**
 * One row per route, busiest first: {route, requests, rate, errorRatio, p95, spark}.
 * `counts`: sum by (route, status) of the request counter; `rates`: sum by (route) of its
 * rate (the sparkline); `buckets`: sum by (route, le) of the duration buckets.
 */
export function routeRows(counts, rates, buckets, seconds) {
  const rows = new Map();
  const row = (tags) => {
    const route = (tags && tags.route) || "";
    if (!rows.has(route)) rows.set(route, { route, requests: 0, errors: 0, buckets: new Map(), spark: [] });
    return rows.get(route);
  };
  for (const f of counts) {
    const r = row(f.tags), n = total(f);
    r.requests += n;
    if (String((f.tags || {}).status || "").startsWith("5")) r.errors += n;
  }
  for (const f of rates) row(f.tags).spark = f.datapoints.map(([v]) => v);
  for (const f of buckets) {
    const r = row(f.tags), le = bound((f.tags || {}).le);
    r.buckets.set(le, (r.buckets.get(le) || 0) + total(f));
  }
  return [...rows.values()]
    .filter((r) => r.requests > 0)
    .map((r) => ({
      route: r.route, requests: r.requests, rate: r.requests / seconds,
      errorRatio: r.errors / r.requests, p95: quantile(0.95, [...r.buckets]), spark: r.spark,
    }))
    .sort((a, b) => b.requests - a.requests || a.route.localeCompare(b.route));
}
