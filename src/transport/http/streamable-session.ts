// One Streamable HTTP session seen as a Transport: the host's POST streams and its GET stream,
// which message goes on which stream, and the replay buffers behind resumable SSE.
//
// Routing of what we send (Transport.send's `related` is the host request a message belongs to):
// - a response goes to the stream of the POST that carried its request, and that stream ends
//   once it has carried the responses to all of its requests;
// - other messages related to a request on an SSE POST stream go on that stream;
// - everything else (and anything related to a JSON-mode POST, which can carry only its
//   responses) goes on the GET stream; while no GET connection is open, on any open POST
//   stream; with neither, it waits (bounded) in the GET stream's buffer until a GET opens.
//
// Event ids are `<stream>-<seq>`: seq is unique in the session, the prefix ties an id to one
// stream, so a GET with Last-Event-ID replays only that stream's later events.

import type { ServerResponse } from 'node:http';
import { encodeChunks, joinBatch, wireBytes, type Wire } from '../../jsonrpc/framing.js';
import type { Incoming, JsonRpcId, JsonRpcMessage } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import { queuedLength, UNREAD_ANSWERS_BYTES } from '../backlog.js';
import { watchAnswer, type Unread } from './answer-watch.js';
import type { FrameError, Transport } from '../transport.js';
import type { ReplayBudget } from './replay-budget.js';
import type { HostCredential, HostHandle, RegisteredSession } from './sessions.js';
import { sendWire } from './respond.js';
import { SseWriter, type SseBacklog } from './sse-writer.js';

/**
 * Events (and bytes) kept per stream for replay; older ones are dropped (a resume past them has
 * a gap). All streams of all sessions together are held to one budget too (replay-budget.ts).
 */
const REPLAY_EVENTS = 256;
const REPLAY_BYTES = 4 * 1024 * 1024;
/**
 * While no GET stream is open, what waits for one is held to this: a host that never opens a
 * GET stream (many do not) must not hold a log burst per session (measured before this bound:
 * 100 such sessions, +369 MB after one 16 MB log message). A larger message is not kept.
 */
const UNDELIVERED_BYTES = 1024 * 1024;
/** Finished POST streams whose connection dropped before the end, kept for a resume. */
const DETACHED_STREAMS = 16;
/** The `retry` we ask clients to wait before reconnecting a dropped stream. */
export const SSE_RETRY_MS = 1000;
const GET_STREAM = 0;

interface Event {
  seq: number;
  data: Wire;
  bytes: number;
}

interface Stream {
  key: number;
  /** The live SSE connection, if any. */
  writer: SseWriter | undefined;
  /** JSON mode: the response still to be written (undefined once written or gone). */
  json: ServerResponse | undefined;
  jsonMode: boolean;
  /** The POST body was an array: JSON mode answers with an array too. */
  batch: boolean;
  /** Host requests on this POST whose response is still owed. */
  pending: Set<JsonRpcId>;
  /** JSON mode: responses (encoded) collected until all are there. */
  collected: Wire[];
  events: Event[];
  /** Total length of the `data` in `events`. */
  bytes: number;
  /** Highest seq written to a connection (the GET stream flushes what came after on open). */
  delivered: number;
  /** Seq of the newest event dropped from `events` (0: none). */
  dropped: number;
  done: boolean;
}

export type ResumeResult = 'ok' | 'unknown' | 'conflict';

export class StreamableSession implements Transport, RegisteredSession {
  readonly kind = 'streamable' as const;
  onmessage?: Transport['onmessage'];
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  /** Set right after construction (the HostSession needs this transport first). */
  host!: HostHandle;
  credential!: HostCredential;
  /** When the GET stream ends for its JWT's expiry (watchGetExpiry). */
  private getExpiry: NodeJS.Timeout | undefined;
  private readonly streams = new Map<number, Stream>();
  private readonly byRequest = new Map<JsonRpcId, Stream>();
  private readonly detached: Stream[] = [];
  private nextStream = 1;
  private seq = 0;
  private lastActive = Date.now();
  private closed = false;
  /** Answers whose connection ended before the host read them all (each until it has, or is cut). */
  private readonly unread = new Set<Unread>();
  /** What every stream writer's Backlog is built with (backlog.ts). */
  private readonly backlog: SseBacklog;

