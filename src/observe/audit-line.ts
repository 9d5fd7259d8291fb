// The audit line's JSON, built by hand: the same bytes pino wrote (the same fields, in the same
// order, undefined ones left out, non-finite numbers as null), without pino's per-line work:
// no merged object, no key loop over it, no level and time formatters. One string is built
// per line, from a constant prefix and pieces that repeat from line to line (a session's
// client, id and transport; method, server and tool names) rendered once and kept.
//
// Escaping is JSON.stringify's, so every line parses back to the values it was given, lone
// surrogates included (pino wrote a short string with one raw, which became U+FFFD on disk).

/** What a redacted value is written as (audit.ts's redacted paths too). */
export const REDACTED = '[REDACTED]';
const REDACTED_JSON = JSON.stringify(REDACTED);

/** Strings rendered once and kept: method, server and tool names repeat on every line. */
const QUOTED_MAX = 512;
/** Longer strings are not kept (a hostile host's names must not fill memory). */
const QUOTED_MAX_LENGTH = 128;
const quotedCache = new Map<string, string>();

/** A string as a JSON string literal. */
export function quote(s: string): string {
  if (s.length > QUOTED_MAX_LENGTH) return JSON.stringify(s);
  let q = quotedCache.get(s);
  if (q === undefined) {
    q = JSON.stringify(s);
    // Bounded by clearing: the few names in use come back on the next lines.
    if (quotedCache.size >= QUOTED_MAX) quotedCache.clear();
    quotedCache.set(s, q);
  }
  return q;
}

/** Any JSON value as pino wrote a field's value: strings escaped, non-finite numbers null. */
export function jsonValue(v: unknown): string | undefined {
  switch (typeof v) {
    case 'string':
      return quote(v);
    case 'number':
      return Number.isFinite(v) ? String(v) : 'null';
    case 'boolean':
      return v ? 'true' : 'false';
    case 'undefined':
    case 'function':
    case 'symbol':
      return undefined;
    default:
      return JSON.stringify(v);
  }
}

/**
 * A duration in milliseconds, rounded to the microsecond, as JSON: the very text of
 * `String(Math.round(ms * 1000) / 1000)`, built from integers. Formatting the double took V8's
 * general number printer (vsnprintf underneath), the largest single cost of an audit line.
 * Below 1e15 µs a decimal of at most three places is the shortest text of its double, so the
 * two agree; anything else (negative, huge, not finite) takes the general path.
 */
export function millisJson(ms: number): string {
  const us = Math.round(ms * 1000);
  if (!(us >= 0 && us < 1e15)) return jsonValue(us / 1000)!;
  const whole = Math.floor(us / 1000);
  let frac = us - whole * 1000;
  if (frac === 0) return String(whole);
  let places = 3;
  while (frac % 10 === 0) {
    frac /= 10;
    places--;
  }
  const digits = String(frac);
  return `${whole}.${ZEROS[places - digits.length]}${digits}`;
}
const ZEROS = ['', '0', '00'];

/**
 * ISO 8601 texts of epoch milliseconds (integers, as Date.now() gives), as Date's toISOString
 * writes them. Under load many lines share a millisecond, and every line of a second shares its
 * text up to the milliseconds: Date formats once a second.
 */
export class IsoTimes {
  private ms = NaN;
  private last = '';
  private second = NaN;
  /** "…T17:29:11." of the second's "…T17:29:11.000Z". */
  private head = '';

  text(ms: number): string {
    if (ms === this.ms) return this.last;
    const second = Math.floor(ms / 1000);
    if (second !== this.second) {
      const whole = new Date(second * 1000).toISOString();
      this.head = whole.slice(0, whole.length - 4);
      this.second = second;
    }
    const milli = ms - second * 1000;
    this.ms = ms;
    this.last = this.head + (milli < 10 ? '00' : milli < 100 ? '0' : '') + milli + 'Z';
    return this.last;
  }
}

/** `{"v":1,...}` of a flat record's defined fields, in their order (operator and reload lines). */
export function recordLine(prefix: string, fields: Record<string, unknown>): string {
  let line = prefix;
  for (const key in fields) {
    const value = jsonValue(fields[key]);
    if (value !== undefined) line += `,${quote(key)}:${value}`;
  }
  return line + '}\n';
}

/**
 * Arguments with their keys kept and every value replaced, as JSON, cut at `maxDepth` (a
 * hostile host can nest thousands deep). Own enumerable string keys only, in their order, as
 * JSON.stringify of the redacted copy had them.
 */
export function redactedJson(v: unknown, depth: number, maxDepth: number): string {
  if (typeof v !== 'object' || v === null || depth >= maxDepth) return REDACTED_JSON;
  if (Array.isArray(v)) {
    let s = '[';
    for (let i = 0; i < v.length; i++) s += (i === 0 ? '' : ',') + redactedJson(v[i], depth + 1, maxDepth);
    return s + ']';
  }
  let s = '{';
  let first = true;
  for (const k in v) {
    if (!Object.hasOwn(v, k)) continue;
    s += (first ? '' : ',') + quote(k) + ':' + redactedJson((v as Record<string, unknown>)[k], depth + 1, maxDepth);
    first = false;
  }
  return s + '}';
}
