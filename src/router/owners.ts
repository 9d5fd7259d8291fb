// Who a message belongs to, for the messages an upstream sends without saying so: which host
// sessions have requests in flight to which upstream (for server-initiated requests from a
// shared stdio upstream), and which session owns each task and URL elicitation it started.

import type { Upstream } from '../upstream/upstream.js';
import type { SessionPort } from './session-port.js';

/** Per shared upstream: the host sessions with requests in flight to it. */
export class Usage {
  private readonly inflight = new Map<Upstream, Map<SessionPort, number>>();

  /**
   * A request of `session` to `up` starts; the returned function ends it. A count that falls to
   * 0 stays (forgetSession and forgetUpstream remove it): a Map emptied by delete() reallocates
   * its table in V8, and sequential calls would pay that, and a new Map, on every call.
   */
  begin(up: Upstream, session: SessionPort): () => void {
    let users = this.inflight.get(up);
    if (!users) this.inflight.set(up, (users = new Map()));
    users.set(session, (users.get(session) ?? 0) + 1);
    return () => {
      const n = users.get(session);
      if (n !== undefined && n > 0) users.set(session, n - 1);
    };
  }

  /** The sessions with requests in flight to `up` now. */
  users(up: Upstream): SessionPort[] {
    const out: SessionPort[] = [];
    for (const [session, n] of this.inflight.get(up) ?? []) if (n > 0) out.push(session);
    return out;
  }

  forgetSession(session: SessionPort): void {
    for (const users of this.inflight.values()) users.delete(session);
  }

  forgetUpstream(up: Upstream): void {
    this.inflight.delete(up);
  }
}

/** Tasks, and URL elicitations, one host session owns at most: its oldest are forgotten past it. */
export const MAX_OWNED_PER_SESSION = 1_000;
/** Tasks, and URL elicitations, owned across all sessions at most: the oldest are forgotten past it. */
export const MAX_OWNED_TOTAL = 100_000;
/** How long a task stays owned after its host fetched its result (a last tasks/get), unless its ttl ends sooner. */
export const TASK_DONE_GRACE_MS = 60_000;

interface Owned {
  session: SessionPort;
  /** Date.now() past which the id is over (a task's ttl); undefined: until something says so. */
  expires: number | undefined;
}

/**
 * Host-visible ids -> the session that owns each, bounded: an id is forgotten when what it
 * names is over (its expiry passed, or deleted), and past MAX_OWNED_PER_SESSION for its session
 * or MAX_OWNED_TOTAL in all, the oldest goes first. A forgotten task is "Unknown task" to its
 * host; a forgotten elicitation's completion reaches nobody.
 */
class OwnedIds {
  /** Oldest first (a Map keeps insertion order; a re-set id moves to the end). */
  private readonly owned = new Map<string, Owned>();
  private readonly bySession = new Map<SessionPort, Set<string>>();

  constructor(
    private readonly perSession = MAX_OWNED_PER_SESSION,
    private readonly total = MAX_OWNED_TOTAL,
    /** Said when an id is forgotten for room, not because it was over. */
    private readonly onEvict?: (id: string, session: SessionPort) => void,
  ) {}

  get size(): number {
    return this.owned.size;
  }

  get(id: string): SessionPort | undefined {
    const o = this.owned.get(id);
    if (o?.expires !== undefined && o.expires <= Date.now()) {
      this.delete(id);
      return undefined;
    }
    return o?.session;
  }

  /** `ttlMs`: how long it lasts at most (a task's ttl); absent, until deleted or evicted. */
  set(id: string, session: SessionPort, ttlMs?: number): void {
    this.delete(id);
    this.sweep();
    this.owned.set(id, { session, expires: ttlMs === undefined ? undefined : Date.now() + ttlMs });
    let own = this.bySession.get(session);
    if (!own) this.bySession.set(session, (own = new Set()));
    own.add(id);
    if (own.size > this.perSession) this.evict(own.values().next().value as string);
    if (this.owned.size > this.total) this.evict(this.owned.keys().next().value as string);
  }

  /** It is over in `ms` at the latest. */
  expireIn(id: string, ms: number): void {
    const o = this.owned.get(id);
    if (o) o.expires = Math.min(o.expires ?? Infinity, Date.now() + ms);
  }

  delete(id: string): boolean {
    const o = this.owned.get(id);
    if (!o) return false;
    this.owned.delete(id);
    const own = this.bySession.get(o.session)!;
    own.delete(id);
    if (own.size === 0) this.bySession.delete(o.session);
    return true;
  }

  forgetSession(session: SessionPort): void {
    for (const id of this.bySession.get(session) ?? []) this.owned.delete(id);
    this.bySession.delete(session);
  }

  /** The oldest ids, while they are over (a few per call: each set pays for its own). */
  private sweep(): void {
    const now = Date.now();
    let n = 0;
    for (const [id, o] of this.owned) {
      if (n++ >= 4 || o.expires === undefined || o.expires > now) return;
      this.delete(id);
    }
  }

  private evict(id: string): void {
    const session = this.owned.get(id)!.session;
    this.delete(id);
    this.onEvict?.(id, session);
  }
}

/**
 * Host-visible (namespaced) task and elicitation ids -> the session they must reach, and only
 * it. A task is owned until its ttl (the upstream may forget it then) or TASK_DONE_GRACE_MS
 * after its host fetched its result; a URL elicitation until the upstream says it is complete;
 * either, at the latest, until its session ends or it is the oldest past the caps.
 */
export class Owners {
  readonly tasks: OwnedIds;
  readonly elicitations: OwnedIds;

  constructor(onEvict?: (kind: 'task' | 'elicitation', id: string, session: SessionPort) => void, perSession?: number, total?: number) {
    this.tasks = new OwnedIds(perSession, total, onEvict && ((id, s) => onEvict('task', id, s)));
    this.elicitations = new OwnedIds(perSession, total, onEvict && ((id, s) => onEvict('elicitation', id, s)));
  }

  forgetSession(session: SessionPort): void {
    this.tasks.forgetSession(session);
    this.elicitations.forgetSession(session);
  }
}
