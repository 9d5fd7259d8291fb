// Who a message belongs to, for the messages an upstream sends without saying so: which host
// sessions have requests in flight to which upstream (for server-initiated requests from a
// shared stdio upstream), and which session owns each task and URL elicitation it started.

import type { Logger } from '../observe/logger.js';
import type { Upstream } from '../upstream/upstream.js';
import type { SessionPort } from './session-port.js';

/** Per shared upstream: the sessions with requests in flight to it, and the last session that used it. */
export class Usage {
  private readonly inflight = new Map<Upstream, Map<SessionPort, number>>();
  private readonly lastUser = new Map<Upstream, SessionPort>();

  /** A request of `session` to `up` starts; the returned function ends it. */
  begin(up: Upstream, session: SessionPort): () => void {
    let users = this.inflight.get(up);
    if (!users) this.inflight.set(up, (users = new Map()));
    users.set(session, (users.get(session) ?? 0) + 1);
    this.lastUser.set(up, session);
    return () => {
      const n = (users.get(session) ?? 1) - 1;
      if (n > 0) users.set(session, n);
      else if (users.delete(session) && users.size === 0 && this.inflight.get(up) === users) this.inflight.delete(up);
    };
  }

  /**
   * For a shared upstream that cannot say which call a request belongs to (stdio): the one
   * session with requests in flight to it; among several, the most recent of them (logged);
   * with none, the one that used it last, if it is still `alive`.
   */
  sessionFor(up: Upstream, alive: (s: SessionPort) => boolean, log: Logger): SessionPort | undefined {
    const users = this.inflight.get(up);
    const last = this.lastUser.get(up);
    if (users && users.size > 0) {
      if (users.size === 1) return users.keys().next().value;
      log.info('several sessions have requests in flight; routing to the most recent');
      return last && users.has(last) ? last : [...users.keys()].pop();
    }
    return last && alive(last) ? last : undefined;
  }

  forgetSession(session: SessionPort): void {
    for (const users of this.inflight.values()) users.delete(session);
    for (const [up, s] of this.lastUser) if (s === session) this.lastUser.delete(up);
  }

  forgetUpstream(up: Upstream): void {
    this.inflight.delete(up);
    this.lastUser.delete(up);
  }
}

/** Host-visible (namespaced) task and elicitation ids -> the session they must reach, and only it. */
export class Owners {
  readonly tasks = new Map<string, SessionPort>();
  readonly elicitations = new Map<string, SessionPort>();

  forgetSession(session: SessionPort): void {
    for (const owners of [this.tasks, this.elicitations]) for (const [id, s] of owners) if (s === session) owners.delete(id);
  }
}
