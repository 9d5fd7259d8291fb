// How much may wait for a host that does not read what mcpmux writes to it, and what happens
// to the rest.
//
// Node buffers every write a slow reader has not taken yet; a host that stops reading its
// stdout, SSE stream or WebSocket would otherwise grow mcpmux by whatever an upstream sends
// (measured before these bounds: +155 to +199 MB during a 180 MB notification flood). Every
// host-facing writer has a Backlog that counts the bytes waiting (the writer's buffer and its
// socket's) and, past SHED_BYTES:
// - sheds what may be lost: progress and log notifications are not sent at all;
// - coalesces what only says "look again": one `*/list_changed` per list and one
//   `resources/updated` per URI wait, and go out once the host has caught up;
// - never drops responses, requests or anything else (cancellations, task status): those are
//   written, and a writer past maxBacklogBytes() is cut;
// - cuts the connection when the host has taken nothing of it for STUCK_MS;
// - tells the owner, which stops reading that host's requests until it catches up (a host that
//   asks and never reads its answers gets no more answers queued). HTTP cannot stop reading a
//   POST: there, more than UNREAD_ANSWERS_BYTES waiting gets the host's requests a 503.
// Each shed message and each cut is published (observe/events.ts, mcpmux:host:backlog) and
// counted (metrics.ts); the first shed on a connection is said once in the log.

import type { Wire } from '../jsonrpc/framing.js';
import type { Incoming, JsonRpcId } from '../jsonrpc/message.js';
import { publishHostBacklog, type HostTransport } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import { isObject } from '../objects.js';

/** Past this many bytes waiting for a host, what may be lost is shed (see above). */
export const SHED_BYTES = 1024 * 1024;
/** The smallest hard bound (maxBacklogBytes): always above SHED_BYTES. */
export const MIN_BACKLOG_BYTES = 4 * 1024 * 1024;
/**
 * Past this many bytes of answers waiting for an HTTP host (more than shedding ever leaves, so
 * answers it does not read), its next requests are refused with 503 until it reads them. A host
 * that reads, even during a notification flood, stays below it.
 */
export const UNREAD_ANSWERS_BYTES = 4 * 1024 * 1024;
/** A host that takes nothing of what waits past SHED_BYTES for this long is cut. */
export const STUCK_MS = 30_000;
/** Tests shorten STUCK_MS with this (milliseconds). */
export const STUCK_ENV = 'MCPMUX_STUCK_MS';
/** Coalesced notifications waiting for one host at most (distinct URIs of resources/updated). */
export const MAX_COALESCED = 1024;
/** How often a writer that is behind is looked at (caught up? stuck?). */
const CHECK_MS = 200;

/**
 * The hard bound: past this many bytes waiting (after everything sheddable was shed), the
 * connection is dropped. Room for a few of the largest messages, so a slow but live reader of
 * a large answer is never cut off.
 */
export function maxBacklogBytes(maxMessageBytes: number): number {
  return Math.max(4 * maxMessageBytes, MIN_BACKLOG_BYTES);
}

/** The reason given when a peer is dropped for not reading. */
export function notReading(waiting: number, who = 'the peer'): string {
  return `${who} is not reading what mcpmux sends (${waiting} bytes waiting)`;
}

/** The reason given when a peer is dropped for having taken nothing for too long. */
export function stuck(waiting: number, ms: number): string {
  return `the peer has read nothing of what mcpmux sends for ${Math.round(ms / 1000)} s (${waiting} bytes waiting)`;
}

/** STUCK_MS, or the environment's STUCK_ENV (read once: every writer has a Backlog). */
const STUCK_AFTER_MS = ((v) => (Number.isFinite(v) && v > 0 ? v : STUCK_MS))(Number(process.env[STUCK_ENV]));

/** Bytes waiting on an HTTP response: its own buffer (socket included; 0 once it is gone). */
export function waitingOn(res: { destroyed: boolean; writableLength: number }): number {
  return res.destroyed ? 0 : res.writableLength;
}

const KEEP = 0;
const SHED = 1;

/**
 * What may happen to `msg` when its host is behind: KEEP (responses, requests, batches, and
 * notifications that must arrive), SHED (progress, log messages), or a key under which only
 * the newest one waits (list_changed per list, resources/updated per URI).
 */