  constructor(
    readonly id: string,
    readonly client: string | undefined,
    private readonly log: Logger,
    /** Bytes that may wait for a stream's reader before its connection is dropped (backlog.ts). */
    maxBacklog: number,
    /** The replay buffers' budget, shared by all sessions. */
    private readonly replayBudget: ReplayBudget,
  ) {
    this.streams.set(GET_STREAM, newStream(GET_STREAM, false, false));
    this.backlog = { transport: 'http', log, maxBytes: maxBacklog, resend: (msg, related) => this.send(msg, related) };
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** True if `id` is a request of the host still waiting for its response. */
  isPending(id: JsonRpcId): boolean {
    return this.byRequest.has(id);
  }

  // ---- what the host sends ----------------------------------------------------------------

  /**
   * A POST that carries requests: registers its stream before the messages are handed on, so
   * the responses (and everything related to them) find it.
   */
  openPost(res: ServerResponse, ids: JsonRpcId[], opts: { sse: boolean; batch: boolean; prime: boolean }): void {
    this.touch();
    const stream = newStream(this.nextStream++, !opts.sse, opts.batch);
    for (const id of ids) {
      stream.pending.add(id);
      this.byRequest.set(id, stream);
    }
    this.streams.set(stream.key, stream);
    const headers = { 'mcp-session-id': this.id };
    if (opts.sse) {
      this.attach(stream, new SseWriter(res, headers, this.backlog));
      if (opts.prime) stream.writer!.prime(`${stream.key}-${++this.seq}`, SSE_RETRY_MS);
    } else {
      stream.json = res;
      res.on('close', () => {
        // The host gave up waiting; the responses have nowhere to go and are dropped.
        if (stream.json === res) stream.json = undefined;
        this.touch();
      });
    }
  }

  /** Hands a parsed body (one message or a batch) of `bytes` bytes to the endpoint. */
  deliver(value: unknown, bytes: number): void {
    this.touch();
    this.bodies++;
    this.onmessage?.(value, undefined, bytes);
  }

  /**
   * The host cancelled one of its requests: the endpoint will never answer it, so the stream
   * must not wait for that response.
   */
  cancelled(id: JsonRpcId): void {
    const stream = this.byRequest.get(id);
    if (!stream) return;
    this.byRequest.delete(id);
    stream.pending.delete(id);
    if (stream.pending.size === 0) this.complete(stream);
  }

  /** GET without Last-Event-ID: the standalone stream; false if one is already open. */
  openGet(res: ServerResponse, prime: boolean): boolean {
    const stream = this.streams.get(GET_STREAM)!;
    if (stream.writer?.open) return false;
    this.touch();
    this.attach(stream, new SseWriter(res, { 'mcp-session-id': this.id }, this.backlog));
    if (prime) stream.writer!.prime(`${GET_STREAM}-${++this.seq}`, SSE_RETRY_MS);
    // What was queued while no GET stream was open.
    this.replay(stream, stream.delivered);
    return true;
  }

  /** GET with Last-Event-ID: re-attaches the stream that id belongs to and replays what followed. */
  resume(res: ServerResponse, lastEventId: string): ResumeResult {
    const dash = lastEventId.indexOf('-');
    const key = Number(lastEventId.slice(0, dash));
    const after = Number(lastEventId.slice(dash + 1));
    const stream = dash > 0 && Number.isInteger(key) && Number.isInteger(after) ? this.streams.get(key) : undefined;
    if (!stream || stream.jsonMode) return 'unknown';
    if (stream.writer?.open) return 'conflict';
    this.touch();
    if (after < stream.dropped) {
      this.log.warn({ stream: key, after, dropped: stream.dropped }, 'resume: some events were already dropped from the replay buffer');
    }
    this.attach(stream, new SseWriter(res, { 'mcp-session-id': this.id }, this.backlog));
    this.replay(stream, after);
    if (stream.done) this.complete(stream);
    return 'ok';
  }

  // ---- Transport: what we send to the host -------------------------------------------------

  send(msg: Incoming, related?: JsonRpcId): Wire | undefined {
    if (this.closed) return undefined;
    if (Array.isArray(msg)) {
      // A batch answer: each response goes where its own request came from.
      for (const m of msg) this.sendOne(m, undefined);
      return undefined;
    }
    return this.sendOne(msg, related);
  }

  private sendOne(msg: JsonRpcMessage, related: JsonRpcId | undefined): Wire | undefined {
    const isResponse = !('method' in msg);
    const rid = isResponse ? ((msg as { id: JsonRpcId | null }).id ?? undefined) : related;
    let stream = rid === undefined ? undefined : this.byRequest.get(rid);
    if (isResponse) {
      if (!stream) {
        this.log.debug({ id: rid }, 'response for a request no longer waiting (cancelled or closed); dropped');
        return undefined;
      }
      this.byRequest.delete(rid!);
      stream.pending.delete(rid!);
      const wire = encodeChunks(msg);
      if (stream.jsonMode) stream.collected.push(wire);
      else this.emit(stream, wire);
      if (stream.pending.size === 0) this.complete(stream);
      return wire;
    }
    if (stream?.jsonMode) stream = undefined;
    const target = stream ?? this.unrelatedStream();
    // A connected stream whose host is behind sheds or sets aside what may be (backlog.ts).
    if (target.writer?.open && !target.writer.admit(msg, related)) return undefined;
    const wire = encodeChunks(msg);
    this.emit(target, wire);
    return wire;
  }

  /**
   * Whether the host is behind reading its answers: more than UNREAD_ANSWERS_BYTES wait on its
   * POST streams and answers together. Its next requests are refused (503) until it reads them.
   */
  answersBehind(): boolean {
    let waiting = 0;
    for (const s of this.streams.values()) if (s.key !== GET_STREAM && s.writer) waiting += s.writer.waiting;
    for (const u of this.unread) waiting += u.waiting;
    return waiting > UNREAD_ANSWERS_BYTES;
  }

  /**
   * An answer whose response ended with bytes still waiting for the host: counted (answersBehind)
   * until read. A JSON answer is watched for the stuck rule here; an SSE writer watches itself.
   */
  private watchUnread(res: ServerResponse, written: number, writer?: SseWriter): void {
    if (!writer) {
      const unread = watchAnswer(res, written, this.backlog, (u) => this.unread.delete(u));
      if (unread) this.unread.add(unread);
      return;
    }
    if (writer.waiting === 0) return;
    this.unread.add(writer);
    const done = (): void => void this.unread.delete(writer);
    res.once('finish', done);
    res.once('close', done);
  }

  /** The GET stream if connected; else an open POST stream; else the GET stream's buffer. */
  private unrelatedStream(): Stream {
    const get = this.streams.get(GET_STREAM)!;
    if (get.writer?.open) return get;
    for (const s of this.streams.values()) if (s.writer?.open && !s.done) return s;
    return get;
  }

  private emit(stream: Stream, data: Wire): void {
    const bytes = wireBytes(data);
    const waiting = stream.key === GET_STREAM && !stream.writer?.open;
    if (waiting && bytes > UNDELIVERED_BYTES) {
      if (!this.saidTooLarge) this.log.warn({ bytes }, 'no GET stream is open: a message too large to keep for one was dropped');
      this.saidTooLarge = true;
      return;
    }
    const seq = ++this.seq;
    const ev = { seq, data, bytes };
    stream.events.push(ev);
    stream.bytes += bytes;
    const maxBytes = waiting ? UNDELIVERED_BYTES : REPLAY_BYTES;
    // The newest event always stays, however large: it may be the response a resume needs.
    while (stream.events.length > 1 && (stream.events.length > REPLAY_EVENTS || stream.bytes > maxBytes)) {
      const dropped = stream.events[0]!;
      this.replayBudget.shift(stream);
      if (dropped.seq > stream.delivered && !this.saidDropped) {
        this.saidDropped = true;
        this.log.warn({ stream: stream.key }, 'SSE buffer full: undelivered messages are being dropped (said once per session)');
      }
    }
    this.replayBudget.added(stream, ev);
    if (stream.writer?.event(data, `${stream.key}-${seq}`)) stream.delivered = seq;
  }

  /** A stream leaves the session: its replay buffer leaves the budget. */
  private drop(stream: Stream): void {
    this.streams.delete(stream.key);
    this.replayBudget.forget(stream);
  }

  private replay(stream: Stream, after: number): void {
    for (const ev of stream.events) {
      if (ev.seq > after && stream.writer?.event(ev.data, `${stream.key}-${ev.seq}`)) stream.delivered = Math.max(stream.delivered, ev.seq);
    }
  }

  private attach(stream: Stream, writer: SseWriter): void {
    stream.writer = writer;
    if (stream.key === GET_STREAM) this.watchGetExpiry(writer);
    writer.onclose = (why) => {
      if (stream.writer === writer) stream.writer = undefined;
      if (stream.key === GET_STREAM) clearTimeout(this.getExpiry);
      // Dropped for not reading: the host may reconnect (Last-Event-ID) and resume.
      if (why) this.log.warn({ stream: stream.key, why }, 'SSE stream dropped');
      this.touch();
    };
  }

  /**
   * Each request of a session is authenticated on its own, but the GET stream is one request
   * that lasts: it ends when the session's latest JWT expires (a POST meanwhile brings a newer
   * one, and the timer looks again). The session itself stays; the host reconnects the stream
   * (Last-Event-ID) with its current JWT, which the guard checks like any request.
   */
  private watchGetExpiry(writer: SseWriter): void {
    clearTimeout(this.getExpiry);
    const at = this.credential?.expiresAt;
    if (at === undefined || !writer.open) return;
    const wait = at - Date.now();
    if (wait <= 0) {
      this.log.debug({ session: this.id }, 'GET stream ended: the JWT expired');
      return writer.end();
    }
    this.getExpiry = setTimeout(() => this.watchGetExpiry(writer), Math.min(wait, 2 ** 31 - 1));
    this.getExpiry.unref();
  }

  /** All responses of a POST are out: end its stream (or keep it for a resume if it is detached). */
  private complete(stream: Stream): void {
    stream.done = true;
    if (stream.jsonMode) {
      const res = stream.json;
      stream.json = undefined;
      this.drop(stream);
      if (!res || res.writableEnded) return;
      if (stream.collected.length === 0) {
        // Every request of this POST was cancelled: nothing to answer with.
        res.writeHead(202, { 'mcp-session-id': this.id, 'content-length': '0' }).end();
        return;
      }
      const body = stream.batch ? joinBatch(stream.collected) : stream.collected[0]!;
      sendWire(res, 200, body, { 'mcp-session-id': this.id });
      this.watchUnread(res, queuedLength(body));
      return;
    }
    if (stream.writer?.open) {
      const writer = stream.writer;
      writer.end();
      this.watchUnread(writer.res, 0, writer);
      this.drop(stream);
      const i = this.detached.indexOf(stream);
      if (i >= 0) this.detached.splice(i, 1);
      return;
    }
    // The connection dropped before the last response: keep the events for a GET resume.
    if (!this.detached.includes(stream)) {
      this.detached.push(stream);
      if (this.detached.length > DETACHED_STREAMS) this.drop(this.detached.shift()!);
    }
  }

  /** Whether the drop of a too-large message for the GET buffer was logged (once per session). */
  private saidTooLarge = false;
  private saidDropped = false;
  /** POST bodies delivered so far. */
  private bodies = 0;
  private readonly createdAt = Date.now();

  private touch(): void {
    this.lastActive = Date.now();
  }

  // ---- RegisteredSession ---------------------------------------------------------------------

  unfinishedSince(): number | undefined {
    // The first body is the initialize; a host that sends nothing after it never finished.
    return this.bodies <= 1 ? this.createdAt : undefined;
  }

  idleSince(): number | undefined {
    if (this.byRequest.size > 0) return undefined;
    for (const s of this.streams.values()) if (s.writer?.open || s.json) return undefined;
    return this.lastActive;
  }

  keepalive(): void {
    for (const s of this.streams.values()) s.writer?.comment('keepalive');
  }

  /** Ends the session the orderly way: the HostSession closes, and then this transport. */
  end(_reason: string): Promise<void> {
    return this.closed ? Promise.resolve() : this.host.close();
  }

  // ---- Transport.close (called by the HostSession's endpoint when it closes) -------------------

  async close(): Promise<void> {
    this.closeTransport('session ended');
  }

  /**
   * Ends every stream. Requests still waiting get an error response on their live stream, so
   * a host is not left waiting for answers that will never come.
   */
  closeTransport(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.getExpiry);
    for (const stream of this.streams.values()) {
      for (const id of stream.pending) {
        const error = { jsonrpc: '2.0', id, error: { code: -32000, message: `Connection closed: ${reason}` } } as JsonRpcMessage;
        if (stream.jsonMode) stream.collected.push(encodeChunks(error));
        else if (stream.writer?.open) stream.writer.event(encodeChunks(error), `${stream.key}-${++this.seq}`);
      }
      stream.pending.clear();
      if (stream.jsonMode) this.complete(stream);
      else stream.writer?.end();
      this.replayBudget.forget(stream);
    }
    this.streams.clear();
    this.byRequest.clear();
    this.detached.length = 0;
    this.onclose?.(reason);
  }
}

function newStream(key: number, jsonMode: boolean, batch: boolean): Stream {
  return {
    key,
    writer: undefined,
    json: undefined,
    jsonMode,
    batch,
    pending: new Set(),
    collected: [],
    events: [],
    bytes: 0,
    delivered: 0,
    dropped: 0,
    done: false,
  };
}
