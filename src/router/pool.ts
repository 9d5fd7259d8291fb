// Which upstream connections a host session uses. A `shared` server has one connection for all
// sessions; a `session` server gets one connection per host session, opened when the session
// initializes (its capabilities are part of the host's answer) and closed with the session.
// A per-client server (`oauth.perClient`, config/types.ts isPerClient) gets one connection per
// host client: a connection carries one login, so it can serve only the client whose login it
// is. It opens when the client's first session initializes, is shared by that client's
// sessions (and its stateless requests), and closes PER_CLIENT_IDLE_MS after its last one ends.

import type { ReloadPlan } from '../config/diff.js';
import { isPerClient, scopeOf, type Config, type ServerConfig } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import { makeScrubber, type Logger } from '../observe/logger.js';
import { MuxError, type Params } from '../protocol/mcp.js';
import type { LoginIdentity, StopGrace } from '../upstream/connect.js';
import { Upstream, type UpstreamListener } from '../upstream/upstream.js';
import type { InteractiveLogins } from '../upstream/oauth/interactive.js';
import type { PrestartedChildren } from '../upstream/prestart.js';
import type { TraceContextOf } from '../upstream/trace-context.js';
import { VERSION } from '../version.js';
import type { SessionPort } from './session-port.js';

const CLIENT_INFO = { name: 'mcpmux', version: VERSION };

/** What mcpmux declares to shared upstreams: what it can route back to some host. */
const SHARED_CLIENT_CAPABILITIES: Params = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
};

/** How long a client's per-client connections outlive its last session (a host that reconnects, stateless requests one after another). */
const PER_CLIENT_IDLE_MS = 10_000;
/** Overrides PER_CLIENT_IDLE_MS (ms; tests shorten it). */
export const PER_CLIENT_IDLE_ENV = 'MCPMUX_PER_CLIENT_IDLE_MS';

/** Of several host tokens (JWTs), the one that expires last: the freshest the client presented. */
function freshest(tokens: string[]): string | undefined {
  let best: string | undefined;
  let bestExp = -Infinity;
  for (const t of tokens) {
    let exp = 0;
    try {
      const claims = JSON.parse(Buffer.from(t.split('.')[1] ?? '', 'base64url').toString('utf8')) as { exp?: unknown };
      if (typeof claims.exp === 'number') exp = claims.exp;
    } catch {
      // not a JWT: it counts as the oldest
    }
    if (exp >= bestExp) {
      best = t;
      bestExp = exp;
    }
  }
  return best;
}

export class UpstreamPool {
  private readonly shared = new Map<string, Upstream>();
  private readonly perSession = new Map<SessionPort, Map<string, Upstream>>();
  private readonly owners = new WeakMap<Upstream, SessionPort>();
  /** Per host client: its connections to per-client servers, by server name. */
  private readonly perClient = new Map<string, Map<string, Upstream>>();
  /** Per host client: its sessions open now (those that hold its per-client connections). */
  private readonly holders = new Map<string, Set<SessionPort>>();
  /** Per host client without sessions: when its per-client connections close. */
  private readonly idle = new Map<string, NodeJS.Timeout>();
  private readonly clients = new WeakMap<Upstream, string>();
  private readonly idleMs: number;
  /** Told of a per-client connection the pool closes on its own (its client's sessions are all gone): its subscriptions and usage are no one's. */
  retired: ((up: Upstream) => void) | undefined;
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
  /** Tracing is on: the trace context every connection made from now on sends upstream (upstream/trace-context.ts). */
  traceContext: TraceContextOf | undefined;
  /** `mcpmux stdio`: children spawned before it loaded, for the connections to adopt (upstream/prestart.ts). */
  prestarted: PrestartedChildren | undefined;
  /** Connections closing (a session's, a reload's), which closeAll waits for too. */
  private readonly closing = new Map<Promise<void>, Upstream>();

  constructor(
    private config: Config,
    private readonly log: Logger,
  ) {
    this.enabled = config.servers.filter((s) => !s.disabled);
    this.scrub = makeScrubber(config.secrets);
    const env = Number(process.env[PER_CLIENT_IDLE_ENV]);
    this.idleMs = Number.isInteger(env) && env >= 0 ? env : PER_CLIENT_IDLE_MS;
  }

  /** Starts every shared upstream; resolves when each is ready or failed (never rejects). */
  startShared(): Promise<void>[] {
    return this.enabled.filter((c) => scopeOf(c) === 'shared').map((c) => {
      const up = this.create(c, SHARED_CLIENT_CAPABILITIES);
      this.shared.set(c.name, up);
      return up.start();
    });
  }

