// One open Server-Sent Events response: headers, events, comments for keep-alive, and the end.
// Used by the Streamable HTTP streams and by the legacy HTTP+SSE endpoint.

import type { ServerResponse } from 'node:http';
import { writeWire, type Wire } from '../../jsonrpc/framing.js';
import type { Incoming, JsonRpcId } from '../../jsonrpc/message.js';
import { Backlog, queuedLength, unsentBytes, waitingOn, type BacklogOptions } from '../backlog.js';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // Tells nginx-like proxies not to buffer the stream.
  'x-accel-buffering': 'no',
} as const;

/** What an SSE writer's Backlog needs from its owner (the rest comes from the response). */
export type SseBacklog = Pick<BacklogOptions, 'transport' | 'log' | 'maxBytes' | 'resend'>;

export class SseWriter {
  private ended = false;
  /** Called once when the connection is gone (peer left, or we ended it); `why` when we cut it. */
  onclose?: (why?: string) => void;
  private why: string | undefined;
  /** What waits for a host that does not read (backlog.ts). */
  private readonly backlog: Backlog;

  constructor(
    readonly res: ServerResponse,
    headers: Record<string, string>,
    backlog: SseBacklog,
  ) {
    this.backlog = new Backlog({
      ...backlog,
      waiting: () => this.waiting,
      unsent: () => unsentBytes(res.socket),
      cut: (why) => {
        this.why = why;
        res.destroy();
        this.finish();
      },
    });
    res.writeHead(200, { ...SSE_HEADERS, ...headers });
    res.flushHeaders();
    res.on('close', () => {
      this.finish();
      this.backlog.release();
    });
    // Everything handed to the socket: nothing waits for the host any more.
    res.on('finish', () => this.backlog.release());
    res.on('drain', () => this.backlog.poke());
  }

  /** Whether `msg` may be written now (false: shed or set aside while the host is behind; backlog.ts). */
  admit(msg: Incoming, related?: JsonRpcId): boolean {
    return this.backlog.admit(msg, related);
  }

  /** Bytes waiting for the host now (after end() too, until the host has read them). */
  get waiting(): number {
    return waitingOn(this.res);
  }

  get open(): boolean {
    return !this.ended && !this.res.writableEnded && !this.res.destroyed;
  }

  /**
   * Writes one event; false if the connection is gone. `data` must not contain newlines
   * (serialised JSON never does). Pieces of a Wire are written as they are, Buffers uncopied.
   */
  event(data: Wire, id?: string, event?: string): boolean {
    if (!this.open) return false;
    let head = '';
    if (event !== undefined) head += `event: ${event}\n`;
    if (id !== undefined) head += `id: ${id}\n`;
    head += 'data: ';
    writeWire(this.res, typeof data === 'string' ? `${head}${data}\n\n` : [head, ...data, '\n\n']);
    // A peer past the hard bound is dropped here (false).
    return this.backlog.wrote(head.length + queuedLength(data) + 2);
  }

  /** The priming event of a resumable stream: an id, the reconnect delay and empty data. */
  prime(id: string, retryMs: number): void {
    if (this.open) this.res.write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
  }

  /** A comment line: keeps proxies from timing the stream out and finds dead peers. */
  comment(text: string): void {
    if (!this.open) return;
    const line = `: ${text}\n\n`;
    this.res.write(line);
    this.backlog.wrote(line.length);
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.onclose?.(this.why);
    // After onclose: the owner no longer writes to this connection, and may keep what was set
    // aside. What was written stays watched until the host has read it (or is cut as stuck).
    this.backlog.ended();
  }
}
