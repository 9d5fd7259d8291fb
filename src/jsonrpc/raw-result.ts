// A response's result passed on as the text it arrived as (issue 23).
//
// A plain tools/call result goes back to the host as the upstream wrote it, but for the id:
// parsing it into objects only to serialise them again was mcpmux's largest piece of JSON work
// per call. So, for a response whose request asked for it (PendingOptions.raw), the decoder
// (framing.ts) reads the line with `scanResponse` instead of JSON.parse: the envelope (jsonrpc,
// id) is read, the result is checked to be valid JSON and kept as its text, and the encoder
// writes the host's own id around that text (as it does for cached list pages).
//
// The rules that keep this safe:
// - The scan accepts only what JSON.parse accepts, and only the envelope
//   {"jsonrpc": "2.0", "id": <integer>, "result": {...}}, each member once; anything else (an
//   error, a request, a notification, an unusual line) is parsed as usual, and JSON.parse judges
//   it. The text is the line as decoded for the parse path (invalid UTF-8 already U+FFFD).
// - A result in which a key mcpmux reads or rewrites in results occurs, at any depth
//   (RESULT_READ_KEYS), is `read`: the pending table parses it as usual, and so it does for every
//   request that did not ask for raw results. Nothing but the code that asked ever sees one.
// - Its `isError` (when a boolean) is a plain property: observers read it (events.ts).
// - toJSON gives the parsed value: whatever serialises it the generic way writes the same JSON.
// - Whitespace holding a carriage return is not the scan's (skipSpace): such a line is parsed.
// - Results nested deeper than MAX_DEPTH are parsed as usual (JSON.stringify's own limit then
//   applies as it always did).
//
// The host then receives the upstream's own spelling of the same JSON (its escapes, spacing and
// number forms: `\u00e9`, `1.0`, big numbers as their digits), where the parse path would have
// written JSON.stringify's.

import { parseJson } from './big-numbers.js';
import { BACKSLASH, CLOSE_BRACE, CLOSE_BRACKET, COLON, COMMA, isHex, isJsonSpace, isSimpleEscape, OPEN_BRACE, OPEN_BRACKET, QUOTE } from './json-lex.js';

/**
 * Keys whose values mcpmux reads or rewrites in a result on its way to a host (router/dispatch.ts
 * adaptResult and callNamed, router/ids.ts, router/input-bridge.ts, upstream/modern.ts): resource
 * URIs it namespaces, task and elicitation ids it wraps, a 2026-07-28 result's own members. A
 * result holding one of them anywhere is parsed.
 */
const RESULT_READ_KEYS = ['uri', 'task', 'taskId', 'elicitationId', 'resultType', 'inputRequests', 'requestState', 'io.modelcontextprotocol/related-task'];
/** RESULT_READ_KEYS by length: an unescaped key is compared in place, with no string made for it. */
const READ_KEYS_BY_LENGTH: (string[] | undefined)[] = [];
for (const k of RESULT_READ_KEYS) (READ_KEYS_BY_LENGTH[k.length] ??= []).push(k);

/** Nesting (objects and arrays, the result itself included) beyond which a result is parsed as usual. */
const MAX_DEPTH = 128;

export class RawResult {
  /** A key of RESULT_READ_KEYS occurs in it: it must be parsed before it is passed on. */
  readonly read: boolean;
  /** Its top-level `isError`, when that is a boolean (the last one, as JSON.parse would keep). */
  readonly isError: boolean | undefined;
  readonly #text: string;

  constructor(text: string, read: boolean, isError: boolean | undefined) {
    this.#text = text;
    this.read = read;
    this.isError = isError;
  }

  /** The result's JSON text, exactly as the upstream wrote it. */
  get text(): string {
    return this.#text;
  }

