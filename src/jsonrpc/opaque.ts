// Large string values travel through mcpmux as the bytes they arrived as.
//
// A 10 MB tool argument or result is one long JSON string that mcpmux never reads: it only
// rewrites the message's id and, perhaps, a tool name or a URI. Parsing that string and
// serialising it again costs two copies and two full scans per hop, and several times the
// message's size in memory. So, for long lines, `decodeJson` finds the long string values in
// the raw bytes first, parses a skeleton in which each is replaced by a short placeholder, and
// keeps the raw bytes (the JSON string literal, quotes and escapes included). The encoders in
// framing.ts splice those bytes back where the placeholders are, so the string is never decoded.
//
// The rules that keep this safe:
// - Only string *values* are kept as bytes, never keys, and never the values of keys whose
//   strings mcpmux reads or rewrites anywhere (`READ_KEYS`): names, URIs, ids, tokens, types.
// - The bytes belong to one message's payload (`params` or `result`), stored under the
//   `OPAQUE` symbol. A placeholder anywhere else (the envelope, a batch) makes the whole message
//   decode as usual.
// - Only payloads whose consumer says it passes them through (a forwarded tools/call, a
//   sampling request...) keep placeholders; the Endpoint calls `materialise` on every other
//   one before anyone reads it (`EndpointOptions.opaqueRequests`, `PendingOptions.opaque`).
// - Placeholders carry a random per-process nonce and a NUL, so a peer cannot write one by
//   accident; one the encoder cannot resolve is left as the (valid JSON) string it is.

import { isUtf8 } from 'node:buffer';
import { randomBytes } from 'node:crypto';
import { parseJson } from './big-numbers.js';
import { BACKSLASH, COLON, isHex, isJsonSpace, isSimpleEscape, OPEN_BRACE, QUOTE } from './json-lex.js';

/** The raw string literals of a payload, indexed by placeholder number. */
export const OPAQUE = Symbol('mcpmux.opaque');

export type OpaqueSlices = Buffer[];

/** Lines shorter than this are parsed as usual: scanning them would cost more than it saves. */
export const OPAQUE_MIN_LINE = 32 * 1024;
/** String literals (in bytes, quotes included) at least this long are kept as bytes. */
export const OPAQUE_MIN_STRING = 8 * 1024;

const NONCE = randomBytes(6).toString('hex');
/** A placeholder's value after JSON.parse: NUL, the nonce, the slice number. */
const MARK = `\u0000mcpmux-${NONCE}-`;
/** How JSON.stringify writes the start of a placeholder (it escapes NUL as \u0000). */
export const MARK_JSON = `"\\u0000mcpmux-${NONCE}-`;

/**
 * Keys whose string values mcpmux reads or rewrites somewhere (routing, URI and id rewriting,
 * downgrades for older hosts, policy, logging). Their values are always parsed, however long.
 */
const READ_KEYS = new Set([
  'jsonrpc', 'id', 'method', 'name', 'title', 'description', 'uri', 'type', 'mimeType', 'mode',
  'cursor', 'nextCursor', 'progressToken', 'taskId', 'elicitationId', 'requestId', 'level',
  'logger', 'protocolVersion', 'status', 'reason', 'message', 'url',
  // Moved from a 2026-07-28 answer into the retry (or into mcpmux's own token): another message.
  'requestState',
]);


/** Parses one JSON text given as bytes. Throws SyntaxError as JSON.parse does. */
export function decodeJson(buf: Buffer): unknown {
  // Batches are always decoded whole (see the rules above): no point scanning them.
  if (buf.length < OPAQUE_MIN_LINE || buf[skipSpace(buf, 0)] !== OPEN_BRACE) return parseJson(buf.toString('utf8'));
  const slices: OpaqueSlices = [];
  const skeleton = hoist(buf, slices);
  if (slices.length === 0) return parseJson(skeleton);
  let value: unknown;
  try {
    value = parseJson(skeleton);
  } catch {
    // Report the peer's own text, not the skeleton's (offsets, placeholders).
    return parseJson(buf.toString('utf8'));
  }
  const key = payloadKey(value);
  const payload = key && ((value as Record<string, unknown>)[key] as Record<string | symbol, unknown>);
  if (!key || !payload || envelopeHasMark(value as Record<string, unknown>, key)) {
    // Somewhere we do not track (a batch, an error, an unknown envelope field): decode it all.
    return parseJson(buf.toString('utf8'));
  }
  payload[OPAQUE] = slices;
  return value;
}

