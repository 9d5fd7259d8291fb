// One open Server-Sent Events response: headers, events, comments for keep-alive, and the end.
// Used by the Streamable HTTP streams and by the legacy HTTP+SSE endpoint.

import type { ServerResponse } from 'node:http';

export const SSE_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  connection: 'keep-alive',
  // Tells nginx-like proxies not to buffer the stream.
  'x-accel-buffering': 'no',
} as const;

export class SseWriter {
  private ended = false;
  /** Called once when the connection is gone (peer left, or we ended it). */
  onclose?: () => void;

  constructor(
    readonly res: ServerResponse,
    headers: Record<string, string>,
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
   * (JSON.stringify output never does).
   */
  event(data: string, id?: string, event?: string): boolean {
    if (!this.open) return false;
    let s = '';
    if (event !== undefined) s += `event: ${event}\n`;
    if (id !== undefined) s += `id: ${id}\n`;
    s += `data: ${data}\n\n`;
    this.res.write(s);
    return true;
  }

  /** The priming event of a resumable stream: an id, the reconnect delay and empty data. */
  prime(id: string, retryMs: number): void {
    if (this.open) this.res.write(`id: ${id}\nretry: ${retryMs}\ndata: \n\n`);
  }

  /** A comment line: keeps proxies from timing the stream out and finds dead peers. */
  comment(text: string): void {
    if (this.open) this.res.write(`: ${text}\n\n`);
  }

  end(): void {
    if (!this.res.writableEnded) this.res.end();
    this.finish();
  }

  private finish(): void {
    if (this.ended) return;
    this.ended = true;
    this.onclose?.();
  }
}
