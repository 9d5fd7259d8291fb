// What `mcpmux connect` writes to its host on stdout: one line per message, encoded the way the
// daemon encodes (encodeChunks: numbers a double cannot hold keep their digits, long strings
// their bytes), and a way for the bridge's readers to wait while the host is not reading.
//
// The bridge reads the daemon's answers and streams only when `ready()` resolves, so a host that
// stops reading stops the bridge reading from the daemon: what waits for the host is the pipe's
// own buffer plus at most one chunk per open stream, never the whole flood (the daemon's bounds
// then apply to its side of the connection).

import type { Writable } from 'node:stream';
import { encodeChunks, writeWire } from '../jsonrpc/framing.js';
import type { Logger } from '../observe/logger.js';

export class HostOutput {
  private waiters: (() => void)[] = [];
  private gone = false;

  constructor(
    private readonly out: Writable,
    private readonly log: Logger,
  ) {
    out.on('drain', () => this.release());
    // A host that is gone reads nothing more: nobody may wait for it.
    out.on('close', () => this.stop());
    out.on('error', () => this.stop());
  }

  /** Writes one message (or batch) as one line. */
  write(msg: unknown): void {
    if (this.gone || this.out.destroyed || this.out.writableEnded) return;
    let wire;
    try {
      wire = encodeChunks(msg);
    } catch (err) {
      // Nesting JSON.parse read but JSON.stringify cannot write (see framing.ts): said, not relayed.
      this.log.warn({ err: String(err) }, 'a message from the daemon could not be written to the host');
      return;
    }
    // Raw values (opaque.ts) go out as the Buffers they arrived in, in one writev.
    writeWire(this.out, typeof wire === 'string' ? wire + '\n' : [...wire, '\n']);
  }

  /** Resolves once the host has taken what waits for it (at once if it has, or if it is gone). */
  ready(): Promise<void> {
    if (this.gone || !this.out.writableNeedDrain) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private stop(): void {
    this.gone = true;
    this.release();
  }

  private release(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
