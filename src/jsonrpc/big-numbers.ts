// JSON numbers that a double cannot hold pass through mcpmux as the digits they arrived as.
//
// JSON.parse turns the id 12345678901234567890 into 12345678901234567000, and a 64-bit integer
// in a tool argument into a neighbour of it; JSON-RPC requires ids to come back exactly, and a
// proxy must not change arguments. So a text that may hold such a number (a run of 16 digits,
// or a 3-digit exponent) is read by `parseJson` with each of those literals as a marked string
// instead, and the encoder (`restoreBigNumbers`) writes the digits back without quotes. mcpmux
// only compares ids and tokens for equality, for which the marked string works as well.
// Messages without such numbers (nearly all) cost one regular-expression test.
//
// A marked string must never be read as text: code that wants a string from a peer asks
// `isText` (a kept number is not one), and code that prints a value into a message uses
// `jsonText`. As a last guard, every encoder (restoreBigNumbers: each message mcpmux writes, and
// every log and audit line) turns a marker that ended up inside a longer string back into the
// digits it stands for, so no marker ever leaves the process.

import { randomBytes } from 'node:crypto';

const NONCE = randomBytes(6).toString('hex');
/** A kept number's value after parsing: NUL, the nonce, the literal. */
const MARK = `\u0000mcpmux-num-${NONCE}:`;
/** How JSON.stringify writes a kept number (it escapes NUL as \u0000): the whole string value. */
const MARKED_JSON = new RegExp(`"\\\\u0000mcpmux-num-${NONCE}:(-?[0-9][0-9.eE+-]*)"`, 'g');
/** A marker's start inside JSON text, however many times the string holding it was escaped. */
const MARK_TEXT = `u0000mcpmux-num-${NONCE}:`;
/** A marker inside a longer string (escaped once or more): the NUL escape and the prefix. */
const EMBEDDED_JSON = new RegExp(`\\\\+u0000mcpmux-num-${NONCE}:`, 'g');
/** Where a number that loses precision may be: 16 digits in a row, or an exponent of 3 digits. */
const SUSPECT = /[0-9]{16}|[eE][+-]?[0-9]{3}/;
/** A JSON number literal, at the start of the rest of the text. */
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/** Set once a kept number has been read: until then the encoder has nothing to look for. */
let kept = false;

/** JSON.parse, keeping the numbers a double cannot hold exactly. Throws SyntaxError as it does. */
export function parseJson(text: string): unknown {
  if (!SUSPECT.test(text)) return JSON.parse(text);
  const rewritten = markBigNumbers(text);
  return JSON.parse(rewritten ?? text);
}

/**
 * `json` with every kept number written back as its digits. A marker that some code put inside
 * a longer string (an error message naming a value) becomes the digits within that string.
 */
export function restoreBigNumbers(json: string): string {
  if (!kept || !json.includes(MARK_TEXT)) return json;
  return json.replace(MARKED_JSON, '$1').replace(EMBEDDED_JSON, '');
}

/** Whether a value is a kept number (for code that must tell ids apart from strings). */
export function isKeptNumber(v: unknown): v is string {
  return typeof v === 'string' && v.startsWith(MARK);
}

/** Whether a peer's value is a string, as JSON-RPC and MCP mean it: a kept number is a number. */
export function isText(v: unknown): v is string {
  return typeof v === 'string' && !v.startsWith(MARK);
}

/** A value written as JSON for a human-readable message (`id 1e400 is already in use`). */
export function jsonText(v: unknown): string {
  return isKeptNumber(v) ? v.slice(MARK.length) : (JSON.stringify(v) ?? String(v));
}

/** The text with each imprecise number literal outside strings quoted and marked, or undefined if none. */
function markBigNumbers(text: string): string | undefined {
  let out = '';
  let from = 0;
  let i = 0;
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // Skip a string literal (escapes included); JSON.parse judges whether it is valid.
      i++;
      while (i < n) {
        const d = text.charCodeAt(i);
        if (d === 0x5c) i += 2;
        else if (d === 0x22) break;
        else i++;
      }
      i++;
      continue;
    }
    if (c === 0x2d || (c >= 0x30 && c <= 0x39)) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (!m) {
        i++;
        continue;
      }
      const literal = m[0];
      if (!exact(literal)) {
        out += text.slice(from, i) + JSON.stringify(MARK + literal);
        from = i + literal.length;
        kept = true;
      }
      i += literal.length;
      continue;
    }
    i++;
  }
  return from === 0 ? undefined : out + text.slice(from);
}

/** Whether a double holds the literal exactly, so that JSON.stringify writes the same number. */
function exact(literal: string): boolean {
  const v = Number(literal);
  if (!Number.isFinite(v)) return false;
  const digits = literal.replace(/^-/, '').replace(/[eE].*$/, '').replace('.', '').replace(/^0+/, '');
  // Underflow: 1e-400 reads as 0.
  if (v === 0 && digits.length > 0) return false;
  return digits.length <= 15;
}
