// The last audit lines, in memory, for the web console (`GET /status/audit`). Fed by the audit
// log's own writer (audit.ts hands it every line on its way to the file, after the formatter
// and the secret scrubber), so what the console shows is byte for byte what the file got: the
// same redaction, no second formatter to drift from it. Bounded in lines, in each line's length
// and in bytes. It outlives a reload that only moves the file, so the console keeps its history;
// a reload that changes what is redacted (audit.arguments, audit.redact, the secrets) or turns
// the audit log off clears it: lines redacted under the old rules are not served under the new.
//
// The lines are kept as UTF-8 bytes in one buffer, not as strings: every line outlives many
// scavenges by design, so kept as strings each one (~300 bytes a call) was copied into V8's old
// generation and collected there by mark-compacts, the audit log's largest cost under load
// (docs/performance.md, issue 23). A console asks for its lines a few times a minute; decoding
// them then is the cheap side.

/** Lines kept at most. */
export const AUDIT_RING_LINES = 200;
/** A line longer than this (full arguments) is kept cut, with a mark; the file has it whole. */
const AUDIT_RING_LINE_BYTES = 4096;
/** Bytes kept at most: 200 lines of ~1.3 KB; longer lines leave room for fewer. */
const AUDIT_RING_BYTES = 256 * 1024;
const CUT = Buffer.from('…[cut]');
const NEWLINE = 0x0a;

export class AuditRing {
  /** Allocated on the first line (most daemons keep no audit log). */
  private bytes: Buffer | undefined;
  /** Each kept line's offset and length in `bytes`, oldest at `first`, circular. */
  private readonly starts: Int32Array;
  private readonly lengths: Int32Array;
  private first = 0;
  private count = 0;

  constructor(
    private readonly max = AUDIT_RING_LINES,
    private readonly capacity = AUDIT_RING_BYTES,
  ) {
    this.starts = new Int32Array(max);
    this.lengths = new Int32Array(max);
  }

  /** One serialised audit line (with or without its newline). */
  push(line: string): void {
    const bytes = (this.bytes ??= Buffer.allocUnsafeSlow(this.capacity));
    // Room for the line at its longest (UTF-8 takes at most 3 bytes per UTF-16 unit) and its
    // newline, so the string is encoded once, straight into place; lines never straddle the
    // buffer's end.
    const limit = Math.min(AUDIT_RING_LINE_BYTES + 1, line.length * 3);
    const room = limit + CUT.length;
    let at = this.end();
    if (at + room > this.capacity) {
      // The tail is too short: the lines still in it are the oldest ones; they go, and so does
      // the tail.
      while (this.count > 0 && this.starts[this.first]! >= at) this.drop();
      at = 0;
    }
    // The oldest lines are the ones just past `at`: drop those the new line may cover.
    while (this.count > 0 && (this.count === this.max || this.overlaps(this.first, at, at + room))) this.drop();
    let n = bytes.write(line, at, limit, 'utf8');
    if (n > 0 && bytes[at + n - 1] === NEWLINE) {
      // Its newline written: all of it was. The newline is not kept.
      n--;
    } else if (n > AUDIT_RING_LINE_BYTES || (limit > AUDIT_RING_LINE_BYTES && Buffer.byteLength(line) > n)) {
      // Longer than the limit: cut there, or before it if a character would be split.
      n = Math.min(n, AUDIT_RING_LINE_BYTES);
      while (n > 0 && (bytes[at + n]! & 0xc0) === 0x80) n--;
      n += CUT.copy(bytes, at + n);
    }
    const slot = (this.first + this.count) % this.max;
    this.starts[slot] = at;
    this.lengths[slot] = n;
    this.count++;
  }

  /** The last `last` lines kept (all of them when undefined), oldest first. */
  snapshot(last?: number): string[] {
    const n = last === undefined ? this.count : Math.max(0, Math.min(last, this.count));
    const out: string[] = [];
    for (let i = this.count - n; i < this.count; i++) {
      const slot = (this.first + i) % this.max;
      const at = this.starts[slot]!;
      out.push(this.bytes!.toString('utf8', at, at + this.lengths[slot]!));
    }
    return out;
  }

  /** Forgets every line (a reload that redacts otherwise, or turns the audit log off). */
  clear(): void {
    this.first = 0;
    this.count = 0;
  }

  /** Where the next line goes: just past the newest one. */
  private end(): number {
    if (this.count === 0) return 0;
    const newest = (this.first + this.count - 1) % this.max;
    return this.starts[newest]! + this.lengths[newest]!;
  }

  private overlaps(slot: number, from: number, to: number): boolean {
    const at = this.starts[slot]!;
    return at < to && at + this.lengths[slot]! > from;
  }

  private drop(): void {
    this.first = (this.first + 1) % this.max;
    this.count--;
  }
}
