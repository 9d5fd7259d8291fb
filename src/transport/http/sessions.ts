// Every host session the daemon holds, whatever its transport: the count behind
// limits.maxSessions, one timer for keep-alives and idle expiry, and closing them all on drain.

import type { Logger } from '../../observe/logger.js';
import type { Wire } from '../../jsonrpc/framing.js';
import type { Incoming } from '../../jsonrpc/message.js';
import type { FrameError, Transport } from '../transport.js';
import type { HostJwt } from './oidc.js';

/**
 * Idle expiry: a Streamable HTTP session with no request in flight and no open stream for this
 * long is closed (its id then answers 404, and the host re-initializes). SSE and WebSocket
 * sessions end with their connection instead; keep-alives find dead connections.
 */
export const DEFAULT_IDLE_SESSION_MS = 30 * 60_000;
/**
 * A Streamable HTTP session with no request in flight and no open stream for this long counts
 * as idle in /status and /metrics (it stays open until the idle expiry above): a host that went
 * away without DELETE, or one between requests a minute apart, is not an active session.
 */
export const IDLE_REPORT_MS = 60_000;
/** SSE comments and WebSocket pings this often keep proxies from cutting long-lived streams. */
export const DEFAULT_KEEPALIVE_MS = 25_000;

export type SessionKind = 'streamable' | 'sse' | 'ws';

/** The 503 a new session gets from a draining daemon (nothing ran: a balancer may send it elsewhere). */
export const DRAINING_REFUSAL = 'Service Unavailable: this daemon is shutting down; open the session on another';

/**
 * What the HTTP front needs of the host session it opens over a connection (a HostSession
 * fits): the front sits below the session in the flow, so it knows this shape, not the class.
 */
export interface HostHandle {
  readonly id: string;
  readonly protocolVersion: string;
  readonly isInitialized: boolean;
  /** The toolset it was opened with (kept for its whole life: see streamable.ts). */
  readonly toolset: string | undefined;
  onclose?: (reason: string) => void;
  close(): Promise<void>;
}

export interface RegisteredSession extends Transport {
  readonly kind: SessionKind;
  /**
   * The id the host itself knows the session by: Streamable HTTP's `Mcp-Session-Id`, legacy
   * SSE's `sessionId` (of its /messages URL); none over WebSocket. Not the host session's
   * own id (HostHandle.id), which logs and /status show: this one lets a request into the session.
   */
  readonly id?: string;
  /** The host session on top of this transport (set by `SessionRegistry.open`). */
  host: HostHandle;
  /** Who signed in for it through OIDC, and with which JWT last (set by `SessionRegistry.open`). */
  credential: HostCredential;
  /** When the session became idle, or undefined while it is busy or connected. */
  idleSince(): number | undefined;
  /**
   * When a session that has said nothing since its `initialize` was created (undefined once it
   * has, and for sessions that live as long as their connection).
   */
  unfinishedSince(): number | undefined;
  /** Writes a keep-alive (SSE comment, WebSocket ping) and drops connections that are dead. */
  keepalive(): void;
  /** Ends the session (HostSession closed, then its transport). */
  end(reason: string): Promise<void>;
}

export interface RegistryOptions {
  maxSessions: number;
  /** Sessions one token's client may hold at once (the anonymous client has only maxSessions). */
  maxSessionsPerClient: number;
  idleMs: number;
  /** A session that says nothing after its initialize is closed after this long (default: min(idleMs, 10 s)). */
  unfinishedMs?: number;
  keepaliveMs: number;
  log: Logger;
}

/**
 * A session that never follows its `initialize` with anything (not even
 * notifications/initialized) is closed this soon: a flood of bare initializes must not hold
 * the session table for the idle expiry's 30 minutes.
 */
export const UNFINISHED_SESSION_MS = 10_000;

/** How many of something each token client holds now (the anonymous client is not counted). */
export class ClientCounts {
  private readonly counts = new Map<string, number>();

  get(client: string | undefined): number {
    return client === undefined ? 0 : (this.counts.get(client) ?? 0);
  }

  add(client: string | undefined): void {
    if (client !== undefined) this.counts.set(client, this.get(client) + 1);
  }

  remove(client: string | undefined): void {
    if (client === undefined) return;
    const n = this.get(client) - 1;
    if (n > 0) this.counts.set(client, n);
    else this.counts.delete(client);
  }
}

/**
 * What an OIDC host proved for one session: who signed in (the JWT's subject) and the latest
 * JWT validated for it, which upstream grants exchange (SessionPort.hostToken). A static-token
 * or anonymous session has neither.
 */
