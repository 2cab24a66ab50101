// Numbers as the axes and the routes table show them, by unit.
function short(v) {
  const a = Math.abs(v);
  if (a >= 1e9) return (v / 1e9).toFixed(1) + "G";
  if (a >= 1e6) return (v / 1e6).toFixed(1) + "M";
  if (a >= 1e4) return (v / 1e3).toFixed(1) + "k";
  if (a >= 100 || Number.isInteger(v)) return v.toFixed(0);
  if (a >= 10) return v.toFixed(1);
  return v.toFixed(2);
}

export function seconds(v) {
  if (v === 0) return "0";
  if (v >= 1) return v.toFixed(v >= 10 ? 0 : 2) + " s";
  const ms = v * 1000;
  return (ms >= 10 ? ms.toFixed(0) : ms.toFixed(ms >= 1 ? 1 : 2)) + " ms";
}

/** Three significant digits, no trailing zeros: axis ticks 0.025 apart read 0.025, not 0.03. */
function precise(v) {
  return Math.abs(v) >= 1e4 ? short(v) : String(Number(v.toPrecision(3)));
}

/** An axis tick or a legend value. */
export function value(v, unit) {
  if (v == null || Number.isNaN(v)) return "";
  if (unit === "s") return v === 0 || v >= 1 ? precise(v) + " s" : precise(v * 1000) + " ms";
  if (unit === "%") return precise(v) + " %";
  return precise(v) + (unit === "/s" ? "/s" : "");
}

export function percent(v) {
  if (v == null) return "–";
  return (v === 0 || v >= 10 ? v.toFixed(0) : v.toFixed(1)) + " %";
}

export function rate(v) { return v == null ? "–" : short(v) + "/s"; }

export function slice(secondsPerSlice) {
  if (!secondsPerSlice) return "";
  if (secondsPerSlice % 86400 === 0) return secondsPerSlice / 86400 + " d";
  if (secondsPerSlice % 3600 === 0) return secondsPerSlice / 3600 + " h";
  if (secondsPerSlice % 60 === 0) return secondsPerSlice / 60 + " min";
  return secondsPerSlice + " s";
}