  /**
   * Opens this session's own connections (for `session` servers), declaring exactly the host's
   * capabilities, and its client's per-client connections if the client has none open; the
   * session holds the latter until it closes. Resolves (each) when they are ready or failed.
   */
  startFor(session: SessionPort): Promise<void>[] {
    // A stateless request lives for one answer: a server per request is no session server.
    const own = session.stateless || this.perSession.has(session) ? [] : this.enabled.filter((c) => scopeOf(c) === 'session');
    const perClient = this.enabled.filter((c) => scopeOf(c) === 'client');
    const theirs = this.perClient.get(session.client);
    // All of them for a client's first session; later, only those it went without (a reload past the limit).
    const opening = perClient.filter((c) => !theirs?.has(c.name));
    if (own.length === 0 && perClient.length === 0) return [];
    // Each host session (and client) forks its own copies: without a bound, any local process
    // could make mcpmux start maxSessions x N children.
    const running = this.sessionConnections();
    const max = this.config.limits.maxSessionUpstreams;
    if (running + own.length + opening.length > max) {
      throw new RpcError(
        MuxError.Overloaded,
        `Too many per-session upstream connections: ${running} running, this session needs ${own.length + opening.length} (limits.maxSessionUpstreams = ${max}${this.perClient.size > 0 || opening.length > 0 ? '; per-client connections count too' : ''})`,
      );
    }
    const starting: Promise<void>[] = [];
    if (own.length > 0) {
      const mine = new Map<string, Upstream>();
      this.perSession.set(session, mine);
      for (const c of own) {
        const up = this.create(c, session.clientCapabilities, isPerClient(c) ? { client: session.client, subject: () => session.hostToken?.() } : undefined);
        this.owners.set(up, session);
        mine.set(c.name, up);
        starting.push(up.start());
      }
    }
    if (perClient.length > 0) {
      this.hold(session);
      const conns = this.openClient(session.client, opening);
      // Those still starting are waited for like a session's own (start() is the same promise);
      // one down for want of the host's identity starts again if this session brings one.
      for (const up of conns.values()) starting.push(up.retryWithSubject() ?? up.start());
    }
    return starting;
  }

  /** `session` holds its client's per-client connections: they stay open while it does. */
  private hold(session: SessionPort): void {
    let set = this.holders.get(session.client);
    if (!set) this.holders.set(session.client, (set = new Set()));
    set.add(session);
    clearTimeout(this.idle.get(session.client));
    this.idle.delete(session.client);
  }

  /** Opens `client`'s connections to per-client servers `cfgs` (adding to those it has). */
  private openClient(client: string, cfgs: ServerConfig[]): Map<string, Upstream> {
    let conns = this.perClient.get(client);
    if (!conns) this.perClient.set(client, (conns = new Map()));
    for (const c of cfgs) {
      // What mcpmux can route back to some session of this client, as for shared connections.
      const up = this.create(c, SHARED_CLIENT_CAPABILITIES, { client, subject: () => this.subjectOf(client) });
      this.clients.set(up, client);
      conns.set(c.name, up);
    }
    return conns;
  }

  /**
   * Starts again `session`'s client's connections that act for the host (token_exchange,
   * jwt_bearer with the host's JWT) and stopped for want of a host token (its JWTs expired, or a
   * static-token session opened them) or with a refused one, now that this session has one: no
   * `mcpmux login` can bring them back, only the host signing in again. Each connection decides
   * (Upstream.retryWithSubject: a JWT it has not started with, at most once per few seconds).
   * Undefined: nothing to start, which is every request but the rare one.
   */
  revive(session: SessionPort): Promise<void> | undefined {
    const theirs = this.perClient.get(session.client);
    if (!theirs || session.hostToken?.() === undefined) return undefined;
    let again: Promise<void>[] | undefined;
    for (const up of theirs.values()) {
      const p = up.retryWithSubject();
      if (p) (again ??= []).push(p);
    }
    return again && Promise.all(again).then(() => undefined);
  }

