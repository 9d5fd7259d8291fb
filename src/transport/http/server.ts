// The daemon's HTTP listener(s): routing of `/mcp` (Streamable HTTP), `/sse` + `/messages`
// (legacy HTTP+SSE), `/ws` (WebSocket upgrade) and the operator routes (`/healthz`, `/readyz`,
// and whatever is added to `adminRoutes`, e.g. `/metrics`, `/status`). The operator routes move
// to their own listener, bound to `listen.adminHost`, when `listen.adminPort` is set. Host and
// Origin are checked on every route (403); bearer tokens on the MCP routes and on the operator
// routes that name or change something (admin.ts), wherever those are served.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { DEFAULTS, type ClientToken, type OidcSettings } from '../../config/types.js';
import type { Logger } from '../../observe/logger.js';
import { AdminListener, addHealthRoutes, closeServer, listenOn, OperatorRoutes, runRoute, type RouteHandler } from './admin.js';
import { pathOf, splitTarget } from './url.js';
import { httpOptions } from './timeouts.js';
import { bodyBudgetFor } from './body-budget.js';
import type { ClusterForward } from './cluster-forward.js';
import { OidcVerifier } from './oidc.js';
import { afterAuth, Guard, type AuthResult } from './guard.js';
import { HttpRpcCode, sendError } from './respond.js';
import { DEFAULT_IDLE_SESSION_MS, DEFAULT_KEEPALIVE_MS, SessionRegistry, type OpenSession } from './sessions.js';
import { LegacySse, MESSAGES_PATH } from './sse.js';
import { StreamableHttp } from './streamable.js';
import { WsEndpoint } from './ws.js';

export interface HttpServerOptions {
  host: string;
  port: number;
  /** A separate listener for the operator routes (0 or undefined: they are served on `port`). */
  adminPort?: number;
  /** The address that listener binds to (default 127.0.0.1, whatever `host` is). */
  adminHost?: string;
  allowedOrigins: readonly string[];
  tokens: readonly ClientToken[];
  /** Hosts may present a JWT of this identity provider (listen.auth.oidc). */
  oidc?: OidcSettings;
  /** The config's toolsets: `?toolset=` must name one of them (only the names matter here). */
  toolsets: Readonly<Record<string, unknown>>;
  maxMessageBytes: number;
  /** Tracing is on: a POST's traceparent header (Streamable HTTP, legacy SSE) counts as its requests' context. */
  traceHeaders?: boolean;
  maxSessions: number;
  maxSessionsPerClient: number;
  open: OpenSession;
  log: Logger;
  /** Idle expiry of Streamable HTTP sessions (see sessions.ts). */
  idleSessionMs?: number;
  /** How soon a session that said nothing after its initialize is closed (see sessions.ts). */
  unfinishedSessionMs?: number;
  keepaliveMs?: number;
  /** A client must finish sending a request's headers, and then its whole request, within these. */
  headersTimeoutMs?: number;
  requestTimeoutMs?: number;
  /** In a cluster: 2026-07-28 retries whose call another daemon holds are forwarded there (cluster-forward.ts). */
  cluster?: ClusterForward;
  /** What `/readyz` reports (the server adds "draining" itself). */
  readiness: () => { ready: boolean; status?: string; detail?: unknown };
}

export interface Bound {
  host: string;
  port: number;
  adminPort: number | undefined;
  adminHost: string | undefined;
}

/** How long a drain waits for connections to finish after the sessions are closed. */
const DRAIN_GRACE_MS = 2000;
/** How often a draining daemon looks whether anything is left to serve (see drain). */
const DRAIN_POLL_MS = 100;

/**
 * `serving`; `draining`: /readyz says 503 and new sessions are refused, open ones go on
 * (drain); `closed`: every MCP request is refused while close() ends what is left.
 */
type Stage = 'serving' | 'draining' | 'closed';

const CORS_ALLOW_HEADERS = 'authorization, content-type, accept, mcp-session-id, mcp-protocol-version, last-event-id';
const CORS_EXPOSE_HEADERS = 'mcp-session-id, www-authenticate';

export class HttpServer {
  readonly registry: SessionRegistry;
  readonly streamable: StreamableHttp;
  readonly sse: LegacySse;
  readonly ws: WsEndpoint;
  private readonly guard: Guard;
  private readonly server: Server;
  private readonly admin: AdminListener | undefined;
  /** The admin listener's own Host check (its address is not `host`); the same tokens and origins. */
  private readonly adminGuard: Guard | undefined;
  /** /healthz, /readyz and what the caller adds (/metrics open, /status with a token). */
  readonly adminRoutes: OperatorRoutes;
  private stage: Stage = 'serving';
  /** Checks hosts' JWTs for both guards (one JWKS cache); replaced only when listen.auth.oidc changes. */
  private oidc: OidcVerifier | undefined;
  /** Requests on the MCP routes not answered yet (listen streams and session streams included). */
  private inFlight = 0;

