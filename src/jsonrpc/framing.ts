// Newline-delimited JSON framing (the MCP stdio transport) with a maximum message size, and
// the encoders every transport uses.
//
// Chunks are kept as Buffers until a newline completes a line, so a 10 MB message is copied
// once (Buffer.concat) and then scanned, not re-scanned on every chunk. Long string values stay
// as those bytes all the way to the other side (see opaque.ts).

import { parseJson, restoreBigNumbers } from './big-numbers.js';
import { ErrorCode, RpcError } from './message.js';
import { decodeJson, OPAQUE_MIN_LINE, opaqueSlices, splice } from './opaque.js';
import { RawResult, scanResponse } from './raw-result.js';

const NEWLINE = 0x0a;

export type Frame =
  | { ok: true; value: unknown; bytes: number }
  | { ok: false; error: 'parse'; detail: string }
  | { ok: false; error: 'too-large'; bytes: number; head: string; tail: string };

/** How much of each end of an oversized line is kept, to find its id and answer it (see `peekId`). */
const HEAD_BYTES = 1024;
const TAIL_BYTES = 256;

export class LineDecoder {
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** While true, bytes are dropped until the next newline (the current line is over the limit). */
  private skipping = false;
  private skippedBytes = 0;
  private head = '';
  private tail: Buffer = Buffer.alloc(0);
  /**
   * Set by the endpoint reading these lines: true while a request of its own waits for a result
   * that may stay text (raw-result.ts). Lines are then read with scanResponse first.
   */
  rawResults: (() => boolean) | undefined;

  constructor(private readonly maxBytes: number) {}

  /** Feeds bytes; calls `emit` once per complete line, in order. */
  push(chunk: Buffer, emit: (frame: Frame) => void): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      if (nl !== -1 && this.buffered === 0 && !this.skipping && nl - start < OPAQUE_MIN_LINE && nl - start <= this.maxBytes && this.chunks.length === 0) {
        // The usual line: small and whole within this chunk. Parsed from the chunk itself, with
        // no Buffer view or array made for it (two per call on each side: issue 23).
        emit(parseSmall(chunk, start, nl, this.rawResults?.() === true));
        start = nl + 1;
        continue;
      }
      const end = nl === -1 ? chunk.length : nl;
      const piece = start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end);
      if (this.skipping) {
        this.skippedBytes += piece.length;
        this.keepTail(piece);
      } else if (this.buffered + piece.length > this.maxBytes) {
        this.skipping = true;
        this.skippedBytes = this.buffered + piece.length;
        this.head = headOf([...this.chunks, piece]);
        this.keepTail(piece);
        this.chunks = [];
        this.buffered = 0;
      } else if (piece.length > 0) {
        this.chunks.push(piece);
        this.buffered += piece.length;
      }
      if (nl === -1) return;
      this.finishLine(emit);
      start = nl + 1;
    }
  }

  private keepTail(piece: Buffer): void {
    this.tail = piece.length >= TAIL_BYTES ? Buffer.from(piece.subarray(piece.length - TAIL_BYTES)) : Buffer.concat([this.tail, piece]).subarray(-TAIL_BYTES);
  }

  private finishLine(emit: (frame: Frame) => void): void {
    if (this.skipping) {
      const bytes = this.skippedBytes;
      const head = this.head;
      const tail = this.tail.toString('utf8');
      this.skipping = false;
      this.skippedBytes = 0;
      this.head = '';
      this.tail = Buffer.alloc(0);
      emit({ ok: false, error: 'too-large', bytes, head, tail });
      return;
    }
    const line = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    emit(parseLine(line, this.rawResults?.() === true));
  }
}

/** The first HEAD_BYTES of a line given as chunks, copying no more than that. */
function headOf(chunks: Buffer[]): string {
  const head: Buffer[] = [];
  let n = 0;
  for (const c of chunks) {
    if (n >= HEAD_BYTES) break;
    head.push(c.subarray(0, HEAD_BYTES - n));
    n += head[head.length - 1]!.length;
  }
  return Buffer.concat(head).toString('utf8');
}

function parseLine(line: Buffer, raw: boolean): Frame {
  const end = line[line.length - 1] === 0x0d ? line.length - 1 : line.length;
  // A short line is parsed whole (as decodeJson would): parseSmall, which drops the CR itself.
  if (end < OPAQUE_MIN_LINE) return parseSmall(line, 0, line.length, raw);
  if (end < line.length) line = line.subarray(0, end);
  if (isBlank(line)) return { ok: true, value: undefined, bytes: line.length };
  return parseBytes(line);
}

/**
 * parseLine of chunk[start, end), a line shorter than OPAQUE_MIN_LINE (so decodeJson would parse
 * it whole). `raw`: a success response's result may stay text (raw-result.ts).
 */