function treatment(msg: Incoming): typeof KEEP | typeof SHED | string {
  if (Array.isArray(msg) || !('method' in msg) || 'id' in msg) return KEEP;
  switch (msg.method) {
    case 'notifications/progress':
    case 'notifications/message':
      return SHED;
    case 'notifications/tools/list_changed':
    case 'notifications/prompts/list_changed':
    case 'notifications/resources/list_changed':
      return msg.method;
    case 'notifications/resources/updated': {
      const uri = msg.params?.uri;
      return typeof uri === 'string' ? `${msg.method} ${uri}` : KEEP;
    }
    default:
      return KEEP;
  }
}

/**
 * What a write of `wire` adds to a Node stream's `writableLength`: UTF-16 units for a string
 * (Node counts strings by length, not bytes), bytes for a Buffer. Counting written bytes the same
 * way as the waiting ones keeps "what the host took" (written - waiting) exact.
 */
export function queuedLength(wire: Wire): number {
  if (typeof wire === 'string') return wire.length;
  let n = 0;
  for (const piece of wire) n += piece.length;
  return n;
}

/**
 * Bytes of the writes in progress that libuv has not yet handed to the kernel, for a socket or
 * pipe (undefined for anything else). Node's writableLength counts a chunk being written in full
 * until the last byte of it is out, so a host slowly reading one large answer would look as if it
 * took nothing; this count goes down as it reads.
 */
export function unsentBytes(stream: unknown): number | undefined {
  const q = (stream as { _handle?: { writeQueueSize?: unknown } } | null | undefined)?._handle?.writeQueueSize;
  return typeof q === 'number' ? q : undefined;
}

function jsonChars(msg: Incoming): number {
  try {
    return JSON.stringify(msg).length;
  } catch {
    return Infinity; // cannot be written anyway (nesting): never held
  }
}

/** Whether a parsed body (one message or a batch) holds a request (something to be answered). */
export function carriesRequest(value: unknown): boolean {
  const isRequest = (m: unknown): boolean => isObject(m) && 'method' in m && 'id' in m;
  return Array.isArray(value) ? value.some(isRequest) : isRequest(value);
}

export interface BacklogOptions {
  /** How the host is connected (the label of events and metrics). */
  transport: HostTransport;
  log: Logger;
  /** The hard bound: past it the connection is cut at once (maxBacklogBytes). */
  maxBytes: number;
  /** Bytes waiting for the host now: the writer's own buffer and its socket's. */
  waiting(): number;
  /** The socket's bytes not yet handed to the kernel (unsentBytes), where known: progress within one large write. */
  unsent?(): number | undefined;
  /** Cuts the connection (destroys it); `why` says why. */
  cut(why: string): void;
  /** Writes a coalesced notification once the host has caught up, by the transport's usual path. */
  resend(msg: Incoming, related: JsonRpcId | undefined): void;
  /** The host fell behind (true) or caught up (false): stop or resume reading its requests. */
  onBehind?(behind: boolean): void;
}

/** One host-facing writer's accounting: see the top of this file. */
export class Backlog {
  /** Bytes handed to the writer so far (what the host took = written - waiting). */
  private written = 0;
  private behind = false;
  private gone = false;
  /** The owner writes no more (ended()); what was written is still watched. */
  private closing = false;
  private timer: NodeJS.Timeout | undefined;
  private taken = 0;
  private unsent: number | undefined;
  private progressAt = 0;
  private saidShed = false;
  private readonly pending = new Map<string, { msg: Incoming; related: JsonRpcId | undefined; chars: number }>();
  /** What `pending` holds, in JSON characters: at most SHED_BYTES, whatever an upstream puts in them. */
  private pendingChars = 0;

  constructor(private readonly opts: BacklogOptions) {}

  /**
   * Whether `msg` may be written now. False when it is shed or set aside (coalesced) because
   * the host is behind, or when the connection is gone.
   */
  admit(msg: Incoming, related?: JsonRpcId): boolean {
    if (this.gone || this.closing) return false;
    const t = treatment(msg);
    if (t === KEEP) return true;
    // Caught up since the last look? (The periodic check may not have run yet.)
    if (this.behind) this.check();
    if (this.gone) return false;
    if (!this.behind && this.opts.waiting() <= SHED_BYTES) {
      // A newer notice of the same kind goes out now: the one set aside says nothing more.
      if (t !== SHED && this.unhold(t)) this.shed(msg, 'coalesced');
      return true;
    }
    this.fallBehind();
    if (t === SHED) {
      this.shed(msg, 'shed');
    } else if (this.pending.has(t)) {
      this.shed(this.unhold(t)!.msg, 'coalesced');
      this.hold(t, msg, related);
    } else if (this.pending.size >= MAX_COALESCED) {
      this.shed(msg, 'shed');
    } else {
      this.hold(t, msg, related);
    }
    return false;
  }

