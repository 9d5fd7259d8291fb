// Newline-delimited JSON framing (the MCP stdio transport) with a maximum message size.
//
// Chunks are kept as Buffers until a newline completes a line, so a 10 MB message is copied
// once (Buffer.concat) and decoded once, instead of being re-scanned on every chunk.

const NEWLINE = 0x0a;

export type Frame =
  | { ok: true; value: unknown }
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

  constructor(private readonly maxBytes: number) {}

  /** Feeds bytes; calls `emit` once per complete line, in order. */
  push(chunk: Buffer, emit: (frame: Frame) => void): void {
    let start = 0;
    while (start < chunk.length) {
      const nl = chunk.indexOf(NEWLINE, start);
      const end = nl === -1 ? chunk.length : nl;
      const piece = start === 0 && end === chunk.length ? chunk : chunk.subarray(start, end);
      if (this.skipping) {
        this.skippedBytes += piece.length;
        this.keepTail(piece);
      } else if (this.buffered + piece.length > this.maxBytes) {
        this.skipping = true;
        this.skippedBytes = this.buffered + piece.length;
        this.head = Buffer.concat([...this.chunks, piece.subarray(0, HEAD_BYTES)]).subarray(0, HEAD_BYTES).toString('utf8');
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
    emit(parseLine(line));
  }
}

function parseLine(line: Buffer): Frame {
  let text = line.toString('utf8');
  if (text.endsWith('\r')) text = text.slice(0, -1);
  if (text.trim() === '') return { ok: true, value: undefined };
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (e) {
    return { ok: false, error: 'parse', detail: (e as Error).message };
  }
}

/**
 * Results that do not change between requests (a merged list page served from cache) are
 * marked here and serialised once: the next response carrying the same object splices its id
 * around the cached JSON. Every other message pays one WeakMap lookup.
 */
const stable = new WeakMap<object, string>();

export function markStable(result: object): void {
  if (!stable.has(result)) stable.set(result, '');
}

/** Serialises one message (or a batch). */
export function encodeMessage(msg: unknown): string {
  const result = (msg as { result?: unknown }).result;
  if (typeof result === 'object' && result !== null) {
    let json = stable.get(result);
    if (json !== undefined) {
      if (json === '') stable.set(result, (json = JSON.stringify(result)));
      return `{"jsonrpc":"2.0","id":${JSON.stringify((msg as { id: unknown }).id)},"result":${json}}`;
    }
  }
  return JSON.stringify(msg);
}

/** Serialises one message (or batch) as a single line. */
export function encodeLine(msg: unknown): string {
  return encodeMessage(msg) + '\n';
}

/**
 * Best effort at the id and kind of a message we refused to read whole, from its first and
 * last bytes. Only a top-level `"id"` is trusted: one before any nested object or array, or the
 * last member right before the final `}` (where the SDK puts it). Never one inside `params`.
 */
export function peekId(head: string, tail: string): { id: string | number; isRequest: boolean } | undefined {
  const m = /^\s*\{[^{}[\]]*?"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")/.exec(head) ?? /[,{]\s*"id"\s*:\s*(-?\d+|"(?:[^"\\]|\\.)*")\s*\}\s*$/.exec(tail);
  if (!m) return undefined;
  const raw = m[1]!;
  let id: string | number;
  try {
    id = raw.startsWith('"') ? (JSON.parse(raw) as string) : Number(raw);
  } catch {
    return undefined; // a malformed id string: answer with id null rather than guess
  }
  return { id, isRequest: /^\s*\{[^{}[\]]*?"method"\s*:/.test(head) };
}