function parseSmall(chunk: Buffer, start: number, end: number, raw: boolean): Frame {
  if (end > start && chunk[end - 1] === 0x0d) end--;
  const text = chunk.toString('utf8', start, end);
  const first = chunk[start];
  if (first !== 0x7b && first !== 0x5b && text.trim() === '') return { ok: true, value: undefined, bytes: end - start };
  if (raw) {
    const response = scanResponse(text);
    if (response) return { ok: true, value: response, bytes: end - start };
  }
  try {
    return { ok: true, value: parseJson(text), bytes: end - start };
  } catch (e) {
    return { ok: false, error: 'parse', detail: (e as Error).message };
  }
}

/** A line with nothing but whitespace (as String.prototype.trim sees it) is skipped. */
function isBlank(line: Buffer): boolean {
  const first = line[0];
  if (first === 0x7b || first === 0x5b) return false; // '{' or '[': the usual case, decided at once
  return line.toString('utf8').trim() === '';
}

/** One JSON text from bytes (a line, an HTTP body, a WebSocket message). */
export function parseBytes(bytes: Buffer): Exclude<Frame, { error: 'too-large' }> {
  try {
    return { ok: true, value: decodeJson(bytes), bytes: bytes.length };
  } catch (e) {
    return { ok: false, error: 'parse', detail: (e as Error).message };
  }
}

/**
 * Results that do not change between requests (a merged list page served from cache) are
 * marked here and serialised once, to UTF-8 bytes: the next response carrying the same object
 * is its id spliced around those bytes. Bytes rather than a string because a page of 2 000
 * tools is ~3 MB, and a cached string would be re-flattened and re-encoded on every write,
 * leaving megabytes of garbage per listing in the young generation (measured: ~14 MB of RSS).
 * Every other message pays one WeakMap lookup.
 */
const stable = new WeakMap<object, Buffer[] | null>();

export function markStable(result: object): void {
  if (!stable.has(result)) stable.set(result, null);
}

/** A serialised message: one string, or pieces to write in order (see encodeChunks). */
export type Wire = string | (string | Buffer)[];

/** Its length in bytes, as UTF-8. */
export function wireBytes(wire: Wire): number {
  if (typeof wire === 'string') return Buffer.byteLength(wire);
  let n = 0;
  for (const piece of wire) n += typeof piece === 'string' ? Buffer.byteLength(piece) : piece.length;
  return n;
}

/** Writes it to a byte stream; pieces go out as one writev (cork), Buffers uncopied. */
export function writeWire(out: NodeJS.WritableStream & { cork(): void; uncork(): void }, wire: Wire): void {
  if (typeof wire === 'string') {
    out.write(wire);
    return;
  }
  out.cork();
  for (const piece of wire) out.write(piece);
  out.uncork();
}

/** Serialises one message (or a batch) as one string. */
export function encodeMessage(msg: unknown): string {
  const wire = encodeChunks(msg);
  return typeof wire === 'string' ? wire : wire.map((p) => (typeof p === 'string' ? p : p.toString('utf8'))).join('');
}

/**
 * Serialises one message (or a batch): a string, or the pieces to write in order, where some
 * are Buffers written as they are: the raw string values of a message that carries them
 * (opaque.ts), or the cached bytes of a stable result. Transports that can write Buffers use
 * this and never copy those bytes.
 */
export function encodeChunks(msg: unknown): Wire {
  if (Array.isArray(msg)) return encodeBatch(msg);
  const m = msg as { id?: unknown; params?: unknown; result?: unknown };
  const result = m.result;
  // A result passed on unread (raw-result.ts): the upstream's text, with this message's id.
  // (A response is {jsonrpc, id, result}: Endpoint.answer makes it so.)
  if (result instanceof RawResult) return `${resultHead(m.id)}${result.text}}`;
  if (typeof result === 'object' && result !== null) {
    let bytes = stable.get(result);
    if (bytes !== undefined) {
      try {
        if (bytes === null) stable.set(result, (bytes = stableBytes(result)));
      } catch (err) {
        return unserialisable(msg, err);
      }
      return [resultHead(m.id), ...bytes, '}'];
    }
  }
  let json: string;
  try {
    json = restoreBigNumbers(JSON.stringify(msg));
  } catch (err) {
    return unserialisable(msg, err);
  }
  const slices = opaqueSlices(m.params ?? result);
  return (slices && splice(json, slices)) ?? json;
}

/** A response up to its result, for a result already serialised (a raw or a stable one): the id spliced in. */
function resultHead(id: unknown): string {
  return restoreBigNumbers(`{"jsonrpc":"2.0","id":${JSON.stringify(id)},"result":`);
}

/** The size of the pieces a stable result is kept in. */
const STABLE_CHUNK = 64 * 1024;

/**
 * JSON.stringify(result) as UTF-8 bytes, written in pieces: each member of the result, and
 * each element of a member that is an array (a list page's items), is serialised on its own
 * and copied into 64 KB Buffers. The same bytes as one JSON.stringify, without its one string
 * of the whole page: for 2 000 tools that is a 2.8 MB string in V8's large-object space, alive
 * until the next full collection, on top of its 2.8 MB of bytes (issue 23: the peak RSS of a
 * listing). What is left as garbage is one small string per item, collected young.
 */
