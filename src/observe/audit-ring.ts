// The last audit lines, in memory, for the web console (`GET /status/audit`). Fed by the audit
// log's own writer (audit.ts hands it every line on its way to the file, after the formatter
// and the secret scrubber), so what the console shows is byte for byte what the file got: the
// same redaction, no second formatter to drift from it. Bounded in lines and in each line's
// length. It outlives a reload that only moves the file, so the console keeps its history; a
// reload that changes what is redacted (audit.arguments, audit.redact, the secrets) or turns the
// audit log off clears it: lines redacted under the old rules are not served under the new.

/** Lines kept at most. */
export const AUDIT_RING_LINES = 200;
/** A line longer than this (full arguments) is kept cut, with a mark; the file has it whole. */
const AUDIT_RING_LINE_CHARS = 4096;

export class AuditRing {
  private readonly lines: string[] = [];
  /** Where the oldest line is, once the ring is full. */
  private head = 0;

  constructor(private readonly max = AUDIT_RING_LINES) {}

  /** One serialised audit line (with or without its newline). */
  push(line: string): void {
    let text = line.endsWith('\n') ? line.slice(0, -1) : line;
    if (text.length > AUDIT_RING_LINE_CHARS) text = `${text.slice(0, AUDIT_RING_LINE_CHARS)}…[cut]`;
    if (this.lines.length < this.max) {
      this.lines.push(text);
      return;
    }
    this.lines[this.head] = text;
    this.head = (this.head + 1) % this.max;
  }

  /** The last `last` lines kept (all of them when undefined), oldest first. */
  snapshot(last?: number): string[] {
    const all = [...this.lines.slice(this.head), ...this.lines.slice(0, this.head)];
    return last === undefined || last >= all.length ? all : all.slice(all.length - Math.max(0, last));
  }

  /** Forgets every line (a reload that redacts otherwise, or turns the audit log off). */
  clear(): void {
    this.lines.length = 0;
    this.head = 0;
  }
}