/**
 * The text of `buf` with every long string value that is not under a READ_KEYS key replaced by
 * a placeholder; the replaced literals are appended to `slices`. Returns the text unchanged
 * (decoded) when there is nothing to replace.
 */
function hoist(buf: Buffer, slices: OpaqueSlices): string {
  const parts: string[] = [];
  let copied = 0;
  let pos = 0;
  let lastKey: string | undefined;
  for (;;) {
    const open = buf.indexOf(QUOTE, pos);
    if (open === -1) break;
    const close = closingQuote(buf, open + 1);
    if (close === -1) break; // unterminated: JSON.parse will say so
    pos = close + 1;
    if (buf[skipSpace(buf, pos)] === COLON) {
      lastKey = keyText(buf, open, close);
      continue;
    }
    if (close + 1 - open < OPAQUE_MIN_STRING) continue;
    // A value right after `:` belongs to the last key; after `[` or `,` it is an array element.
    const afterColon = buf[skipSpaceBack(buf, open - 1)] === COLON;
    if (afterColon && (lastKey === undefined || READ_KEYS.has(lastKey))) continue;
    // JSON.parse would have checked it; bytes passed on must be a valid string literal too.
    const bad = badStringByte(buf, open + 1, close);
    if (bad !== -1) throw new SyntaxError(`Bad character or escape in JSON string at position ${bad}`);
    const literal = buf.subarray(open, close + 1);
    // Invalid UTF-8 is decoded (with U+FFFD) as usual, never passed on: a WebSocket peer
    // would close the connection over it.
    if (!isUtf8(literal)) continue;
    parts.push(buf.toString('utf8', copied, open), `${MARK_JSON}${slices.length}"`);
    slices.push(literal);
    copied = close + 1;
  }
  if (slices.length === 0) return buf.toString('utf8');
  parts.push(buf.toString('utf8', copied));
  return parts.join('');
}

/** The index of the quote that closes a string whose first content byte is at `from`, or -1. */
function closingQuote(buf: Buffer, from: number): number {
  for (;;) {
    const q = buf.indexOf(QUOTE, from);
    if (q === -1) return -1;
    let k = q - 1;
    while (buf[k] === BACKSLASH) k--;
    if ((q - 1 - k) % 2 === 0) return q; // an even run of backslashes escapes only themselves
    from = q + 1;
  }
}

/**
 * The offset of the first byte that makes buf[start, end) an invalid JSON string body (a raw
 * control character or a bad escape), or -1. Control bytes are looked for a 32-bit word at a
 * time.
 * UTF-8 is checked by the caller.
 */
function badStringByte(buf: Buffer, start: number, end: number): number {
  let i = start;
  const pad = (4 - ((buf.byteOffset + i) & 3)) & 3;
  for (const stop = Math.min(end, i + pad); i < stop; i++) if (buf[i]! < 0x20) return i;
  const words = (end - i) >>> 2;
  if (words > 0) {
    const v = new Uint32Array(buf.buffer, buf.byteOffset + i, words);
    let k = 0;
    // Eight words a step with one branch: twice as fast as a branch per word. On a hit, the
    // word-by-word loop below finds the byte.
    for (; k + 8 <= words; k += 8) {
      const any =
        below20(v[k]!) | below20(v[k + 1]!) | below20(v[k + 2]!) | below20(v[k + 3]!) |
        below20(v[k + 4]!) | below20(v[k + 5]!) | below20(v[k + 6]!) | below20(v[k + 7]!);
      if (any !== 0) break;
    }
    for (; k < words; k++) {
      if (below20(v[k]!) !== 0) {
        for (let j = i + k * 4; j < i + k * 4 + 4; j++) if (buf[j]! < 0x20) return j;
      }
    }
    i += words * 4;
  }
  for (; i < end; i++) if (buf[i]! < 0x20) return i;
  // Searched within this string only: indexOf on the whole line would rescan the rest of the
  // message for every string, quadratic in the number of long strings.
  const body = buf.subarray(start, end);
  for (let b = body.indexOf(BACKSLASH); b !== -1; b = body.indexOf(BACKSLASH, b + 2)) {
    const e = body[b + 1];
    if (e === 0x75) {
      for (let h = b + 2; h < b + 6; h++) if (h >= body.length || !isHex(body[h]!)) return start + b;
    } else if (!isSimpleEscape(e!)) return start + b;
  }
  return -1;
}

