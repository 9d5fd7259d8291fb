// JSON numbers that a double cannot hold pass through mcpmux as the digits they arrived as.
//
// JSON.parse turns the id 12345678901234567890 into 12345678901234567000, and a 64-bit integer
// in a tool argument into a neighbour of it; JSON-RPC requires ids to come back exactly, and a
// proxy must not change arguments. So a text that may hold such a number (a run of 16 digits,
// or a 3-digit exponent) is read by `parseJson` with each of those literals as a marked string
// instead, and the encoder (`restoreBigNumbers`) writes the digits back without quotes. mcpmux
// only compares ids and tokens for equality, for which the marked string works as well.
// Messages without such numbers (nearly all) cost one regular-expression test.

import { randomBytes } from 'node:crypto';

const NONCE = randomBytes(6).toString('hex');
/** A kept number's value after parsing: NUL, the nonce, the literal. */
const MARK = `\u0000mcpmux-num-${NONCE}:`;
/** How JSON.stringify writes a kept number (it escapes NUL as \u0000). */
const MARK_JSON = `"\\u0000mcpmux-num-${NONCE}:`;
const MARKED_JSON = new RegExp(`"\\\\u0000mcpmux-num-${NONCE}:(-?[0-9][0-9.eE+-]*)"`, 'g');
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

/** `json` with every kept number written back as its digits. */
export function restoreBigNumbers(json: string): string {
  if (!kept || !json.includes(MARK_JSON)) return json;
  return json.replace(MARKED_JSON, '$1');
}

/** Whether a value is a kept number (for code that must tell ids apart from strings). */
export function isKeptNumber(v: unknown): v is string {
  return typeof v === 'string' && v.startsWith(MARK);
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