export class HostCredential {
  private jwt: HostJwt | undefined;
  private readonly principal: string | undefined;

  constructor(jwt: HostJwt | undefined) {
    this.jwt = jwt;
    this.principal = jwt?.principal;
  }

  /**
   * Whether a later request (already of the session's client) may act in it: the same person,
   * and a JWT where the session began with one (a session never changes hands, nor moves
   * between a static token and a JWT). Refused like another client's request (403).
   */
  admits(jwt: HostJwt | undefined): boolean {
    return this.principal === jwt?.principal;
  }

  /**
   * A later request's JWT, validated: the one that expires last is kept (requests of a session
   * may overlap, and an older token arriving last must not replace a newer one).
   */
  renew(jwt: HostJwt | undefined): void {
    if (jwt && (!this.jwt || jwt.expiresAt >= this.jwt.expiresAt)) this.jwt = jwt;
  }

  /** When the latest JWT expires (ms since the epoch); undefined for a session without one. */
  get expiresAt(): number | undefined {
    return this.jwt?.expiresAt;
  }

  /** The JWT upstream grants may exchange: none once it has expired (the host sends a new one with its next request). */
  current(): string | undefined {
    return this.jwt && Date.now() < this.jwt.expiresAt ? this.jwt.token : undefined;
  }
}

export class SessionRegistry {
  private readonly sessions = new Set<RegisteredSession>();
  /** Token client -> its sessions now. */
  private readonly perClient = new ClientCounts();
  private timer: NodeJS.Timeout | undefined;
  private lastKeepalive = Date.now();
  /** A clustered daemon draining (HttpServer.drain): open sessions go on, new ones are refused. */
  private draining = false;

  constructor(private readonly opts: RegistryOptions) {}

  get size(): number {
    return this.sessions.size;
  }

  /** How often a quiet stream gets a keep-alive comment. */
  get keepaliveMs(): number {
    return this.opts.keepaliveMs;
  }

  /** New quotas (a reload): they decide new sessions; sessions already open stay. */
  setQuotas(maxSessions: number, maxSessionsPerClient: number): void {
    this.opts.maxSessions = maxSessions;
    this.opts.maxSessionsPerClient = maxSessionsPerClient;
  }

  /**
   * From now on every new session is refused (503): a load balancer retries the request on
   * another daemon (contrib/haproxy/haproxy.cfg), while the sessions open here go on.
   */
  drain(): void {
    this.draining = true;
  }

  /** Why no new session may be opened for `client` now (a 503's message), or undefined. */
  refusal(client: string | undefined): string | undefined {
    if (this.draining) return DRAINING_REFUSAL;
    return this.quotaRefusal('sessions', this.sessions.size, client, this.perClient.get(client));
  }

  /**
   * Why no more stateless (2026-07-28) requests may be open now, given `open` of them (and
   * `openForClient` of this token client's): they are no sessions, but a listen stream lives as
   * long as one, so they get pools of the same sizes, apart from the sessions'.
   */
  statelessRefusal(open: number, client: string | undefined, openForClient: number): string | undefined {
    return this.quotaRefusal('open requests without a session', open, client, openForClient);
  }

  private quotaRefusal(what: string, open: number, client: string | undefined, openForClient: number): string | undefined {
    if (open >= this.opts.maxSessions) return `Service Unavailable: too many ${what} (limits.maxSessions = ${this.opts.maxSessions})`;
    if (client !== undefined && openForClient >= this.opts.maxSessionsPerClient) {
      return `Service Unavailable: client "${client}" has too many ${what} (limits.maxSessionsPerClient = ${this.opts.maxSessionsPerClient})`;
    }
    return undefined;
  }

  add(s: RegisteredSession): void {
    this.sessions.add(s);
  }

  /**
   * Opens the HostSession on top of a new transport, for `who` (its token's client and its
   * toolset), and keeps it registered until the host session closes; `onClosed` then runs
   * (each transport's own bookkeeping).
   */
  open<S extends RegisteredSession>(session: S, open: OpenSession, who: SessionFor, onClosed?: () => void): HostHandle {
    const { client, toolset } = who;
    const credential = new HostCredential(who.jwt);
    session.credential = credential;
    const host = open(session, {
      kind: session.kind,
      client,
      ...(toolset !== undefined && { toolset }),
      ...(who.jwt && { hostToken: () => credential.current() }),
      ...(session.id !== undefined && { mcpSessionId: session.id }),
    });
    session.host = host;
    if (session instanceof ConnectionSession) session.watchExpiry();
    this.add(session);
    this.perClient.add(client);
    host.onclose = () => {
      this.delete(session);
      this.perClient.remove(client);
      onClosed?.();
    };
    return host;
  }