  /** The result as the parse path would have made it. */
  parse(): Record<string, unknown> {
    return parseJson(this.#text) as Record<string, unknown>;
  }

  toJSON(): unknown {
    return this.parse();
  }
}

/** A success response whose result was kept as text. */
export interface RawResponse {
  jsonrpc: '2.0';
  id: number;
  result: RawResult;
}

/**
 * `text` (one whole message) as a success response whose result is kept as text, or undefined
 * when it is anything else or anything the scan does not follow in full: then parse it as usual.
 */
export function scanResponse(text: string): RawResponse | undefined {
  let i = skipSpace(text, 0);
  if (text.charCodeAt(i) !== OPEN_BRACE) return undefined;
  let id = -1;
  let version = false;
  let result: RawResult | undefined;
  i = skipSpace(text, i + 1);
  for (;;) {
    // Envelope keys are matched as written: an escaped one ("\u0069d") goes the usual way.
    if (text.startsWith('"result"', i)) {
      if (result) return undefined;
      i = afterColon(text, i + 8);
      if (i === -1 || text.charCodeAt(i) !== OPEN_BRACE) return undefined;
      const end = scanValue(text, i);
      if (end === -1) return undefined;
      result = new RawResult(text.slice(i, end), facts.read, facts.isError);
      i = end;
    } else if (text.startsWith('"jsonrpc"', i)) {
      if (version) return undefined;
      i = afterColon(text, i + 9);
      if (i === -1 || !text.startsWith('"2.0"', i)) return undefined;
      version = true;
      i += 5;
    } else if (text.startsWith('"id"', i)) {
      if (id !== -1) return undefined;
      i = afterColon(text, i + 4);
      if (i === -1) return undefined;
      // Only the ids mcpmux issues (PendingTable): integers a double holds exactly.
      const start = i;
      let n = 0;
      for (let c = text.charCodeAt(i); c >= 0x30 && c <= 0x39; c = text.charCodeAt(++i)) n = n * 10 + (c - 0x30);
      if (i === start || i - start > 15 || (text.charCodeAt(start) === 0x30 && i - start > 1)) return undefined;
      id = n;
    } else {
      return undefined;
    }
    i = skipSpace(text, i);
    const c = text.charCodeAt(i);
    if (c === COMMA) {
      i = skipSpace(text, i + 1);
      continue;
    }
    if (c !== CLOSE_BRACE) return undefined;
    break;
  }
  if (skipSpace(text, i + 1) !== text.length || !result || !version || id === -1) return undefined;
  return { jsonrpc: '2.0', id, result };
}

/** What scanValue learnt of the result it read (module state: one scan at a time, no object per scan). */
const facts = { read: false, isError: undefined as boolean | undefined };

/** 1: an object is open at that depth; 0: an array. */
const open = new Uint8Array(MAX_DEPTH + 1);

/**
 * Checks the JSON object at text[from] as JSON.parse would, without building it; returns the
 * index just past it, or -1 (invalid, or nested deeper than MAX_DEPTH). Sets `facts`.
 */
function scanValue(text: string, from: number): number {
  facts.read = false;
  facts.isError = undefined;
  let i = from;
  let depth = 0;
  /** The value being read is the result's top-level isError. */
  let isErrorValue = false;
  for (;;) {
    // A value starts at i.
    let c = text.charCodeAt(i);
    if (isErrorValue) {
      // Anything but a boolean is no tool error (events.ts reads `isError === true`).
      facts.isError = c === 0x74 ? true : c === 0x66 ? false : undefined;
      isErrorValue = false;
    }
    if (c === OPEN_BRACE || c === OPEN_BRACKET) {
      if (++depth > MAX_DEPTH) return -1;
      const object = c === OPEN_BRACE;
      open[depth] = object ? 1 : 0;
      i = skipSpace(text, i + 1);
      c = text.charCodeAt(i);
      if (c === (object ? CLOSE_BRACE : CLOSE_BRACKET)) {
        i++;
        depth--;
      } else if (object) {
        i = key(text, i, depth);
        if (i === -1) return -1;
        isErrorValue = keyIsError;
        continue;
      } else {
        continue;
      }
    } else if (c === QUOTE) {
      i = string(text, i);
      if (i === -1) return -1;
    } else if (c === 0x74 /* t */ && text.startsWith('true', i)) {
      i += 4;
    } else if (c === 0x66 /* f */ && text.startsWith('false', i)) {
      i += 5;
    } else if (c === 0x6e /* n */ && text.startsWith('null', i)) {
      i += 4;
    } else {
      i = number(text, i);
      if (i === -1) return -1;
    }
    // A value ended at i (a string, literal, number, or a container just closed).
    for (;;) {
      if (depth === 0) return i;
      i = skipSpace(text, i);
      c = text.charCodeAt(i);
      if (c === COMMA) {
        i = skipSpace(text, i + 1);
        if (open[depth] === 1) {
          i = key(text, i, depth);
          if (i === -1) return -1;
          isErrorValue = keyIsError;
        }
        break;
      }
      if (c !== (open[depth] === 1 ? CLOSE_BRACE : CLOSE_BRACKET)) return -1;
      i++;
      depth--;
    }
  }
}

/** Whether the key key() read last was the result's top-level `isError`. */
let keyIsError = false;

/**
 * Reads `"key"` and its colon at text[i] (inside an object at `depth`); returns the index of its
 * value, or -1. Notes a key of RESULT_READ_KEYS (facts.read) and the top-level isError.
 */
function key(text: string, i: number, depth: number): number {
  if (text.charCodeAt(i) !== QUOTE) return -1;
  const end = string(text, i);
  if (end === -1) return -1;
  keyIsError = false;
  const length = end - i - 2;
  if (escaped) {
    // Rare: a key spelt with escapes means what it decodes to.
    const k = JSON.parse(text.slice(i, end)) as string;
    if (RESULT_READ_KEYS.includes(k)) facts.read = true;
    keyIsError = depth === 1 && k === 'isError';
  } else if (isReadKey(text, i + 1, length)) {
    facts.read = true;
  } else if (depth === 1 && length === 7 && text.startsWith('isError', i + 1)) {
    keyIsError = true;
  }
  return afterColon(text, end);
}

/** Whether the `length` characters at text[at] are one of RESULT_READ_KEYS. */
function isReadKey(text: string, at: number, length: number): boolean {
  const candidates = READ_KEYS_BY_LENGTH[length];
  if (candidates === undefined) return false;
  for (const k of candidates) if (text.startsWith(k, at)) return true;
  return false;
}

/** Whether the string string() read last had an escape in it. */
let escaped = false;

/** Reads the string literal at text[i] (its opening quote); returns the index past its closing quote, or -1. */
function string(text: string, i: number): number {
  escaped = false;
  for (i++; ; ) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) return i + 1;
    if (c === BACKSLASH) {
      escaped = true;
      const e = text.charCodeAt(i + 1);
      if (e === 0x75 /* u */) {
        for (let h = i + 2; h < i + 6; h++) if (!isHex(text.charCodeAt(h))) return -1;
        i += 6;
      } else if (isSimpleEscape(e)) {
        i += 2;
      } else {
        return -1;
      }
    } else if (c >= 0x20) {
      i++;
    } else {
      return -1; // a control character, or the end of the text (NaN)
    }
  }
}