function stableBytes(result: object): Buffer[] {
  if (typeof (result as { toJSON?: unknown }).toJSON === 'function' || Array.isArray(result)) return [Buffer.from(restoreBigNumbers(JSON.stringify(result)))];
  const out = new ByteChunks();
  let first = true;
  out.put('{');
  for (const key of Object.keys(result)) {
    const value = (result as Record<string, unknown>)[key];
    if (!Array.isArray(value)) {
      const json = JSON.stringify(value) as string | undefined;
      if (json === undefined) continue; // undefined, a function, a symbol: left out, as JSON.stringify does
      out.put(`${first ? '' : ','}${JSON.stringify(key)}:`);
      out.put(restoreBigNumbers(json));
    } else {
      out.put(`${first ? '' : ','}${JSON.stringify(key)}:[`);
      for (let i = 0; i < value.length; i++) {
        // An element JSON.stringify cannot write (undefined, a function) is written null, as in any array.
        const json = (JSON.stringify(value[i]) as string | undefined) ?? 'null';
        out.put(i === 0 ? restoreBigNumbers(json) : `,${restoreBigNumbers(json)}`);
      }
      out.put(']');
    }
    first = false;
  }
  out.put('}');
  return out.done();
}

/** UTF-8 bytes written piece by piece into Buffers of STABLE_CHUNK (a larger piece gets one of its own). */
class ByteChunks {
  private readonly out: Buffer[] = [];
  private chunk = Buffer.allocUnsafe(STABLE_CHUNK);
  private used = 0;

  put(text: string): void {
    // A UTF-16 unit is at most 3 bytes of UTF-8: only a piece that may not fit is measured.
    if (text.length * 3 > this.chunk.length - this.used) {
      const n = Buffer.byteLength(text);
      if (n > this.chunk.length - this.used) {
        this.seal();
        this.chunk = Buffer.allocUnsafe(Math.max(STABLE_CHUNK, n));
      }
    }
    this.used += this.chunk.write(text, this.used);
  }

  private seal(): void {
    if (this.used > 0) this.out.push(this.chunk.subarray(0, this.used));
    this.used = 0;
  }

  done(): Buffer[] {
    // The last piece is copied to its size: it is kept as long as the page is.
    if (this.used > 0) this.out.push(Buffer.from(this.chunk.subarray(0, this.used)));
    return this.out;
  }
}

/**
 * JSON.parse accepts nesting that JSON.stringify cannot write back (about 4 000 levels on
 * Node's default stack). A response becomes an error response for its id, so the peer is
 * answered; a request or notification is refused with an RpcError for its sender to handle.
 */
function unserialisable(msg: unknown, err: unknown): string {
  const m = msg as { id?: unknown; result?: unknown; error?: unknown };
  const why = `the message could not be serialised: ${(err as Error)?.message ?? String(err)}`;
  if ((m.result !== undefined || m.error !== undefined) && (typeof m.id === 'string' || typeof m.id === 'number' || m.id === null)) {
    return restoreBigNumbers(JSON.stringify({ jsonrpc: '2.0', id: m.id, error: { code: ErrorCode.InternalError, message: `Internal error: ${why}` } }));
  }
  throw new RpcError(ErrorCode.InternalError, why);
}

function encodeBatch(msgs: unknown[]): Wire {
  return joinBatch(msgs.map(encodeChunks));
}

/** The wire of a batch (a JSON array) made of already encoded messages. */
export function joinBatch(items: Wire[]): Wire {
  if (items.every((i) => typeof i === 'string')) return `[${items.join(',')}]`;
  const out: (string | Buffer)[] = ['['];
  items.forEach((item, n) => {
    if (n > 0) out.push(',');
    if (typeof item === 'string') out.push(item);
    else out.push(...item);
  });
  out.push(']');
  return out;
}

/** A JSON number or string literal (an id), as peekId looks for it. */
const ID_LITERAL = '-?\\d+(?:\\.\\d+)?(?:[eE][+-]?\\d+)?|"(?:[^"\\\\]|\\\\.)*"';
/** A top-level id before any nested object or array, or as the last member. */
const HEAD_ID = new RegExp(`^\\s*\\{[^{}[\\]]*?"id"\\s*:\\s*(${ID_LITERAL})`);
const TAIL_ID = new RegExp(`[,{]\\s*"id"\\s*:\\s*(${ID_LITERAL})\\s*\\}\\s*$`);

/**
 * Best effort at the id and kind of a message we refused to read whole, from its first and
 * last bytes. Only a top-level `"id"` is trusted: one before any nested object or array, or the
 * last member right before the final `}` (where the SDK puts it). Never one inside `params`.
 */
export function peekId(head: string, tail: string): { id: string | number; isRequest: boolean } | undefined {
  const m = HEAD_ID.exec(head) ?? TAIL_ID.exec(tail);
  if (!m) return undefined;
  const raw = m[1]!;
  let id: string | number;
  try {
    // parseJson: a number a double cannot hold is answered with its own digits, as always.
    id = parseJson(raw) as string | number;
  } catch {
    return undefined; // a malformed id string: answer with id null rather than guess
  }
  return { id, isRequest: /^\s*\{[^{}[\]]*?"method"\s*:/.test(head) };
}
