// One open Server-Sent Events response: headers, events, comments for keep-alive, and the end.
// Used by the Streamable HTTP streams and by the legacy HTTP+SSE endpoint.

import type { ServerResponse } from 'node:http';
import { writeWire, type Wire } from '../../jsonrpc/framing.js';
import { notReading } from '../backlog.js';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // Tells nginx-like proxies not to buffer the stream.
  'x-accel-buffering': 'no',
} as const;

export class SseWriter {
  private ended = false;
  /** Called once when the connection is gone (peer left, or we ended it); `why` when we cut it. */
  onclose?: (why?: string) => void;
  private why: string | undefined;

  constructor(
    readonly res: ServerResponse,
    headers: Record<string, string>,
    /** Bytes that may wait for the peer before the connection is dropped (backlog.ts). */
    private readonly maxBacklog: number,
  ) {
    res.writeHead(200, { ...SSE_HEADERS, ...headers });
    res.flushHeaders();
    res.on('close', () => this.finish());
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
    return this.checkBacklog();
  }

  /** Drops a connection whose peer has stopped reading; false when it did. */
  private checkBacklog(): boolean {
    const waiting = this.res.writableLength;
    if (waiting <= this.maxBacklog) return true;
    this.why = notReading(waiting);
    this.res.destroy();
    this.finish();
    return false;
  }

  /** The priming event of a resumable stream: an id, the reconnect delay and empty data. */
  prime(id: string, retryMs: number): void {
    if (this.open) this.res.write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
  }

  /** A comment line: keeps proxies from timing the stream out and finds dead peers. */
  comment(text: string): void {
    if (!this.open) return;
    this.res.write(`: ${text}\n\n`);
    this.checkBacklog();
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.onclose?.(this.why);
  }
}
