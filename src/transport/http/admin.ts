// The operator routes: /healthz, /readyz and /metrics need no token (counts only, nothing of the
// config or of hosts), /status and /status/restart do when tokens are configured (they name the
// servers, their pids and errors, and change them), on whichever listener serves them. An
// unmapped OIDC host (client `oidc:<value>`: anyone the identity provider knows) is no client of
// the config: 403 on those, since /status names other people's clients. Every route gets the
// same Host and Origin checks. `OperatorRoutes` answers them; `AdminListener` is a listener of their own, bound to `listen.adminHost` (loopback unless said otherwise):
// `listen.adminPort` under `mcpmux serve`, and the only HTTP listener of `mcpmux stdio` (so a
// desktop setup can be scraped).

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ErrorCode } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import { afterAuth, type Authenticated, type Guard } from './guard.js';
import { HttpRpcCode, sendError, sendJson } from './respond.js';
import { httpOptions } from './timeouts.js';
import { pathOf } from './url.js';

export type RouteHandler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;

/** Who called an operator route: a token's client (undefined: no token needed or none configured). */
export interface Caller {
  client: string | undefined;
  /** May take operator actions (see Guard.authenticate). False on routes that need no token. */
  admin: boolean;
}

export type OperatorHandler = (req: IncomingMessage, res: ServerResponse, caller: Caller) => void | Promise<void>;

const NOBODY: Caller = { client: undefined, admin: false };

export class OperatorRoutes {
  private readonly routes = new Map<string, OperatorHandler>();
  /** Routes that show or change the daemon's state: they need a token (when tokens are configured). */
  private readonly guarded = new Set<string>();
  /** Operator actions (and the audit lines): never for a page of another origin (crossSite and unsigned below). */
  private readonly actions = new Set<string>();

  constructor(private readonly log: Logger) {}

  /** `action`: a route that acts (or reads the audit lines): refused to other origins' pages, whatever `allowedOrigins` says. */
  set(path: string, handler: OperatorHandler, opts: { needsToken?: boolean; action?: boolean } = {}): void {
    this.routes.set(path, handler);
    if (opts.needsToken) this.guarded.add(path);
    if (opts.action) this.actions.add(path);
  }

  has(path: string): boolean {
    return this.routes.has(path);
  }

  /**
   * Answers `path` if it is an operator route (true), else leaves the request alone. Routes
   * that need a token are checked with `authenticate` (the listener's guard) first, on every
   * listener: an admin port is no reason to trust whoever reaches it.
   */
  serve(path: string, req: IncomingMessage, res: ServerResponse, authenticate: (req: IncomingMessage) => Authenticated): boolean {
    const handler = this.routes.get(path);
    if (!handler) return false;
    // Their JSON carries upstream-controlled strings (errors, tool names): never sniffed as markup.
    res.setHeader('x-content-type-options', 'nosniff');
    if (!this.guarded.has(path)) {
      runRoute((rq, rs) => handler(rq, rs, NOBODY), req, res, this.log);
      return true;
    }
    const action = this.actions.has(path);
    if (action) {
      const refused = crossSite(req);
      if (refused) {
        sendError(res, 403, HttpRpcCode.Transport, refused);
        return true;
      }
    }
    afterAuth(
      authenticate(req),
      (auth) => {
        if (!auth.ok) return sendError(res, auth.status, HttpRpcCode.Transport, auth.message, { 'www-authenticate': auth.challenge });
        if (auth.person) return sendError(res, 403, HttpRpcCode.Transport, `Forbidden: ${path} is for the clients of the config (listen.auth.tokens, or listen.auth.oidc.clients), not for ${JSON.stringify(auth.client)}`);
        const caller: Caller = { client: auth.client, admin: auth.admin };
        const refused = action ? unsigned(req) : undefined;
        if (refused) return sendError(res, 403, HttpRpcCode.Transport, refused);
        runRoute((rq, rs) => handler(rq, rs, caller), req, res, this.log);
      },
      (err) => {
        this.log.error({ err: (err as Error)?.message ?? String(err) }, 'HTTP handler failed');
        sendError(res, 500, ErrorCode.InternalError, 'Internal error');
      },
    );
    return true;
  }
}

/** The header an operator action must carry when it carries no token (`mcpmux restart` and the console send it). */
export const OPERATOR_HEADER = 'x-mcpmux-operator';

