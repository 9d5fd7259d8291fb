// Newline-delimited JSON over a pair of byte streams: the MCP stdio transport.
// Used for the host side (process stdin/stdout) and for child-process upstreams.

import type { Readable, Writable } from 'node:stream';
import { LineDecoder, encodeChunks, type Frame, type Wire } from '../jsonrpc/framing.js';
import type { Incoming } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { Backlog, maxBacklogBytes, notReading, queuedLength, unsentBytes } from './backlog.js';
import type { FrameError, Transport } from './transport.js';

export class StreamTransport implements Transport {
  onmessage?: Transport['onmessage'];
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;

  private readonly decoder: LineDecoder;

  get rawResults(): (() => boolean) | undefined {
    return this.decoder.rawResults;
  }

  set rawResults(wanted: (() => boolean) | undefined) {
    this.decoder.rawResults = wanted;
  }

  private readonly maxBacklog: number;
  /** Host side only: what waits for a host that does not read (backlog.ts). */
  private readonly backlog: Backlog | undefined;
  /** Bytes in `queue`, not yet handed to the output. */
  private queued = 0;
  private closed = false;
  private readonly emit = (frame: Frame): void => {
    if (frame.ok) {
      if (frame.value !== undefined) this.onmessage?.(frame.value, undefined, frame.bytes);
    } else {
      this.onframeerror?.(frame);
    }
  };

  constructor(
    private readonly input: Readable,
    private readonly output: Writable,
    maxMessageBytes: number,
    /**
     * False when the owner knows better why the streams ended (a child: its exit status): the
     * input's end and the output's errors (EPIPE from a child that died) are then its to report.
     */
    closeOnInputEnd = true,
    /**
     * Set for a host (mcpmux stdio): what may be lost is shed while the host is behind, and its
     * requests are not read until it catches up. Unset (an upstream child): only the hard bound.
     */
    host?: { log: Logger },
  ) {
    this.decoder = new LineDecoder(maxMessageBytes);
    this.maxBacklog = maxBacklogBytes(maxMessageBytes);
    if (host) {
      this.backlog = new Backlog({
        transport: 'stdio',
        log: host.log,
        maxBytes: this.maxBacklog,
        waiting: () => this.output.writableLength + this.queued,
        unsent: () => unsentBytes(this.output),
        cut: (why) => this.cut(why),
        resend: (msg) => this.send(msg),
        onBehind: (behind) => (behind ? input.pause() : input.resume()),
      });
      output.on('drain', () => this.backlog!.poke());
    }
    input.on('data', (chunk: Buffer) => this.decoder.push(chunk, this.emit));
    if (closeOnInputEnd) input.on('end', () => this.finish('input ended'));
    input.on('error', (e) => this.finish(`input error: ${e.message}`));
    if (closeOnInputEnd) output.on('error', (e) => this.finish(`output error: ${e.message}`));
  }

  /**
   * Messages sent while handling one chunk of input go out in ONE write: the flush runs from
   * process.nextTick, which Node schedules after every promise continuation queued so far.
   * Under load this turns dozens of write syscalls into one; alone, it costs nothing.
   */
  send(msg: Incoming): Wire | undefined {
    if (this.closed || this.output.destroyed || this.output.writableEnded) return undefined;
    // A notification shed for a host that is behind is not even encoded.
    if (this.backlog && !this.backlog.admit(msg)) return undefined;
    const wire = encodeChunks(msg); // before queueing: it throws for a message that cannot be written
    if (this.queue.length === 0) process.nextTick(this.flush);
    if (typeof wire === 'string') {
      this.queue.push(wire + '\n');
    } else {
      // Raw values (opaque.ts) are written as the Buffers they arrived in, never copied.
      for (const piece of wire) this.queue.push(piece);
      this.queue.push('\n');
      this.hasBuffers = true;
    }
    if (this.backlog) this.queued += queuedLength(wire) + 1;
    return wire;
  }

  private queue: (string | Buffer)[] = [];
  private hasBuffers = false;
  private readonly flush = (): void => {
    const queue = this.queue;
    const bytes = this.queued;
    this.queue = [];
    this.queued = 0;
    if (this.output.destroyed || this.output.writableEnded) return;
    if (!this.hasBuffers) {
      this.output.write(queue.length === 1 ? queue[0]! : queue.join(''));
    } else {
      this.hasBuffers = false;
      this.output.cork();
      for (const piece of queue) this.output.write(piece);
      this.output.uncork();
    }
    if (this.backlog) {
      this.backlog.wrote(bytes);
      return;
    }
    // A peer that does not read: drop it rather than buffer without bound.
    const waiting = this.output.writableLength;
    if (waiting > this.maxBacklog) this.cut(notReading(waiting));
  };

  private cut(why: string): void {
    this.output.destroy();
    this.input.destroy();
    this.finish(why);
  }

  async close(): Promise<void> {
    if (this.queue.length > 0) this.flush();
    if (!this.closed && !this.output.writableEnded) this.output.end();
    this.finish('closed');
  }

  /** Marks the transport closed and tells the owner why. Idempotent. */
  finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.backlog?.release();
    this.onclose?.(reason);
  }
}
