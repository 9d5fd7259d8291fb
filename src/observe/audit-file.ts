// The audit log's file: an append-only destination for audit lines that never blocks the data path.
//
// Each line is copied at once into a chunk (a Buffer, outside the JS heap), so the string dies
// young and the garbage collector never copies queued lines around. A chunk is written when it
// is full, or FLUSH_MS after its first line, by one asynchronous write at a time: under load
// many lines share a syscall, and nothing waits on the disk. Chunks waiting to be written are
// bounded (`maxQueuedBytes`): past that, new lines are dropped and reported rather than growing
// memory while a disk is slow or gone. A failed write loses its lines, reports them, and the
// next chunk tries again. `reopen()` (SIGUSR2, for logrotate) opens the path anew; lines
// audited before it still go to the old file, so a rename loses nothing and splits cleanly. `close()` drains what is
// queued, bounded in time, so a SIGTERM'd daemon writes every line it audited.
//
// Why not pino.destination (sonic-boom): its flushSync retries a failing write forever (ENOSPC
// at shutdown would hang the drain), in sync mode every line is a syscall on the event loop,
// and in async mode queued lines are JS strings that each scavenge copies.

import fs from 'node:fs';
import path from 'node:path';

export interface AuditFileOptions {
  /** Bytes that may wait to be written; lines beyond are dropped (and reported). */
  maxQueuedBytes?: number;
  /** A write failed, or lines were dropped: `lines` audit lines are lost. */
  onLoss: (why: string, lines: number) => void;
}

interface Chunk {
  buf: Buffer;
  used: number;
  lines: number;
  /** The file it goes to: fixed when sealed, so lines audited before a reopen stay in the old file. */
  fd: number;
}

const DEFAULT_MAX_QUEUED = 16 * 1024 * 1024;
const CHUNK_BYTES = 256 * 1024;
/** Chunk buffers kept for reuse (see `spares`). */
const MAX_SPARES = 2;
/** A line waits at most this long for others to share its write. */
const FLUSH_MS = 20;
/**
 * Private, like the state files (files.ts): audit lines name clients, tools and arguments. A
 * file that already exists keeps the mode it has (an operator may have opened it to a group);
 * folders mcpmux creates for it are private too.
 */
const MODE = 0o600;
const DIR_MODE = 0o700;

export class AuditFile {
  private fd: number;
  /** The chunk lines go into now (undefined until the first line after a write). */
  private filling: Chunk | undefined;
  /** Full chunks waiting for the disk, oldest first. */
  private readonly full: Chunk[] = [];
  private queuedBytes = 0;
  /**
   * Chunk buffers to reuse, so a steady load allocates none. Two: a write that ends before the
   * next line arrives hands its buffer back while the other is still spare; with room for one
   * only, a buffer was dropped that way every few flushes, and each one dropped is 256 KB of
   * external memory, which V8 answers with a mark-compact (issue 23: the audit log's collections).
   */
  private readonly spares: Buffer[] = [];
  private writing = false;
  private timer: NodeJS.Timeout | undefined;
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

  /** One whole line (with its newline), as audit.ts builds it (the interface of a pino destination). */
  write(line: string): boolean {
    if (this.closed) return false;
    // UTF-8 takes at most 3 bytes per UTF-16 unit: room for that means room for the line.
    const worst = line.length * 3;
    if (this.queuedBytes + worst > this.maxQueued) {
      this.opts.onLoss('the audit writer is too far behind (queue full)', 1);
      return false;
    }
    let chunk = this.filling;
    if (chunk && chunk.buf.length - chunk.used < worst) {
      // Full: it goes to the disk now, without waiting for its timer.
      this.seal();
      chunk = undefined;
      if (!this.writing) this.pump();
    }
    if (!chunk) {
      const buf = worst > CHUNK_BYTES ? Buffer.allocUnsafe(worst) : (this.spares.pop() ?? Buffer.allocUnsafe(CHUNK_BYTES));
      chunk = this.filling = { buf, used: 0, lines: 0, fd: this.fd };
    }
    const n = chunk.buf.write(line, chunk.used, 'utf8');
    chunk.used += n;
    chunk.lines++;
    this.queuedBytes += n;
    if (!this.writing) this.timer ??= setTimeout(this.flushNow, FLUSH_MS);
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
    // Lines audited before the signal belong to the old file: they keep its descriptor, and it
    // is closed once they are written.
    this.seal();
    const old = this.fd;
    this.fd = fd;
    if (!this.writing) {
      if (this.full.length > 0) this.pump();
      else fs.close(old, () => {});
    }
  }

  /** Writes what is queued (waiting at most `ms`), then closes the file. */
  async close(ms = 2000): Promise<void> {
    if (this.closed) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.seal();
    if (this.writing || this.full.length > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, ms);
        this.drained = () => (clearTimeout(timer), resolve());
        if (!this.writing) this.pump();
      });
    }
    this.closed = true;
    const left = this.full.reduce((n, c) => n + c.lines, 0);
    if (left > 0) this.opts.onLoss('the audit file did not drain in time at shutdown', left);
    this.full.length = 0;
    if (!this.writing) fs.closeSync(this.fd);
  }

  private readonly flushNow = (): void => {
    this.timer = undefined;
    this.seal();
    if (!this.writing) this.pump();
  };

  /** The chunk being filled joins the ones waiting for the disk. */
  private seal(): void {
    const chunk = this.filling;
    this.filling = undefined;
    if (chunk && chunk.used > 0) {
      chunk.fd = this.fd;
      this.full.push(chunk);
    }
  }

  private pump(): void {
    const chunk = this.full.shift();
    if (!chunk) {
      this.writing = false;
      const done = this.drained;
      this.drained = undefined;
      done?.();
      return;
    }
    this.writing = true;
    this.writeAll(chunk.fd, chunk.buf.subarray(0, chunk.used), (err) => {
      this.queuedBytes -= chunk.used;
      if (chunk.buf.length === CHUNK_BYTES && this.spares.length < MAX_SPARES) this.spares.push(chunk.buf);
      // The last line for a file replaced by `reopen`: that descriptor is done.
      if (chunk.fd !== this.fd && !this.full.some((c) => c.fd === chunk.fd)) fs.close(chunk.fd, () => {});
      if (err) this.opts.onLoss(`cannot write ${this.file}: ${err.message}`, chunk.lines);
      if (this.closed) {
        this.writing = false;
        fs.close(this.fd, () => {});
        return;
      }
      // More full chunks, or closing: go on. Otherwise lines now filling wait for their timer.
      if (this.full.length > 0 || this.drained) return this.pump();
      this.writing = false;
      if (this.filling) this.timer ??= setTimeout(this.flushNow, FLUSH_MS);
    });
  }

  /** fs.write until every byte is written (short writes happen). */
  private writeAll(fd: number, data: Buffer, done: (err: NodeJS.ErrnoException | null) => void): void {
    fs.write(fd, data, 0, data.length, null, (err, n) => {
      if (err) return done(err);
      if (n < data.length) return this.writeAll(fd, data.subarray(n), done);
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
    fs.mkdirSync(dir, DIR_MODE);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return;
    const parent = path.dirname(dir);
    if (code !== 'ENOENT' || parent === dir) throw err;
    makeDirs(parent);
    fs.mkdirSync(dir, DIR_MODE);
  }
}
