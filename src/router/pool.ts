// Which upstream connections a host session uses. A `shared` server has one connection for all
// sessions; a `session` server gets one connection per host session, opened when the session
// initializes (its capabilities are part of the host's answer) and closed with the session.

import type { ReloadPlan } from '../config/diff.js';
import type { Config, ServerConfig } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import { makeScrubber, type Logger } from '../observe/logger.js';
import { MuxError, type Params } from '../protocol/mcp.js';
import type { StopGrace } from '../upstream/connect.js';
import { Upstream, type UpstreamListener } from '../upstream/upstream.js';
import type { InteractiveLogins } from '../upstream/oauth/interactive.js';
import { VERSION } from '../version.js';
import type { SessionPort } from './session-port.js';

const CLIENT_INFO = { name: 'mcpmux', version: VERSION };

/** What mcpmux declares to shared upstreams: what it can route back to some host. */
const SHARED_CLIENT_CAPABILITIES: Params = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
};

export class UpstreamPool {
  private readonly shared = new Map<string, Upstream>();
  private readonly perSession = new Map<SessionPort, Map<string, Upstream>>();
  private readonly owners = new WeakMap<Upstream, SessionPort>();
  private enabled: ServerConfig[];
  private scrub: ((text: string) => string) | undefined;
  /** Where every connection's unprompted traffic goes; set by the router before anything starts. */
  listener: UpstreamListener | undefined;
  /**
   * How a child is stopped when the last of mcpmux's connections close (closeAll) or a session
   * ends (closeFor); undefined: the default grace. A reload's stops keep the default: nobody
   * is waiting on mcpmux then.
   */
  grace: StopGrace | undefined;
  /** `mcpmux stdio`: logins that open themselves, for every connection made from now on (upstream.ts). */
  logins: InteractiveLogins | undefined;
  /** Connections closing (a session's, a reload's), which closeAll waits for too. */
  private readonly closing = new Map<Promise<void>, Upstream>();

  constructor(
    private config: Config,
    private readonly log: Logger,
  ) {
    this.enabled = config.servers.filter((s) => !s.disabled);
    this.scrub = makeScrubber(config.secrets);
  }

  /** Starts every shared upstream; resolves when each is ready or failed (never rejects). */
  startShared(): Promise<void>[] {
    return this.enabled.filter((c) => c.sharing === 'shared').map((c) => {
      const up = this.create(c, SHARED_CLIENT_CAPABILITIES);
      this.shared.set(c.name, up);
      return up.start();
    });
  }

  /** Opens this session's own connections (for `session` servers), declaring exactly the host's capabilities. */
  startFor(session: SessionPort): Promise<void>[] {
    const own = this.enabled.filter((c) => c.sharing === 'session');
    // A stateless request lives for one answer: a server per request is no session server.
    if (own.length === 0 || session.stateless || this.perSession.has(session)) return [];
    // Each host session forks its own copies: without a bound, any local process could make
    // mcpmux start maxSessions x N children.
    const running = this.sessionConnections();
    const max = this.config.limits.maxSessionUpstreams;
    if (running + own.length > max) {
      throw new RpcError(
        MuxError.Overloaded,
        `Too many per-session upstream connections: ${running} running, this session needs ${own.length} (limits.maxSessionUpstreams = ${max})`,
      );
    }
    const mine = new Map<string, Upstream>();
    this.perSession.set(session, mine);
    return own.map((c) => {
      const up = this.create(c, session.clientCapabilities);
      this.owners.set(up, session);
      mine.set(c.name, up);
      return up.start();
    });
  }