/** Non-zero iff some byte of the 32-bit word `w` is below 0x20 (exact for thresholds up to 0x80). */
function below20(w: number): number {
  return (w - 0x20202020) & ~w & 0x80808080;
}


/** A key's text; undefined for keys too long to be one of READ_KEYS. */
function keyText(buf: Buffer, open: number, close: number): string | undefined {
  if (close - open > 64) return undefined;
  const raw = buf.toString('utf8', open, close + 1);
  // An escaped key ("na\u006de") must still be recognised for what it means.
  return raw.includes('\\') ? (JSON.parse(raw) as string) : raw.slice(1, -1);
}


function skipSpace(buf: Buffer, i: number): number {
  while (isJsonSpace(buf[i])) i++;
  return i;
}

function skipSpaceBack(buf: Buffer, i: number): number {
  while (isJsonSpace(buf[i])) i--;
  return i;
}

/** Where a message's payload is: `params` or `result`, when it is an object. */
function payloadKey(value: unknown): 'params' | 'result' | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const v = value as { params?: unknown; result?: unknown };
  const key = v.params !== undefined ? 'params' : 'result';
  const p = v[key];
  return typeof p === 'object' && p !== null && !Array.isArray(p) ? key : undefined;
}

/** Whether a placeholder sits anywhere in the message outside its payload. */
function envelopeHasMark(msg: Record<string, unknown>, payload: string): boolean {
  let found = false;
  const { [payload]: _payload, ...envelope } = msg;
  eachString(envelope, (s) => {
    if (s.startsWith(MARK)) found = true;
    return undefined;
  });
  return found;
}

/**
 * Calls `visit` on every string value inside `root`; a string it returns replaces the value.
 * Iterative, not recursive: how deep a message nests is the peer's choice.
 */
function eachString(root: object, visit: (s: string) => string | undefined): void {
  const stack: object[] = [root];
  while (stack.length > 0) {
    const node = stack.pop() as Record<string, unknown>;
    for (const k of Object.keys(node)) {
      const v = node[k];
      if (typeof v === 'string') {
        const replaced = visit(v);
        if (replaced !== undefined) node[k] = replaced;
      } else if (typeof v === 'object' && v !== null) {
        stack.push(v);
      }
    }
  }
}

/** The raw slices a payload carries, if any. */
export function opaqueSlices(payload: unknown): OpaqueSlices | undefined {
  return typeof payload === 'object' && payload !== null ? ((payload as Record<symbol, unknown>)[OPAQUE] as OpaqueSlices | undefined) : undefined;
}

/** Replaces every placeholder in `payload` by the string it stands for, in place. */
export function materialise(payload: Record<string | symbol, unknown>): void {
  const slices = opaqueSlices(payload);
  if (!slices) return;
  delete payload[OPAQUE];
  eachString(payload, (s) => (s.startsWith(MARK) ? resolve(s, slices) : undefined));
}

function resolve(placeholder: string, slices: OpaqueSlices): string {
  const slice = slices[Number(placeholder.slice(MARK.length))];
  return slice === undefined ? placeholder : (JSON.parse(slice.toString('utf8')) as string);
}

/**
 * Splits the JSON text of a message whose payload carries `slices` at each placeholder, and
 * puts the raw literal in its place. Returns undefined when there is no placeholder in `json`.
 */
export function splice(json: string, slices: OpaqueSlices): (string | Buffer)[] | undefined {
  let at = json.indexOf(MARK_JSON);
  if (at === -1) return undefined;
  const out: (string | Buffer)[] = [];
  let from = 0;
  while (at !== -1) {
    const end = json.indexOf('"', at + MARK_JSON.length);
    const slice = slices[Number(json.slice(at + MARK_JSON.length, end))];
    if (slice !== undefined) {
      out.push(json.slice(from, at), slice);
      from = end + 1;
    }
    at = json.indexOf(MARK_JSON, end + 1);
  }
  out.push(json.slice(from));
  return out;
}