/** Reads the number literal at text[i]; returns the index past it, or -1. */
function number(text: string, i: number): number {
  if (text.charCodeAt(i) === 0x2d /* - */) i++;
  let c = text.charCodeAt(i);
  if (c === 0x30) {
    c = text.charCodeAt(++i);
  } else if (c >= 0x31 && c <= 0x39) {
    do c = text.charCodeAt(++i);
    while (isDigit(c));
  } else {
    return -1;
  }
  if (c === 0x2e /* . */) {
    if (!isDigit(text.charCodeAt(++i))) return -1;
    do c = text.charCodeAt(++i);
    while (isDigit(c));
  }
  if (c === 0x65 || c === 0x45 /* e E */) {
    c = text.charCodeAt(++i);
    if (c === 0x2b || c === 0x2d) c = text.charCodeAt(++i);
    if (!isDigit(c)) return -1;
    do c = text.charCodeAt(++i);
    while (isDigit(c));
  }
  return i;
}

function isDigit(c: number): boolean {
  return c >= 0x30 && c <= 0x39;
}

/**
 * The index of the first non-whitespace character at or after i: JSON's space, tab and line
 * feed, but not a carriage return. A CR the host would receive ends an SSE line (sse-writer.ts
 * relies on serialised JSON holding none) and a line for readers that split on it; JSON.stringify
 * never writes one, so a result holding one takes the parse path and reaches hosts without it.
 */
function skipSpace(text: string, i: number): number {
  // Never read past the end: a charCodeAt out of bounds (NaN) once deoptimises the function, and
  // V8 then calls the builtin for every character instead of inlining the load (the end of every
  // scanned line did it: issue 23).
  const n = text.length;
  while (i < n) {
    const c = text.charCodeAt(i);
    if (c !== 0x0d && isJsonSpace(c)) i++;
    else return i;
  }
  return i;
}

/** Past the whitespace, the colon and the whitespace after a key ending before i; -1 without a colon. */
function afterColon(text: string, i: number): number {
  i = skipSpace(text, i);
  if (text.charCodeAt(i) !== COLON) return -1;
  return skipSpace(text, i + 1);
}