  /**
   * A reload: removed and restarted servers' connections close (calls in flight to them fail
   * with `why`), updated ones take their new settings, and added and restarted ones start: a
   * shared server once, a `session` server for each of `sessions` (those already greeted)
   * within limits.maxSessionUpstreams.
   * Resolves when the new connections are ready or failed.
   */
  async apply(next: Config, plan: ReloadPlan, sessions: Iterable<SessionPort>): Promise<void> {
    this.config = next;
    this.enabled = next.servers.filter((s) => !s.disabled);
    this.scrub = makeScrubber(next.secrets);
    const closing: Promise<void>[] = [];
    const stop = (name: string, why: string): void => {
      const shared = this.shared.get(name);
      this.shared.delete(name);
      if (shared) closing.push(this.close(shared, why));
      for (const mine of this.perSession.values()) {
        const own = mine.get(name);
        mine.delete(name);
        if (own) closing.push(this.close(own, why));
      }
    };
    for (const name of plan.removed) stop(name, `server "${name}" was removed from the config`);
    for (const s of plan.restarted) stop(s.name, `server "${s.name}" is restarting with its new config`);
    for (const { server } of plan.updated) for (const up of this.all()) if (up.name === server.name) up.reconfigure(server);
    await Promise.all(closing);

    const starting: Promise<void>[] = [];
    // A server given up on (a crash loop) gets another chance with every reload.
    for (const up of this.all()) if (up.gaveUp) starting.push(up.restart());
    const fresh = [...plan.added, ...plan.restarted];
    for (const c of fresh) {
      if (c.sharing !== 'shared') continue;
      const up = this.create(c, SHARED_CLIENT_CAPABILITIES);
      this.shared.set(c.name, up);
      starting.push(up.start());
    }
    // Each greeted session gets all of the new `session` servers or, past
    // limits.maxSessionUpstreams, none (the same bound a session's initialize meets): oldest first.
    const own = fresh.filter((c) => c.sharing === 'session');
    if (own.length > 0) {
      const max = this.config.limits.maxSessionUpstreams;
      let running = this.sessionConnections();
      let without = 0;
      for (const session of sessions) {
        if (running + own.length > max) {
          without++;
          continue;
        }
        running += own.length;
        let mine = this.perSession.get(session);
        if (!mine) this.perSession.set(session, (mine = new Map()));
        for (const c of own) {
          const up = this.create(c, session.clientCapabilities);
          this.owners.set(up, session);
          mine.set(c.name, up);
          starting.push(up.start());
        }
      }
      if (without > 0) {
        this.log.warn(
          { servers: own.map((c) => c.name), sessions: without, running, limit: max },
          'limits.maxSessionUpstreams reached: sessions open before the reload go without these per-session upstream connections (a new session gets them)',
        );
      }
    }
    await Promise.all(starting);
  }

  /** Connections of `session` servers open now, over all sessions. */
  private sessionConnections(): number {
    let n = 0;
    for (const m of this.perSession.values()) n += m.size;
    return n;
  }

  /** Closes this session's own connections. */
  async closeFor(session: SessionPort): Promise<void> {
    const mine = this.perSession.get(session);
    this.perSession.delete(session);
    if (mine) await Promise.all([...mine.values()].map((u) => this.close(u, undefined, this.grace)));
  }

  /**
   * Closes every connection, all at once (a stop is mostly waiting), and waits for those
   * already closing (a session that just ended): no child outlives this.
   */
  async closeAll(): Promise<void> {
    const all = this.all();
    this.perSession.clear();
    // Stops already under way (a reload's, with the default grace) are held to this one's too.
    if (this.grace) for (const up of this.closing.values()) up.hurry(this.grace);
    await Promise.all([...all.map((u) => this.close(u, undefined, this.grace)), ...this.closing.keys()]);
  }

  private close(up: Upstream, why?: string, grace?: StopGrace): Promise<void> {
    const p = up.close(why, grace);
    this.closing.set(p, up);
    void p.finally(() => this.closing.delete(p));
    return p;
  }

  /** The session that owns an upstream connection; undefined for shared ones. */
  ownerOf(up: Upstream): SessionPort | undefined {
    return this.owners.get(up);
  }

  /** The connection a session uses for a server, if it has one. */
  get(session: SessionPort | undefined, server: string): Upstream | undefined {
    return this.shared.get(server) ?? (session && this.perSession.get(session)?.get(server));
  }

  /** The session's connections in config order (all, whatever their state). */
  forSession(session: SessionPort | undefined): Upstream[] {
    const mine = session && this.perSession.get(session);
    const out: Upstream[] = [];
    for (const c of this.enabled) {
      const up = this.shared.get(c.name) ?? mine?.get(c.name);
      if (up) out.push(up);
    }
    return out;
  }

  /** Every connection (shared and per-session). */
  all(): Upstream[] {
    return [...this.shared.values(), ...[...this.perSession.values()].flatMap((m) => [...m.values()])];
  }

  /** Shared connections in config order (for commands without a host, such as `mcpmux tools`). */
  sharedList(): Upstream[] {
    return this.forSession(undefined);
  }

  private create(cfg: ServerConfig, clientCapabilities: Params): Upstream {
    if (!this.listener) throw new Error('UpstreamPool: no listener set');
    return new Upstream(cfg, {
      log: this.log,
      scrub: this.scrub,
      listener: this.listener,
      maxMessageBytes: this.config.limits.maxMessageBytes,
      // The config in force, not the one this connection was made under (a reload may change them).
      timeouts: () => this.config.timeouts,
      clientCapabilities,
      clientInfo: CLIENT_INFO,
      ...(this.logins && { logins: this.logins }),
    });
  }
}
