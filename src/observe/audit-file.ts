// The audit log's file: an append-only destination for pino that never blocks the data path.
//
// Lines are queued and written by one asynchronous write at a time (everything queued goes in
// that write), so under load many lines share a syscall and nothing waits on the disk. The
// queue is bounded: past `maxQueuedBytes` new lines are dropped and counted rather than growing
// memory while a disk is slow or gone. A failed write loses its lines, reports them, and the
// next lines try again. `reopen()` (SIGUSR2, for logrotate) opens the path anew; the write in
// flight finishes into the old file, so a rename loses nothing. `close()` drains what is
// queued, bounded in time, so a SIGTERM'd daemon writes every line it audited.
//
// Why not pino.destination (sonic-boom): its flushSync retries a failing write forever (ENOSPC
// on shutdown would hang the drain), and in sync mode every line would be a syscall on the
// event loop.

import fs from 'node:fs';
import path from 'node:path';

export interface AuditFileOptions {
  /** Lines queued beyond this many bytes are dropped (and reported). */
  maxQueuedBytes?: number;
  /** A write failed, or lines were dropped: `lines` audit lines are lost. Called per event. */
  onLoss: (why: string, lines: number) => void;
}

const DEFAULT_MAX_QUEUED = 16 * 1024 * 1024;
/** At most this much goes into one write. */
const MAX_WRITE = 1024 * 1024;
const MODE = 0o640;

export class AuditFile {
  private fd: number;
  private queue: string[] = [];
  private queuedBytes = 0;
  private writing = false;
  /** A file descriptor replaced by `reopen` while a write to it was in flight. */
  private retired: number | undefined;
  private closed = false;
  private drained: (() => void) | undefined;
  private readonly maxQueued: number;

  /** Opens (creating folders and the file as needed) or throws with the reason. */
  constructor(
    readonly file: string,
    private readonly opts: AuditFileOptions,
  ) {
    this.maxQueued = opts.maxQueuedBytes ?? DEFAULT_MAX_QUEUED;
    makeDirs(path.dirname(file));
    this.fd = fs.openSync(file, 'a', MODE);
  }

  /** pino's destination interface: one serialised line (with its newline). */
  write(line: string): boolean {
    if (this.closed) return false;
    if (this.queuedBytes + line.length > this.maxQueued) {
      this.opts.onLoss('the audit writer is too far behind (queue full)', 1);
      return false;
    }
    this.queue.push(line);
    this.queuedBytes += line.length;
    if (!this.writing) this.pump();
    return true;
  }

  /** Opens the path again (after logrotate renamed it). Failure keeps the current file. */
  reopen(): void {
    if (this.closed) return;
    let fd: number;
    try {
      makeDirs(path.dirname(this.file));
      fd = fs.openSync(this.file, 'a', MODE);
    } catch (err) {
      this.opts.onLoss(`cannot reopen ${this.file}: ${(err as Error).message}; still writing to the old file`, 0);
      return;
    }
    const old = this.fd;
    this.fd = fd;
    // The write in flight (if any) still goes to the old file; close it after that write.
    if (this.writing) this.retired = old;
    else fs.close(old, () => {});
  }

  /** Writes what is queued (waiting at most `ms`), then closes the file. */
  async close(ms = 2000): Promise<void> {
    if (this.closed) return;
    if (this.writing || this.queue.length > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        this.drained = () => (clearTimeout(timer), resolve());
      });
    }
    this.closed = true;
    if (this.queue.length > 0) this.opts.onLoss('the audit file did not drain in time at shutdown', this.queue.length);
    this.queue = [];
    if (!this.writing) fs.closeSync(this.fd);
  }

  private pump(): void {
    if (this.queue.length === 0) {
      this.writing = false;
      const done = this.drained;
      this.drained = undefined;
      done?.();
      return;
    }
    this.writing = true;
    const lines = this.take();
    const buf = Buffer.from(lines.join(''));
    const fd = this.fd;
    this.writeAll(fd, buf, 0, (err) => {
      if (this.retired !== undefined) {
        fs.close(this.retired, () => {});
        this.retired = undefined;
      }
      if (err) this.opts.onLoss(`cannot write ${this.file}: ${err.message}`, lines.length);
      if (this.closed) {
        this.writing = false;
        fs.close(this.fd, () => {});
        return;
      }
      this.pump();
    });
  }

  /** Up to MAX_WRITE bytes of whole lines from the head of the queue. */
  private take(): string[] {
    let n = 0;
    let bytes = 0;
    while (n < this.queue.length && (n === 0 || bytes + this.queue[n]!.length <= MAX_WRITE)) bytes += this.queue[n++]!.length;
    const lines = this.queue.splice(0, n);
    this.queuedBytes -= bytes;
    return lines;
  }

  /** fs.write until every byte is written (short writes happen). */
  private writeAll(fd: number, buf: Buffer, offset: number, done: (err: NodeJS.ErrnoException | null) => void): void {
    fs.write(fd, buf, offset, buf.length - offset, null, (err, n) => {
      if (err) return done(err);
      if (offset + n < buf.length) return this.writeAll(fd, buf, offset + n, done);
      done(null);
    });
  }
}

/**
 * mkdir -p, one level at a time. (fs.mkdirSync with `recursive` loops forever where a folder
 * cannot be made although its parent exists, as under /proc: it takes ENOENT to mean "make
 * the parent first".)
 */
function makeDirs(dir: string): void {
  try {
    fs.mkdirSync(dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeDirs(parent);
    fs.mkdirSync(dir);
  }
}
