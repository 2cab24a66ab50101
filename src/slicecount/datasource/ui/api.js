// Every request of the page goes through here: relative paths (the service's own origin, also
// behind a path prefix), JSON in and out, the bearer token when the user gave one.
const KEY = "slicecount-token";

/** The datasource answered 401: the page asks for the token (SLICECOUNT_TOKEN). */
export class AuthNeeded extends Error {}

export function token() { return sessionStorage.getItem(KEY) || ""; }

export function setToken(value) {
  if (value) sessionStorage.setItem(KEY, value); else sessionStorage.removeItem(KEY);
}

export async function post(path, body) {
  return call(path, { method: "POST", body: JSON.stringify(body),
                      headers: { "Content-Type": "application/json" } });
}

/** A GET of the Prometheus API (`api/v1/...`): its `data`. */
export async function prometheus(path, params) {
  const answer = await call(path + "?" + new URLSearchParams(params), { method: "GET", headers: {} });
  return answer.data;
}

async function call(path, init) {
  const headers = { ...init.headers, Accept: "application/json" };
  const given = token();
  if (given) headers.Authorization = "Bearer " + given;
  let response;
  try {
    response = await fetch(path, { ...init, headers });
  } catch (error) {
    throw new Error("the datasource did not answer (" + error.message + ")");
  }
  if (response.status === 401) {
    throw new AuthNeeded(given ? "The datasource refused this token: try again."
                               : "This datasource needs its token (SLICECOUNT_TOKEN).");
  }
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const error = new Error(data.message || data.error || `${response.status} ${response.statusText}`);
    error.status = response.status;  // 422: past a limit of the service (the overview copes)
    throw error;
  }
  return data;
}

/** A /query body as Grafana sends it: the server picks the precision from width and range. */
export function queryBody(range, width, targets) {
  const points = Math.max(60, Math.round(width));
  return {
    range: { from: new Date(range.from).toISOString(), to: new Date(range.to).toISOString() },
    intervalMs: Math.max(1000, Math.round((range.to - range.from) / points)),
    maxDataPoints: points,
    targets,
  };
}
