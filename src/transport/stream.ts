// Newline-delimited JSON over a pair of byte streams: the MCP stdio transport.
// Used for the host side (process stdin/stdout) and for child-process upstreams.

import type { Readable, Writable } from 'node:stream';
import { LineDecoder, encodeLine, type Frame } from '../jsonrpc/framing.js';
import type { Incoming } from '../jsonrpc/message.js';
import type { FrameError, Transport } from './transport.js';

export class StreamTransport implements Transport {
  onmessage?: (value: unknown) => void;
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;

  private readonly decoder: LineDecoder;
  private closed = false;
  private readonly emit = (frame: Frame): void => {
    if (frame.ok) {
      if (frame.value !== undefined) this.onmessage?.(frame.value);
    } else {
      this.onframeerror?.(frame);
    }
  };

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    maxMessageBytes: number,
    /** False when the owner knows better why the stream ended (a child: its exit status). */
    closeOnInputEnd = true,
  ) {
    this.decoder = new LineDecoder(maxMessageBytes);
    input.on('data', (chunk: Buffer) => this.decoder.push(chunk, this.emit));
    if (closeOnInputEnd) input.on('end', () => this.finish('input ended'));
    input.on('error', (e) => this.finish(`input error: ${e.message}`));
    output.on('error', (e) => this.finish(`output error: ${e.message}`));
  }

  /**
   * Messages sent while handling one chunk of input go out in ONE write: the flush runs from
   * process.nextTick, which Node schedules after every promise continuation queued so far.
   * Under load this turns dozens of write syscalls into one; alone, it costs nothing.
   */
  send(msg: Incoming): void {
    if (this.closed || this.output.destroyed || this.output.writableEnded) return;
    if (this.queue.length === 0) process.nextTick(this.flush);
    this.queue.push(encodeLine(msg));
  }

  private queue: string[] = [];
  private readonly flush = (): void => {
    const out = this.queue.length === 1 ? this.queue[0]! : this.queue.join('');
    this.queue = [];
    if (!this.output.destroyed && !this.output.writableEnded) this.output.write(out);
  };

  async close(): Promise<void> {
    if (this.queue.length > 0) this.flush();
    if (!this.closed && !this.output.writableEnded) this.output.end();
    this.finish('closed');
  }

  /** Marks the transport closed and tells the owner why. Idempotent. */
  finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.(reason);
  }
}