  /** Sets `msg` aside under `key` until the host catches up, or sheds it past what pending may hold. */
  private hold(key: string, msg: Incoming, related: JsonRpcId | undefined): void {
    // Only while behind, and only for the few coalesced kinds: the one serialisation is cheap.
    const chars = jsonChars(msg);
    if (this.pendingChars + chars > SHED_BYTES) return this.shed(msg, 'shed');
    this.pending.set(key, { msg, related, chars });
    this.pendingChars += chars;
  }

  private unhold(key: string): { msg: Incoming } | undefined {
    const held = this.pending.get(key);
    if (!held) return undefined;
    this.pending.delete(key);
    this.pendingChars -= held.chars;
    return held;
  }

  /** `bytes` were written: cuts the connection past the hard bound; false when it did. */
  wrote(bytes: number): boolean {
    if (this.gone) return false;
    this.written += bytes;
    const waiting = this.opts.waiting();
    if (waiting > this.opts.maxBytes) {
      this.cutNow(notReading(waiting), 'full', waiting);
      return false;
    }
    if (waiting > SHED_BYTES) this.fallBehind();
    return true;
  }

  /** The writer drained (or may have): looks at once rather than at the next check. */
  poke(): void {
    if (this.behind) this.check();
  }

  /**
   * The owner writes no more to this connection (its stream ended): coalesced notices set aside
   * go to `resend`, and a host still behind stays watched (cut if stuck) until release().
   */
  ended(): void {
    if (this.gone || this.closing) return;
    this.closing = true;
    this.flushPending();
  }

  /**
   * The connection is gone: timers stop, and coalesced notices still set aside are handed to
   * `resend` (a transport that keeps what it cannot deliver, like a Streamable HTTP session's
   * GET stream, keeps them; a closed one drops them).
   */
  release(): void {
    if (this.gone) return;
    this.gone = true;
    this.stop();
    this.flushPending();
  }

  private fallBehind(): void {
    if (this.behind) return;
    this.behind = true;
    this.taken = this.written - this.opts.waiting();
    this.unsent = this.opts.unsent?.();
    this.progressAt = Date.now();
    this.timer = setInterval(() => this.check(), Math.min(CHECK_MS, STUCK_AFTER_MS));
    this.timer.unref();
    this.opts.onBehind?.(true);
  }

  private check(): void {
    if (this.gone) return;
    const waiting = this.opts.waiting();
    const taken = this.written - waiting;
    const unsent = this.opts.unsent?.();
    const now = Date.now();
    // The host took something: whole writes are done, or the one in progress got shorter.
    if (taken > this.taken || (unsent !== undefined && this.unsent !== undefined && unsent < this.unsent)) this.progressAt = now;
    this.taken = Math.max(taken, this.taken);
    this.unsent = unsent;
    if (waiting <= SHED_BYTES) return this.catchUp();
    if (now - this.progressAt >= STUCK_AFTER_MS) this.cutNow(stuck(waiting, now - this.progressAt), 'stuck', waiting);
  }

  private catchUp(): void {
    this.behind = false;
    this.stop();
    this.opts.onBehind?.(false);
    this.flushPending();
  }

  private flushPending(): void {
    const pending = [...this.pending.values()];
    this.pending.clear();
    this.pendingChars = 0;
    for (const p of pending) this.opts.resend(p.msg, p.related);
  }

  private stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private cutNow(why: string, kind: 'stuck' | 'full', waiting: number): void {
    this.opts.log.warn({ transport: this.opts.transport, why }, 'host connection cut: it is not reading');
    publishHostBacklog({ transport: this.opts.transport, action: 'closed', why: kind, waiting });
    this.gone = true;
    this.stop();
    this.opts.cut(why);
    // After the cut: a transport that keeps what it cannot deliver now keeps these.
    this.flushPending();
  }

  private shed(msg: Incoming, action: 'shed' | 'coalesced'): void {
    const method = (msg as { method: string }).method;
    const waiting = this.opts.waiting();
    if (!this.saidShed) {
      this.saidShed = true;
      this.opts.log.warn(
        { transport: this.opts.transport, waiting, method },
        'host is not keeping up: progress and log notifications to it are shed, list_changed and resources/updated coalesced (said once per connection)',
      );
    }
    publishHostBacklog({ transport: this.opts.transport, action, method, waiting });
  }
}
