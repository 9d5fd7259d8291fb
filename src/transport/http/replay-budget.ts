// One budget for the replay buffers of every Streamable HTTP session together. Each stream
// keeps its own recent events for a resume (Last-Event-ID) under its own caps
// (streamable-session.ts); without a budget over all of them, many idle sessions each keep
// their share of every broadcast (measured: 100 sessions held 100 MB after a 16 MB log flood,
// ~1 GB at the default session cap). Past the budget the oldest events go first, whichever
// session holds them; each stream's newest event stays (it may be the response a resume needs).

import type { Logger } from '../../observe/logger.js';

/** All replay buffers together hold at most this many bytes (plus each stream's newest event). */
export const REPLAY_BUDGET_BYTES = 16 * 1024 * 1024;

/** A stream's replay buffer, as far as the budget is concerned. */
export interface Replayable {
  /** Oldest first; events leave from the front only. */
  events: { seq: number; bytes: number }[];
  bytes: number;
  /** Seq of the newest event dropped (a resume from before it has a gap). */
  dropped: number;
}

interface Entry {
  held: Replayable;
  seq: number;
}

export class ReplayBudget {
  private total = 0;
  /** Events held, all streams together. */
  private live = 0;
  /** Every event added, oldest first, across streams; entries of events already gone are skipped. */
  private order: Entry[] = [];
  private head = 0;
  /**
   * Streams whose one event is their newest (it stays): out of the queue, so a budget held over
   * by newest events alone costs nothing per add; back at its front when the stream gets another.
   */
  private readonly parked = new Map<Replayable, Entry>();
  private said = false;

  constructor(
    private readonly log: Logger,
    readonly max = REPLAY_BUDGET_BYTES,
  ) {}

  /** `ev` was just appended to `held`: while over the budget, the oldest events anywhere go. */
  added(held: Replayable, ev: { seq: number; bytes: number }): void {
    this.total += ev.bytes;
    this.live++;
    const older = this.parked.get(held);
    if (older) {
      // Its newest is no longer: the oldest event of that stream may go again, before later ones.
      this.parked.delete(held);
      if (this.head > 0) this.order[--this.head] = older;
      else this.order.unshift(older);
    }
    this.order.push({ held, seq: ev.seq });
    // One pass over the queue at most: what is left over it is newest events, which stay.
    for (let n = this.order.length - this.head; this.total > this.max && n > 0; n--) {
      const entry = this.order[this.head++]!;
      const first = entry.held.events[0];
      if (first?.seq !== entry.seq) continue; // already dropped by its stream, or its stream is gone
      if (entry.held.events.length === 1) {
        this.parked.set(entry.held, entry); // its stream's newest: looked at again once it is not
        continue;
      }
      this.shift(entry.held);
      if (!this.said) {
        this.said = true;
        this.log.warn({ budget: this.max }, 'replay buffers of all sessions over their budget: the oldest events are dropped (said once)');
      }
    }
    this.compact();
  }

  /** Drops `held`'s oldest event (its own caps, or the budget's). */
  shift(held: Replayable): void {
    const ev = held.events.shift()!;
    held.bytes -= ev.bytes;
    held.dropped = ev.seq;
    this.total -= ev.bytes;
    this.live--;
  }

  /** `held` is gone (its stream ended, its session closed): what it held leaves the budget. */
  forget(held: Replayable): void {
    this.total -= held.bytes;
    this.live -= held.events.length;
    held.events = [];
    held.bytes = 0;
    this.parked.delete(held);
  }

  /** Keeps the queue proportional to what is held: stale entries out, the consumed head cut. */
  private compact(): void {
    const queued = this.order.length - this.head;
    if (queued > 2 * this.live + 1024) {
      this.order = this.order.slice(this.head).filter((e) => e.held.events.length > 0 && e.held.events[0]!.seq <= e.seq);
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.order.length) {
      this.order = this.order.slice(this.head);
      this.head = 0;
    }
  }
}