  /** The freshest host token among `client`'s open sessions (undefined: none has one). */
  private subjectOf(client: string): string | undefined {
    const tokens: string[] = [];
    for (const s of this.holders.get(client) ?? []) {
      const t = s.hostToken?.();
      if (t) tokens.push(t);
    }
    return freshest(tokens);
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
      for (const mine of [...this.perSession.values(), ...this.perClient.values()]) {
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
      if (scopeOf(c) !== 'shared') continue;
      const up = this.create(c, SHARED_CLIENT_CAPABILITIES);
      this.shared.set(c.name, up);
      starting.push(up.start());
    }
    const max = this.config.limits.maxSessionUpstreams;
    let running = this.sessionConnections();
    // Each client with per-client connections open (or in their idle grace), or with a greeted
    // session, gets the new per-client servers, within the same bound; its sessions hold them.
    const perClient = fresh.filter((c) => scopeOf(c) === 'client');
    const greeted = [...sessions];
    if (perClient.length > 0) {
      let without = 0;
      const clients = new Set([...this.perClient.keys(), ...greeted.map((s) => s.client)]);
      for (const client of clients) {
        if (running + perClient.length > max) {
          without++;
          continue;
        }
        running += perClient.length;
        const conns = this.openClient(client, perClient);
        for (const c of perClient) starting.push(conns.get(c.name)!.start());
        for (const s of greeted) if (s.client === client) this.hold(s);
      }
      if (without > 0) {
        this.log.warn(
          { servers: perClient.map((c) => c.name), clients: without, running, limit: max },
          'limits.maxSessionUpstreams reached: clients connected before the reload go without these per-client upstream connections (a new session of theirs opens them, within the limit)',
        );
      }
    }
    // Each greeted session gets all of the new `session` servers or, past
    // limits.maxSessionUpstreams, none (the same bound a session's initialize meets): oldest first.
    const own = fresh.filter((c) => scopeOf(c) === 'session');
    if (own.length > 0) {
      let without = 0;
      for (const session of greeted) {
        if (running + own.length > max) {
          without++;
          continue;
        }
        running += own.length;
        let mine = this.perSession.get(session);
        if (!mine) this.perSession.set(session, (mine = new Map()));
        for (const c of own) {
          const up = this.create(c, session.clientCapabilities, isPerClient(c) ? { client: session.client, subject: () => session.hostToken?.() } : undefined);
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

  /** Connections of `session` servers and per-client servers open now, over all sessions and clients. */
  private sessionConnections(): number {
    let n = 0;
    for (const m of this.perSession.values()) n += m.size;
    for (const m of this.perClient.values()) n += m.size;
    return n;
  }

  /**
   * Closes this session's own connections. The last session of its client leaves the client's
   * per-client connections to close after PER_CLIENT_IDLE_MS (unless another comes first).
   */
  async closeFor(session: SessionPort): Promise<void> {
    const mine = this.perSession.get(session);
    this.perSession.delete(session);
    const held = this.holders.get(session.client);
    if (held?.delete(session) && held.size === 0) {
      this.holders.delete(session.client);
      const timer = setTimeout(() => void this.closeClient(session.client), this.idleMs);
      timer.unref?.();
      this.idle.set(session.client, timer);
    }
    if (mine) await Promise.all([...mine.values()].map((u) => this.close(u, undefined, this.grace)));
  }

  /** Closes a client's per-client connections (its sessions are all gone). */
  private async closeClient(client: string): Promise<void> {
    this.idle.delete(client);
    if (this.holders.has(client)) return;
    const conns = this.perClient.get(client);
    this.perClient.delete(client);
    if (!conns) return;
    for (const up of conns.values()) this.retired?.(up);
    await Promise.all([...conns.values()].map((u) => this.close(u, undefined, this.grace)));
  }

  /**
   * Closes every connection, all at once (a stop is mostly waiting), and waits for those
   * already closing (a session that just ended): no child outlives this.
   */
  async closeAll(): Promise<void> {
    const all = this.all();
    this.perSession.clear();
    this.perClient.clear();
    this.holders.clear();
    for (const t of this.idle.values()) clearTimeout(t);
    this.idle.clear();
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

  /** The session that owns an upstream connection; undefined for shared and per-client ones. */
  ownerOf(up: Upstream): SessionPort | undefined {
    return this.owners.get(up);
  }

  /** The host client a per-client connection is for (only its sessions may use it or hear from it); undefined for others. */
  clientOf(up: Upstream): string | undefined {
    return this.clients.get(up);
  }

  /** The connection a session uses for a server, if it has one (a per-client server's: its client's, never another's). */
  get(session: SessionPort | undefined, server: string): Upstream | undefined {
    return this.shared.get(server) ?? (session && (this.perSession.get(session)?.get(server) ?? this.perClient.get(session.client)?.get(server)));
  }

  /** The session's connections in config order (all, whatever their state). */
  forSession(session: SessionPort | undefined): Upstream[] {
    const mine = session && this.perSession.get(session);
    const theirs = session && this.perClient.get(session.client);
    const out: Upstream[] = [];
    for (const c of this.enabled) {
      const up = this.shared.get(c.name) ?? mine?.get(c.name) ?? theirs?.get(c.name);
      if (up) out.push(up);
    }
    return out;
  }

  /** Every connection (shared, per-session and per-client). */
  all(): Upstream[] {
    return [...this.shared.values(), ...[...this.perSession.values(), ...this.perClient.values()].flatMap((m) => [...m.values()])];
  }

  /** Shared connections in config order (for commands without a host, such as `mcpmux tools`). */
  sharedList(): Upstream[] {
    return this.forSession(undefined);
  }

  private create(cfg: ServerConfig, clientCapabilities: Params, who?: LoginIdentity): Upstream {
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
      ...(who && { who }),
      ...(this.logins && { logins: this.logins }),
      ...(this.traceContext && { traceContext: this.traceContext }),
      ...(this.prestarted && { prestarted: this.prestarted }),
    });
  }
}
