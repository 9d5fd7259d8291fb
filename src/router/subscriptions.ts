// resources/subscribe, reference-counted per upstream connection and URI across host sessions:
// the first subscriber subscribes upstream, the last one to leave unsubscribes.

import type { Upstream } from '../upstream/upstream.js';
import type { SessionPort } from './session-port.js';

export class Subscriptions {
  private readonly table = new Map<Upstream, Map<string, Set<SessionPort>>>();

  /** Adds a subscriber; true if it is the first for this upstream URI. */
  add(up: Upstream, uri: string, session: SessionPort): boolean {
    let uris = this.table.get(up);
    if (!uris) this.table.set(up, (uris = new Map()));
    let subs = uris.get(uri);
    const first = !subs;
    if (!subs) uris.set(uri, (subs = new Set()));
    subs.add(session);
    return first;
  }

  /** Removes a subscriber; true if it was the last for this upstream URI. */
  remove(up: Upstream, uri: string, session: SessionPort): boolean {
    const uris = this.table.get(up);
    const subs = uris?.get(uri);
    if (!subs?.delete(session) || subs.size > 0) return false;
    uris!.delete(uri);
    return true;
  }

  has(up: Upstream, uri: string): boolean {
    return this.table.get(up)?.has(uri) ?? false;
  }

  subscribers(up: Upstream, uri: string): ReadonlySet<SessionPort> | undefined {
    return this.table.get(up)?.get(uri);
  }

  /** URIs someone is subscribed to on this upstream (to restore after a restart). */
  urisOf(up: Upstream): string[] {
    return [...(this.table.get(up)?.keys() ?? [])];
  }

  /** Removes a session everywhere; returns the upstream URIs nobody is subscribed to any more. */
  dropSession(session: SessionPort): { up: Upstream; uri: string }[] {
    const orphaned: { up: Upstream; uri: string }[] = [];
    for (const [up, uris] of this.table) {
      for (const [uri, subs] of uris) {
        if (subs.delete(session) && subs.size === 0) {
          uris.delete(uri);
          orphaned.push({ up, uri });
        }
      }
    }
    return orphaned;
  }

  forget(up: Upstream): void {
    this.table.delete(up);
  }
}
