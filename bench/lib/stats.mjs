// Small statistics and formatting helpers.

/** Nearest-rank percentile of an ascending-sorted array (q in 0..100). */
export function pct(sorted, q) {
  if (!sorted.length) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((q / 100) * sorted.length) - 1));
  return sorted[i];
}

export function median(values) {
  const v = values.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

/** {min, med, max, n} over the finite values. */
export function spread(values) {
  const v = values.filter((x) => Number.isFinite(x));
  if (!v.length) return { min: NaN, med: NaN, max: NaN, n: 0 };
  return { min: Math.min(...v), med: median(v), max: Math.max(...v), n: v.length };
}

export function latencySummary(samples) {
  const s = Float64Array.from(samples).sort();
  let sum = 0;
  for (const x of s) sum += x;
  return { n: s.length, p50: pct(s, 50), p90: pct(s, 90), p99: pct(s, 99), max: s[s.length - 1], mean: sum / s.length };
}

/** 3 significant digits, without exponent notation. */
export function fmt(x) {
  if (x === undefined || x === null || Number.isNaN(x)) return '—';
  if (!Number.isFinite(x)) return String(x);
  const a = Math.abs(x);
  if (a >= 1000) return Math.round(x).toString();
  if (a >= 100) return x.toFixed(0);
  if (a >= 10) return x.toFixed(1);
  if (a >= 1) return x.toFixed(2);
  if (a >= 0.01) return x.toFixed(3);
  if (a === 0) return '0';
  return x.toPrecision(2);
}

/** "median (min-max)" of one figure's values over rounds, each written by `digits`. */
export function medianRange(values, digits = fmt) {
  return `${digits(median(values))} (${digits(Math.min(...values))}-${digits(Math.max(...values))})`;
}

export function fmtSpread(s) {
  if (!s || !s.n) return '—';
  if (s.n === 1 || s.min === s.max) return fmt(s.med);
  return `${fmt(s.med)} (${fmt(s.min)}–${fmt(s.max)})`;
}