/**
 * Why an operator action may come from another page in the user's browser (a 403's message),
 * or undefined. Without tokens every caller is an operator, and `allowedOrigins` lets pages of
 * other loopback ports (or, with "*", any site) through the Origin check: those origins are for
 * MCP browser hosts on /mcp, never for acting on the daemon. So, before the token is looked at,
 * a browser's own word that the request is same-origin: `Sec-Fetch-Site` same-origin or none
 * (typed or bookmarked) when sent; else an Origin, when sent, whose host:port is the request's
 * Host. Clients that are no browser (the CLI, curl) send neither. `unsigned` (below) is the
 * second half.
 */
function crossSite(req: IncomingMessage): string | undefined {
  const site = req.headers['sec-fetch-site'];
  if (site !== undefined && site !== 'same-origin' && site !== 'none') return `Forbidden: an operator action from a page of another origin (Sec-Fetch-Site: ${site}); open the console on this address`;
  const origin = req.headers.origin;
  if (site === undefined && origin !== undefined && !sameHost(origin, req.headers.host)) {
    return `Forbidden: an operator action from a page of another origin (Origin ${JSON.stringify(origin)}); open the console on this address`;
  }
  return undefined;
}

/**
 * An action (not GET or HEAD) without a header that no page of another origin can send without
 * a CORS preflight (which these routes never answer): the bearer token, or `x-mcpmux-operator`.
 * A <form> or a `no-cors` fetch sends neither, whatever browser it runs in. With tokens
 * configured, every authenticated request has the first; without, the CLI and the console send
 * the second.
 */
function unsigned(req: IncomingMessage): string | undefined {
  if (req.method === 'GET' || req.method === 'HEAD') return undefined;
  if (req.headers.authorization !== undefined || req.headers[OPERATOR_HEADER] !== undefined) return undefined;
  return `Forbidden: an operator action needs the header "${OPERATOR_HEADER}: 1" (or a bearer token), which no page of another origin can send`;
}

/** Whether an Origin names the host:port the request was sent to (its Host header). */
function sameHost(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host === new URL(`${url.protocol}//${host}`).host;
  } catch {
    return false; // the opaque origin "null" among others
  }
}

export interface Readiness {
  ready: boolean;
  /** `starting`, `ready` or `draining`. */
  status: string;
  sessions: number;
  detail?: unknown;
}

/** /healthz (200 while the process runs) and /readyz (200 when ready, else 503). */
export function addHealthRoutes(routes: OperatorRoutes, readiness: () => Readiness): void {
  routes.set('/healthz', (_req, res) => sendJson(res, 200, { status: 'ok' }));
  routes.set('/readyz', (_req, res) => {
    const r = readiness();
    sendJson(res, r.ready ? 200 : 503, { status: r.status, sessions: r.sessions, ...(r.detail !== undefined && { detail: r.detail }) });
  });
}

/** Runs a route handler; a throw or rejection becomes a 500 (and a log line), never a crash. */
export function runRoute(handler: RouteHandler, req: IncomingMessage, res: ServerResponse, log: Logger): void {
  const failed = (err: unknown): void => {
    log.error({ err: (err as Error)?.message ?? String(err) }, 'HTTP handler failed');
    sendError(res, 500, ErrorCode.InternalError, 'Internal error'); // ends a response already under way
  };
  try {
    const p = handler(req, res);
    if (p) p.catch(failed);
  } catch (err) {
    failed(err);
  }
}

export class AdminListener {
  private readonly server: Server;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly routes: OperatorRoutes,
    private readonly guard: Guard,
  ) {
    // Node's own 'clientError' handling answers 400/408/431 and closes (see timeouts.ts).
    this.server = createServer(httpOptions(), (req, res) => this.route(req, res));
  }

  listen(): Promise<number> {
    return listenOn(this.server, this.port, this.host);
  }

  async close(): Promise<void> {
    const closed = closeServer(this.server);
    this.server.closeAllConnections();
    await closed;
  }

  private route(req: IncomingMessage, res: ServerResponse): void {
    const verdict = this.guard.check(req);
    if (!verdict.ok) return sendError(res, verdict.status, HttpRpcCode.Transport, verdict.message);
    if (!this.routes.serve(pathOf(req), req, res, (rq) => this.guard.authenticate(rq))) sendError(res, 404, HttpRpcCode.Transport, 'Not Found');
  }
}

export function listenOn(server: Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const onError = (err: Error): void => reject(err);
    server.once('error', onError);
    server.listen(port, host, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}

export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve();
    server.close(() => resolve());
  });
}