  delete(s: RegisteredSession): void {
    this.sessions.delete(s);
  }

  private get unfinishedMs(): number {
    return this.opts.unfinishedMs ?? Math.min(this.opts.idleMs, UNFINISHED_SESSION_MS);
  }

  start(): void {
    // One timer for everything; fine-grained enough for short idle limits in tests.
    const period = Math.max(50, Math.min(this.opts.keepaliveMs, this.unfinishedMs / 4));
    this.timer = setInterval(() => this.tick(), period);
    this.timer.unref();
  }

  private tick(): void {
    const now = Date.now();
    const keepalive = now - this.lastKeepalive >= this.opts.keepaliveMs;
    if (keepalive) this.lastKeepalive = now;
    for (const s of this.sessions) {
      if (keepalive) s.keepalive();
      const unfinished = s.unfinishedSince();
      if (unfinished !== undefined && now - unfinished >= this.unfinishedMs) {
        this.opts.log.info({ kind: s.kind, ms: now - unfinished }, 'closing a session that said nothing after initialize');
        void s.end('unfinished');
        continue;
      }
      const since = s.idleSince();
      if (since !== undefined && now - since >= this.opts.idleMs) {
        this.opts.log.info({ kind: s.kind, idleMs: now - since }, 'closing idle session');
        void s.end('idle');
      }
    }
  }

  /** Per kind, the sessions idle for `ms` or longer now (see IDLE_REPORT_MS). */
  idleCounts(ms: number): Map<SessionKind, number> {
    const now = Date.now();
    const out = new Map<SessionKind, number>();
    for (const s of this.sessions) {
      const since = s.idleSince();
      if (since !== undefined && now - since >= ms) out.set(s.kind, (out.get(s.kind) ?? 0) + 1);
    }
    return out;
  }

  /** Stops the timer and closes every session. */
  async closeAll(reason: string): Promise<void> {
    clearInterval(this.timer);
    await Promise.allSettled([...this.sessions].map((s) => s.end(reason)));
    this.sessions.clear();
  }
}

/**
 * How a transport gets its HostSession (built by `mcpmux serve`, which owns the router and the
 * options). The transport sets `onclose` on the returned session to forget it.
 */
export type OpenSession = (
  transport: Transport,
  info: { kind: SessionKind; client: string | undefined; toolset?: string; stateless?: boolean; hostToken?: () => string | undefined; mcpSessionId?: string },
) => HostHandle;

/** Whom a new session is for: its token's client, the toolset chosen for it (guard.ts `who`), and its JWT if any. */
export interface SessionFor {
  client: string | undefined;
  toolset: string | undefined;
  jwt?: HostJwt;
}

/**
 * A host session that lives exactly as long as one connection (a legacy SSE stream, a
 * WebSocket): it is never idle on its own, and ends when the connection does.
 */
export abstract class ConnectionSession implements RegisteredSession {
  abstract readonly kind: SessionKind;
  onmessage?: Transport['onmessage'];
  onframeerror?: (err: FrameError) => void;
  onclose?: (reason: string) => void;
  host!: HostHandle;
  credential!: HostCredential;
  protected closed = false;
  private expiry: NodeJS.Timeout | undefined;

  abstract send(msg: Incoming): Wire | undefined;
  abstract close(): Promise<void>;
  abstract keepalive(): void;
  /** Its JWT has expired: the connection is closed in the transport's own way (then finish). */
  protected abstract expired(): void;

  /**
   * A session opened with a JWT lives no longer than its JWT: the connection proved who the
   * person is once, and a person disabled at the identity provider must not keep a socket
   * open for ever. The latest JWT counts (a legacy SSE session's POSTs bring newer ones), so
   * the timer looks again when it fires. Sessions of static tokens have no expiry.
   */
  watchExpiry(): void {
    clearTimeout(this.expiry);
    const at = this.credential.expiresAt;
    if (at === undefined || this.closed) return;
    const wait = at - Date.now();
    if (wait <= 0) return this.expired();
    // (setTimeout's longest wait is 2^31-1 ms: a later expiry is waited for in steps)
    this.expiry = setTimeout(() => this.watchExpiry(), Math.min(wait, 2 ** 31 - 1));
    this.expiry.unref();
  }

  idleSince(): undefined {
    return undefined;
  }

  unfinishedSince(): undefined {
    return undefined;
  }

  end(): Promise<void> {
    return this.host.close();
  }

  /** The connection is gone: tell the session once. */
  protected finish(reason: string): void {
    if (this.closed) return;
    this.closed = true;
    clearTimeout(this.expiry);
    this.onclose?.(reason);
  }
}