  constructor(private readonly opts: HttpServerOptions) {
    const { log } = opts;
    this.oidc = opts.oidc && new OidcVerifier(opts.oidc, log.child({ component: 'oidc' }));
    this.guard = new Guard({ host: opts.host, allowedOrigins: opts.allowedOrigins, tokens: opts.tokens, oidc: this.oidc, toolsets: opts.toolsets });
    this.registry = new SessionRegistry({
      maxSessions: opts.maxSessions,
      maxSessionsPerClient: opts.maxSessionsPerClient,
      unfinishedMs: opts.unfinishedSessionMs,
      idleMs: opts.idleSessionMs ?? DEFAULT_IDLE_SESSION_MS,
      keepaliveMs: opts.keepaliveMs ?? DEFAULT_KEEPALIVE_MS,
      log,
    });
    // One budget for the bodies being read on every MCP route (/mcp, /messages).
    const common = { registry: this.registry, open: opts.open, maxMessageBytes: opts.maxMessageBytes, bodies: bodyBudgetFor(opts.maxMessageBytes), log };
    this.streamable = new StreamableHttp({ ...common, ...(opts.cluster && { cluster: opts.cluster }), ...(opts.traceHeaders && { traceHeaders: true }) });
    this.sse = new LegacySse({ ...common, ...(opts.traceHeaders && { traceHeaders: true }) });
    this.ws = new WsEndpoint({ ...common, guard: this.guard });

    this.adminRoutes = new OperatorRoutes(log);
    addHealthRoutes(this.adminRoutes, () => {
      const r = opts.readiness();
      const serving = this.stage === 'serving';
      const status = !serving ? 'draining' : (r.status ?? (r.ready ? 'ready' : 'starting'));
      return { ready: r.ready && serving, status, sessions: this.registry.size, detail: r.detail };
    });

    this.server = createServer(httpOptions(opts.headersTimeoutMs, opts.requestTimeoutMs), (req, res) => this.route(req, res, !this.admin));
    this.server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(req, socket, head));
    // `Expect: 100-continue`: Node would say "continue" before anyone looked at the request. Routed
    // like any request instead; the body reader says it once the body is going to be read, so a
    // body that is too large, unauthenticated or refused is never sent at all.
    this.server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => this.route(req, res, !this.admin));
    // No 'clientError' listener: Node's own answers malformed requests with 400, oversized
    // headers with 431 and slow ones with 408, then closes the connection.
    if (opts.adminPort) {
      this.adminGuard = new Guard({ host: this.adminHost, allowedOrigins: opts.allowedOrigins, tokens: opts.tokens, oidc: this.oidc });
      this.admin = new AdminListener(this.adminHost, opts.adminPort, this.adminRoutes, this.adminGuard);
    }
  }

  private get adminHost(): string {
    return this.opts.adminHost ?? DEFAULTS.adminHost;
  }

  /**
   * A reload: origins, tokens, OIDC, toolsets and session quotas apply to requests from now on.
   * Sessions already open stay (a request with a token no longer configured is refused, 401;
   * one whose JWT now names another client, 403), with the toolset they were opened with.
   */
  reconfigure(opts: Pick<HttpServerOptions, 'allowedOrigins' | 'tokens' | 'oidc' | 'toolsets' | 'maxSessions' | 'maxSessionsPerClient'>): void {
    // The same settings keep their verifier, and with it the keys already fetched.
    if (JSON.stringify(opts.oidc) !== JSON.stringify(this.oidc?.settings)) this.oidc = opts.oidc && new OidcVerifier(opts.oidc, this.opts.log.child({ component: 'oidc' }));
    this.guard.admit({ ...opts, oidc: this.oidc });
    this.adminGuard?.admit({ ...opts, oidc: this.oidc });
    this.registry.setQuotas(opts.maxSessions, opts.maxSessionsPerClient);
  }

  async listen(): Promise<Bound> {
    const port = await listenOn(this.server, this.opts.port, this.opts.host);
    let adminPort: number | undefined;
    try {
      adminPort = await this.admin?.listen();
    } catch (err) {
      await closeServer(this.server);
      throw err;
    }
    this.registry.start();
    return { host: this.opts.host, port, adminPort, adminHost: this.admin && this.adminHost };
  }

  /**
   * A clustered daemon's SIGTERM, before close(): /readyz answers 503 "draining" at once, so
   * the load balancer sends new work elsewhere; a new session is refused with a 503 it may
   * retry on another daemon; the sessions open here and the requests in flight are served as
   * usual (their hosts keep sending, the balancer keeps sending them here). Resolves after
   * `ms`, or sooner once no session is open, no request is in flight and `waiting()` (the
   * calls parked for a 2026-07-28 host's retry, which comes here forwarded) is 0.
   */
  drain(ms: number, waiting: () => number = () => 0): Promise<void> {
    if (this.stage !== 'serving') return Promise.resolve();
    this.stage = 'draining';
    this.registry.drain();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        clearInterval(poll);
        resolve();
      };
      const left = (): boolean => this.registry.size > 0 || this.inFlight > 0 || waiting() > 0;
      const timer = setTimeout(done, ms);
      const poll = setInterval(() => left() || done(), DRAIN_POLL_MS);
      if (!left()) done();
    });
  }

  /**
   * Shutdown: stop accepting connections, end every session (waiting requests get an error
   * response), then close what is left after a short grace.
   */
  async close(): Promise<void> {
    this.stage = 'closed';
    const closed = Promise.all([closeServer(this.server), this.admin?.close()]);
    this.ws.close();
    await Promise.all([this.registry.closeAll('server shutting down'), this.streamable.closeStateless()]);
    this.server.closeIdleConnections();
    const timer = setTimeout(() => this.server.closeAllConnections(), DRAIN_GRACE_MS);
    await closed;
    clearTimeout(timer);
  }

  // ---- routing -------------------------------------------------------------------------------

  private route(req: IncomingMessage, res: ServerResponse, withAdmin: boolean): void {
    const { path, query } = splitTarget(req.url ?? '/');
    const verdict = this.guard.check(req);
    if (!verdict.ok) return sendError(res, verdict.status, HttpRpcCode.Transport, verdict.message);

    if (withAdmin && this.adminRoutes.serve(path, req, res, (rq) => this.guard.authenticate(rq))) return;
    if (path !== '/mcp' && path !== '/sse' && path !== MESSAGES_PATH && path !== '/ws') {
      return sendError(res, 404, HttpRpcCode.Transport, `Not Found: ${path}`);
    }
    if (this.cors(req, res)) return;
    afterAuth(this.guard.authenticate(req), (auth) => this.mcp(req, res, path, query, auth), (err) => {
      this.opts.log.error({ err: (err as Error)?.message ?? String(err) }, 'HTTP handler failed');
      sendError(res, 500, HttpRpcCode.Transport, 'Internal error');
    });
  }

  /** An MCP route's request once its token is checked (at once for static tokens, later for a JWT). */
  private mcp(req: IncomingMessage, res: ServerResponse, path: string, query: string, auth: AuthResult): void {
    // A host that hung up while its JWT was checked: nothing to answer, and no 'close' to come
    // that would count it out of inFlight again.
    if (res.destroyed) return;
    // Checked here, not before the token: a shutdown may have begun while a JWT was checked.
    if (this.stage === 'closed') return sendError(res, 503, HttpRpcCode.Transport, 'Service Unavailable: shutting down', { connection: 'close' });
    if (!auth.ok) return sendError(res, auth.status, HttpRpcCode.Transport, auth.message, { 'www-authenticate': auth.challenge });
    this.inFlight++;
    res.once('close', () => this.inFlight--);
    // /messages belongs to a session /sse opened (with its toolset); it names none itself.
    if (path === MESSAGES_PATH) return this.run((rq, rs) => this.sse.post(rq, rs, auth, query), req, res);
    const who = this.guard.who(query, auth, path === '/mcp' && req.headers['mcp-session-id'] !== undefined);
    if (!who.ok) return sendError(res, who.status, HttpRpcCode.Transport, who.message);

    switch (path) {
      case '/mcp':
        return this.run((rq, rs) => this.streamable.handle(rq, rs, who), req, res);
      case '/sse':
        return this.sse.open(req, res, who);
      default: // '/ws' without an upgrade
        return sendError(res, 426, HttpRpcCode.Transport, 'Upgrade Required: /ws is a WebSocket endpoint', { upgrade: 'websocket' });
    }
  }

  private upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    const closed = this.stage === 'closed';
    if (pathOf(req) !== '/ws' || closed) {
      const status = closed ? '503 Service Unavailable' : '404 Not Found';
      socket.once('error', () => {});
      socket.end(`HTTP/1.1 ${status}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`);
      return;
    }
    this.ws.upgrade(req, socket, head);
  }

  private run(handler: RouteHandler, req: IncomingMessage, res: ServerResponse): void {
    runRoute(handler, req, res, this.opts.log);
  }

  /**
   * CORS for browser hosts on an allowed origin (the guard has already refused the others).
   * Answers preflights itself (returns true); otherwise only adds headers.
   */
  private cors(req: IncomingMessage, res: ServerResponse): boolean {
    const origin = req.headers.origin;
    if (origin !== undefined) {
      res.setHeader('access-control-allow-origin', origin);
      res.setHeader('vary', 'origin');
      res.setHeader('access-control-expose-headers', CORS_EXPOSE_HEADERS);
    }
    if (req.method !== 'OPTIONS') return false;
    res.writeHead(204, {
      allow: 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-methods': 'GET, POST, DELETE, OPTIONS',
      'access-control-allow-headers': CORS_ALLOW_HEADERS,
      'access-control-max-age': '600',
    });
    res.end();
    return true;
  }
}
