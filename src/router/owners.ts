// Who a message belongs to, for the messages an upstream sends without saying so: which host
// sessions have requests in flight to which upstream (for server-initiated requests from a
// shared stdio upstream), and which session owns each task and URL elicitation it started.

import type { Upstream } from '../upstream/upstream.js';
import type { SessionPort } from './session-port.js';

/** Per shared upstream: the host sessions with requests in flight to it. */
export class Usage {
  private readonly inflight = new Map<Upstream, Map<SessionPort, number>>();

  /** A request of `session` to `up` starts; the returned function ends it. */
  begin(up: Upstream, session: SessionPort): () => void {
    let users = this.inflight.get(up);
    if (!users) this.inflight.set(up, (users = new Map()));
    users.set(session, (users.get(session) ?? 0) + 1);
    return () => {
      const n = (users.get(session) ?? 1) - 1;
      if (n > 0) users.set(session, n);
      else if (users.delete(session) && users.size === 0 && this.inflight.get(up) === users) this.inflight.delete(up);
    };
  }

  /** The sessions with requests in flight to `up` now. */
  users(up: Upstream): SessionPort[] {
    return [...(this.inflight.get(up)?.keys() ?? [])];
  }

  forgetSession(session: SessionPort): void {
    for (const users of this.inflight.values()) users.delete(session);
  }

  forgetUpstream(up: Upstream): void {
    this.inflight.delete(up);
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
