// The host sessions the router serves, and what they have been told: which of them have been
// greeted (initialize answered), and list_changed notices, debounced, to the sessions that
// can see a change and were greeted before it happened.

import type { Upstream } from '../upstream/upstream.js';
import type { SessionPort } from './session-port.js';

export type ChangeKind = 'tools' | 'prompts' | 'resources';

const LIST_CHANGED_DEBOUNCE_MS = 10;

export class Audience {
  readonly sessions = new Set<SessionPort>();
  /** Session -> sequence number of the catalogue state it was greeted with. */
  private readonly greeted = new Map<SessionPort, number>();
  /** Kind -> sequence number of its latest change, waiting for the debounce timer. */
  private readonly pending = new Map<ChangeKind, number>();
  private changeSeq = 0;
  private timer: NodeJS.Timeout | undefined;

  /**
   * `ownerOf`: the session that owns an upstream connection (`sharing: "session"`), if any;
   * `clientOf`: the host client a per-client connection is for (only its sessions hear from it).
   */
  constructor(
    readonly ownerOf: (up: Upstream) => SessionPort | undefined,
    readonly clientOf: (up: Upstream) => string | undefined = () => undefined,
  ) {}

  attach(session: SessionPort): void {
    this.sessions.add(session);
  }

  detach(session: SessionPort): void {
    this.sessions.delete(session);
    this.greeted.delete(session);
  }

  /** The session's initialize is answered now: later changes are news to it, earlier ones are not. */
  greet(session: SessionPort): void {
    // It may have gone while its answer was prepared; then there is nobody to greet (and nothing to leak).
    if (this.sessions.has(session)) this.greeted.set(session, this.changeSeq);
  }

  isGreeted(session: SessionPort): boolean {
    return this.greeted.has(session);
  }

  /** Greeted sessions that can be asked things (a stateless 2026-07-28 request cannot be, unprompted). */
  *askable(): Generator<SessionPort> {
    for (const s of this.greeted.keys()) if (!s.stateless) yield s;
  }

  get greetedCount(): number {
    let n = 0;
    for (const _ of this.askable()) n++;
    return n;
  }

  /** The only greeted session that can be asked things, if there is exactly one. */
  only(): SessionPort | undefined {
    let found: SessionPort | undefined;
    for (const s of this.askable()) {
      if (found) return undefined;
      found = s;
    }
    return found;
  }

  /** The sessions an upstream's broadcast-style messages go to: its owner, its client's sessions, or everyone. */
  of(up: Upstream): Iterable<SessionPort> {
    const owner = this.ownerOf(up);
    if (owner) return [owner];
    const client = this.clientOf(up);
    return client === undefined ? this.sessions : [...this.sessions].filter((s) => s.client === client);
  }

  /** The greeted, askable sessions of one host client. */
  askableOf(client: string): SessionPort[] {
    return [...this.askable()].filter((s) => s.client === client);
  }

  /**
   * Debounced `notifications/<kind>/list_changed` to every greeted session that can see `up`
   * (every greeted session, without `up`: a change in how names are shown).
   */
  listChanged(kind: ChangeKind, up?: Upstream): void {
    const owner = up && this.ownerOf(up);
    if (owner) {
      if (this.greeted.has(owner)) owner.notify(`notifications/${kind}/list_changed`);
      return;
    }
    // A per-client connection's lists are its client's sessions' business only.
    const client = up && this.clientOf(up);
    if (client !== undefined) {
      for (const s of this.greeted.keys()) if (s.client === client) s.notify(`notifications/${kind}/list_changed`);
      return;
    }
    this.pending.set(kind, ++this.changeSeq);
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      const changes = [...this.pending];
      this.pending.clear();
      for (const [s, seen] of this.greeted) {
        for (const [k, seq] of changes) if (seq > seen) s.notify(`notifications/${k}/list_changed`);
      }
    }, LIST_CHANGED_DEBOUNCE_MS);
  }

  close(): void {
    clearTimeout(this.timer);
  }
}
