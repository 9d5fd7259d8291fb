// One connection to one upstream MCP server: the client side of the handshake, the capability
// record, our own id space (ids and progress tokens), and the lifecycle. It knows nothing about
// hosts or the router: what the upstream says unprompted goes to one listener.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import { actsForHost, ANONYMOUS_CLIENT, interactiveLogin, type RemoteServerConfig, type ServerConfig } from '../config/types.js';
import { Endpoint, type IncomingInfo, type Result } from '../jsonrpc/endpoint.js';
import { RpcError, type JsonRpcId, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import { publishUpstreamProtocolError, publishUpstreamState, type UpstreamStateName } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import { cancelProtocol, MuxError, withProgressToken, type Params } from '../protocol/mcp.js';
import { execaLoaded } from './child.js';
import { connectUpstream, type Connection, type LoginIdentity, type StopGrace } from './connect.js';
import { envelope, handshake, type ServerInfo } from './handshake.js';
import { fromModern, PARAM_HEADERS, paramHeaders, paramHeaderValues, ResourceListens } from './modern.js';
import { stripEnvelope } from '../protocol/modern.js';
import { backoffDelay } from '../backoff.js';
import type { InteractiveLogins } from './oauth/interactive.js';
import type { PrestartedChildren } from './prestart.js';
import { withTraceContext, type TraceContextOf } from './trace-context.js';

export type UpstreamState = 'starting' | 'ready' | 'failed' | 'closed';

export type { ServerInfo } from './handshake.js';

/**
 * Where an upstream's unprompted traffic goes (the router). `context` is what was passed with
 * the request of ours that the message belongs to, when the transport can tell (HTTP streams).
 */
export interface UpstreamListener {
  notification(up: Upstream, n: JsonRpcNotification, context: unknown): void;
  request(up: Upstream, req: JsonRpcRequest, signal: CancelSignal, context: unknown, info: IncomingInfo): Promise<Result>;
  stateChanged(up: Upstream): void;
  /** Requests from upstreams whose params the listener forwards untouched (Endpoint.opaqueRequests). */
  readonly opaqueRequests?: ReadonlySet<string>;
}

export interface UpstreamDeps {
  log: Logger;
  /** Removes the config's secrets from text that hosts will read (failure reasons). */
  scrub?: (text: string) => string;
  listener: UpstreamListener;
  maxMessageBytes: number;
  /**
   * timeouts.startupMs and timeouts.maxMs as they are now: read at each start and each request,
   * so a reload's new values reach connections already open.
   */
  timeouts: () => { readonly startupMs: number; readonly maxMs: number };
  clientCapabilities: Params;
  clientInfo: Params;
  /** A perClient server's connection: the host client whose login it carries (connect.ts). */
  who?: LoginIdentity;
  /**
   * `mcpmux stdio`: logins that open themselves (the browser) when this upstream needs one or
   * more scope; calls wait for them (oauth.interactiveWaitMs). Absent under `serve`.
   */
  logins?: InteractiveLogins;
  /** Tracing is on: the trace context each request carries upstream (trace-context.ts). Absent: off. */
  traceContext?: TraceContextOf;
  /** `mcpmux stdio`: children spawned before it loaded (prestart.ts); the first start adopts this server's. */
  prestarted?: PrestartedChildren;
}

/** What a call held for a login that opened itself came to: the upstream is ready, the wait ran out (the browser is still open), or there is nothing to wait for. */
export type LoginWait = 'ready' | 'open' | 'none';

/** Said after the needs-login error when the wait for a login that opened itself ran out. */
export const BROWSER_OPEN = 'a browser window is open to log in; finish there, then call again';

export interface CallOptions {
  signal?: CancelSignal;
  /** Present when the host asked for progress: relays the upstream's progress params. */
  onProgress?: (params: Params) => void;
  /** Handed back to the listener with messages related to this request. */
  context?: unknown;
  /** The result is passed on untouched: its long strings may stay raw (PendingOptions.opaque). */
  opaque?: boolean;
  /** The result is passed on unread: it may come back as its text (a RawResult, jsonrpc/raw-result.ts). */
  raw?: boolean;
  /**
   * The capabilities of the host this request serves: what a 2026-07-28 server may put in an
   * `input_required` for it (sampling, elicitation, roots). Absent: mcpmux's own request.
   */
  hostCapabilities?: Params;
  /** Called with the upstream's own result as it is read, before the promise settles (PendingOptions.onResult). */
  onResult?: (result: Params) => void;
}

/**
 * Of a host's capabilities, what a server may ask it through mcpmux, and the extensions it
 * supports (MCP Apps and any other, passed as they are: mcpmux relays what they add).
 */
function askable(host: Params): Params {
  const out: Params = {};
  for (const k of ['roots', 'sampling', 'elicitation', 'extensions'] as const) if (host[k] !== undefined) out[k] = host[k];
  return out;
}

const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/** Tools remembered per connection for their x-mcp-header specs (and bad ones said): a bound on what a server can make us keep. */
const MAX_TOOLS_REMEMBERED = 10_000;

/** Server-initiated requests one upstream connection may have waiting at once; beyond, -31003. */
const MAX_SERVER_REQUESTS = 64;

/** Failures counted together: more than restart.maxRetries of them within this is a crash loop. */
const CRASH_WINDOW_MS = 60_000;

/** Restart delays grow from restart.backoffMs, doubling, up to this. */
const MAX_BACKOFF_MS = 30_000;

/**
 * A connection whose grant acts for the host, down for want (or refusal) of the host's identity,
 * starts again when a session of its client brings one it has not tried: at most this often.
 */
const SUBJECT_RETRY_MS = 5_000;

let connections = 0;

/**
 * Children are spawned one per turn of the event loop. A spawn blocks the thread until the new
 * child has exec'd, and with many upstreams starting at once (20 Node servers on 2 cores) the
 * children already booting take the CPU that exec waits for: spawned back to back, 20 of them
 * kept mcpmux from reading its host's initialize, and its startupWaitMs timer, for seconds
 * (measured: 8 s of one blocked turn under load). Between two spawns, the host is answered
 * and the timers fire.
 */
let spawning: Promise<void> = Promise.resolve();
function spawnTurn(): Promise<void> {
  const turn = spawning.then(() => new Promise<void>((resolve) => setImmediate(resolve)));
  spawning = turn;
  return turn;
}

export class Upstream {
  state: UpstreamState = 'starting';
  /** Why the upstream is failed or closed. */
  reason = '';
  info: ServerInfo | undefined;
  readonly log: Logger;
  /** Restarts scheduled so far (for status). */
  restarts = 0;
  /**
   * It failed too often, or cannot start at all as configured (command not found), and is left
   * alone until `restart()` (or a reload).
   */
  gaveUp = false;
  /**
   * Its child's last stderr lines when it last failed or was lost (bounded, secrets scrubbed):
   * usually the real reason. Empty once it is ready again.
   */
  stderr: string[] = [];
  /** The server wants an OAuth login mcpmux does not have: left alone until one is stored (`mcpmux login`). */
  needsLogin = false;
  /** When it failed or was lost, within the crash-loop window (oldest first). */
  private failures: number[] = [];
  /** Calls held for a login (loginLanded): told of every change of state. */
  private readonly waiters = new Set<() => void>();
  /** The login (that opened itself) this upstream restarts after, once it lands. */
  private watchedLogin: Promise<boolean> | undefined;
  /** A grant acting for the host: the host identity (JWT) its last start had (undefined: none). Never logged. */
  private startedWith: string | undefined;
  /** retryWithSubject: not again before this time, and the restart under way. */
  private subjectRetryAt = 0;
  private subjectRetry: Promise<void> | undefined;
  /** Names this connection in events (a `session` server has one connection per host session). */
  readonly connectionId = ++connections;
  private endpoint: Endpoint | undefined;
  /** A modern server's resource subscriptions (listen streams), for this connection. */
  private listens: ResourceListens | undefined;
  /** A modern HTTP server's tools whose arguments go in Mcp-Param-* headers too (x-mcp-header). */
  private readonly headerParams = new Map<string, { path: string[]; name: string }[]>();
  /** Tools left out for breaking the x-mcp-header rules, said once each. */
  private readonly badHeaderTools = new Set<string>();
  /**
   * The one connection that may be live. Whoever replaces or clears it stops it (`drop`): that
   * is how one upstream never has two children or sessions at once.
   */
  private connection: Connection | undefined;
  /**
   * Which start is current. Every start, admin restart and close takes the next number; a start
   * whose number is no longer current has been superseded: its handshake's outcome, its
   * connection's loss and its failure are ignored (the superseder stopped its connection), so
   * it can neither flip the state nor schedule another run.
   */
  private epoch = 0;
  /** Connections let go and still stopping: a new one is not opened before they are gone. */
  private stopping: Promise<unknown> = Promise.resolve();
  /** Connections let go whose stop is still under way (hurry() may shorten it). */
  private readonly stoppingConns = new Set<Connection>();
  private started: Promise<void> | undefined;
  private restartTimer: NodeJS.Timeout | undefined;
  private readonly saidProtocolErrors = new Set<string>();
  /**
   * Progress routes of task-augmented requests whose CreateTaskResult came back: the spec keeps
   * the token valid until the task is terminal, so the route outlives the request (token -> route).
   */
  private readonly taskProgress = new Map<JsonRpcId, { taskId: string; onProgress: (p: Params) => void; timer: NodeJS.Timeout }>();

  constructor(
    private cfg: ServerConfig,
    private readonly deps: UpstreamDeps,
  ) {
    this.log = deps.log.child({ server: cfg.name });
  }

  get config(): ServerConfig {
    return this.cfg;
  }

  /** The host client whose login this connection carries (a perClient server's); undefined: shared by all. */
  get client(): string | undefined {
    return this.deps.who?.client;
  }

  /**
   * A reload changed settings that do not touch the connection (allow/deny, prefix, timeouts,
   * restart policy): they apply from the next request on. The name and connection keys stay.
   */
  reconfigure(cfg: ServerConfig): void {
    if (cfg.name !== this.cfg.name) throw new Error(`Upstream ${this.cfg.name}: cannot take the config of ${cfg.name}`);
    this.cfg = cfg;
  }

  get name(): string {
    return this.config.name;
  }

  get capabilities(): Params {
    return this.info?.capabilities ?? {};
  }

  /** Connects and initializes; resolves when ready or failed (never rejects). */
  start(): Promise<void> {
    return (this.started ??= this.run(this.supersede()));
  }

  /** A new epoch: what the current start (or its pending retry) does from now on is ignored. */
  private supersede(): number {
    clearTimeout(this.restartTimer);
    this.restartTimer = undefined;
    return ++this.epoch;
  }

  /**
   * Stops the connection (if any) and forgets it; resolves once every connection let go so far
   * has stopped, with this one (for what it knew: needsLogin, expired).
   */
  private async drop(grace?: StopGrace): Promise<Connection | undefined> {
    const conn = this.connection;
    this.connection = undefined;
    if (conn) {
      const stopped = conn.stop(grace);
      this.stoppingConns.add(conn);
      void stopped.finally(() => this.stoppingConns.delete(conn));
      this.stopping = Promise.all([this.stopping, stopped]);
    }
    await this.stopping;
    return conn;
  }

  /** Start number `epoch`: connects and initializes unless superseded first. */
  private async run(epoch: number): Promise<void> {
    // Normally nothing is left (a retry follows a stopped connection); never two at once.
    await this.drop();
    if (epoch !== this.epoch) return;
    this.state = 'starting';
    this.publish('starting');
    this.startedWith = actsForHost(this.config) ? this.deps.who?.subject?.() : undefined;
    try {
      if (this.config.transport === 'stdio') {
        // execa loads for the first spawn that needs one; before the turn, so that the starts
        // waiting for it still spawn one per turn. A child spawned early for this server needs none.
        if (!this.deps.prestarted?.holds(this.config)) await execaLoaded();
        await spawnTurn();
        if (epoch !== this.epoch) return;
      }
      const conn = connectUpstream(this.config, this.deps.maxMessageBytes, this.log, this.deps.who, this.deps.prestarted);
      this.connection = conn;
      const ep = new Endpoint(conn.transport, this.handlers, {
        cancel: cancelProtocol,
        peer: `upstream "${this.name}"`,
        opaqueRequests: this.deps.listener.opaqueRequests,
        // Requests this upstream may have waiting on mcpmux at once (sampling, elicitation, roots).
        maxInFlight: MAX_SERVER_REQUESTS,
        onProtocolError: (what, detail) => this.protocolError(what, detail),
      });
      this.endpoint = ep;
      this.listens = undefined;
      ep.onclose = (reason) => void this.lost(epoch, reason);

      const info = await handshake(ep, {
        server: this.name,
        era: this.config.era,
        clientCapabilities: this.deps.clientCapabilities,
        clientInfo: this.deps.clientInfo,
        startupMs: this.deps.timeouts().startupMs,
      });
      // Superseded (restarted, closed), or died during the handshake.
      if (epoch !== this.epoch || this.state !== 'starting') return;
      this.info = info;
      this.state = 'ready';
      this.reason = '';
      this.stderr = [];
      this.log.info({ protocolVersion: this.info.protocolVersion, serverInfo: this.info.serverInfo }, 'upstream ready');
      this.publish('up');
      this.deps.listener.stateChanged(this);
      this.wake();
      if (this.info.era === 'modern') this.listen(ep);
    } catch (err) {
      await this.fail(epoch, `initialize failed: ${(err as Error).message}`);
    }
  }

  /**
   * After a failure or a loss: try again with backoff (jittered, growing with every failure in
   * the window), unless it failed more than restart.maxRetries times within CRASH_WINDOW_MS:
   * a crash loop (even one whose every start reaches initialize) is left alone until an admin
   * restarts it, instead of being hammered every half second forever.
   */
  private scheduleRestart(epoch: number, immediately: boolean, conn: Connection | undefined): void {
    const permanent = conn?.permanent;
    if (permanent) {
      // Command not found, not executable: the next start would fail the same way, so there is
      // none; the fix is in the config (or the system), then a restart or a reload.
      this.gaveUp = true;
      this.reason = this.deps.scrub?.(permanent) ?? permanent;
      this.log.error({ reason: this.reason }, 'upstream cannot start, not retried (fix it, then mcpmux restart NAME or reload the config)');
      this.publish('failed', { reason: this.reason });
      this.deps.listener.stateChanged(this);
      return;
    }
    if (conn?.needsLogin === true) {
      // Retrying cannot help: a person must log in. Said once per episode, with what to run.
      // A perClient server's connection needs its client's login (the anonymous client's is the server's one login).
      const who = this.deps.who?.client;
      const client = who === ANONYMOUS_CLIENT ? undefined : who;
      // A grant acting for the host has no login to run (mcpmux login refuses it): its token
      // comes from the host's OIDC sign-in, and a session of this client that has one restarts it.
      const run = client === undefined ? `mcpmux login ${this.name}` : `mcpmux login ${this.name} --client ${client}`;
      const todo = actsForHost(this.config)
        ? `the host must sign in with OIDC (listen.auth.oidc): ${this.name} exchanges the host's identity (grant ${(this.config as RemoteServerConfig).oauth?.grant}), which static-token and stdio sessions do not have`
        : undefined;
      const forWhom = client === undefined ? '' : ` for client ${client}`;
      if (!this.needsLogin) this.log.warn({ server: this.name, ...(client !== undefined && { client }) }, `server ${this.name} needs a login${forWhom}; ${todo ?? `run: ${run}`}`);
      this.needsLogin = true;
      this.reason = `needs a login${forWhom}: ${todo ?? `run ${run}`}`;
      this.publish('failed', { reason: this.reason });
      this.deps.listener.stateChanged(this);
      // mcpmux stdio: the browser opens now (at most once a minute), not at the first call.
      this.openLogin();
      return;
    }
    const { maxRetries, backoffMs } = this.config.restart;
    const now = Date.now();
    this.failures = this.failures.filter((t) => now - t < CRASH_WINDOW_MS);
    this.failures.push(now);
    if (this.failures.length > maxRetries) {
      this.gaveUp = true;
      if (maxRetries > 0) {
        this.log.error({ failures: this.failures.length, windowS: CRASH_WINDOW_MS / 1000 }, 'giving up on upstream: it keeps failing (mcpmux restart NAME, or a reload, tries again)');
      }
      this.publish('failed', { reason: `given up after ${this.failures.length} failure(s) within ${CRASH_WINDOW_MS / 1000} s` });
      this.deps.listener.stateChanged(this);
      return;
    }
    const delay = immediately ? 0 : backoffDelay(this.failures.length - 1, { baseMs: backoffMs, maxMs: MAX_BACKOFF_MS });
    this.restarts++;
    this.log.info({ delay, attempt: this.failures.length }, 'restarting upstream');
    this.publish('restarting', { attempt: this.failures.length, delayMs: delay });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = undefined;
      if (epoch === this.epoch && this.state !== 'closed') void this.run(this.supersede());
    }, delay);
    this.restartTimer.unref?.();
  }

  /** Requests of ours waiting for this upstream's answer now. */
  get inFlight(): number {
    return this.endpoint?.pendingCount ?? 0;
  }

  /** Its child's process id, for a stdio upstream that is running. */
  get pid(): number | undefined {
    // A failed connection's process was stopped: its pid may already be someone else's.
    return this.state === 'ready' || this.state === 'starting' ? this.connection?.pid : undefined;
  }

  /**
   * Starts it anew now (an admin's `mcpmux restart`, a stored login, a reload): forgets its
   * failures, ends the current connection, whatever state it is in (a start still in its
   * handshake too). Resolves when this start is ready or failed, or a later one superseded it.
   */
  async restart(): Promise<void> {
    if (this.state === 'closed') return;
    const epoch = this.supersede();
    this.failures = [];
    this.gaveUp = false;
    this.needsLogin = false;
    this.setState('starting', 'restarted by an admin');
    await this.drop();
    if (epoch !== this.epoch) return;
    this.restarts++;
    this.publish('restarting', { attempt: 0, delayMs: 0 });
    await this.run(epoch);
  }

  /**
   * Sends a request with a fresh id; the host's progress token, if any, becomes that id. In
   * mcpmux stdio, a request the server refuses for want of a login (401) or of scope (403
   * insufficient_scope) waits for the login that opens itself, then is sent again, once. Lists
   * do not wait: they merge many servers, and this one's items come with list_changed.
   */
  request(method: string, params: Params | undefined, opts: CallOptions = {}): Promise<Result> {
    // Only an HTTP server's call can wait for a login that opens itself: every other call goes straight on.
    if (this.deps.logins === undefined || this.config.transport !== 'http' || method.endsWith('/list')) return this.send(method, params, opts);
    return this.sendLoggedIn(method, params, opts);
  }

  private async sendLoggedIn(method: string, params: Params | undefined, opts: CallOptions): Promise<Result> {
    const conn = this.connection;
    try {
      return await this.send(method, params, opts);
    } catch (err) {
      const how = interactiveLogin(this.config);
      if (!how || !(err instanceof RpcError)) throw err;
      const scope = (err.data as { scopeNeeded?: unknown } | undefined)?.scopeNeeded;
      if (typeof scope === 'string') {
        // Step-up: a login asking for the wider scope (needScope remembered it), then this request again.
        const login = this.openLogin(scope);
        if (!login) throw err;
        const landed = await this.until(how.waitMs, opts.signal, login, true);
        if (landed === 'open') throw new RpcError(err.code, `${err.message}; ${BROWSER_OPEN}`, err.data);
        if (landed !== 'ready') throw err;
        return this.send(method, params, opts);
      }
      // Its connection ended on a 401 that no stored token answers: the login, then this request again.
      // (This upstream learns it needs a login once that connection has stopped: asked here, not of it.)
      if (conn?.needsLogin !== true) throw err;
      const login = this.openLogin();
      if (!login) throw err;
      const landed = await this.until(how.waitMs, opts.signal, login, false);
      if (landed === 'open') throw new RpcError(err.code, `${err.message}; ${BROWSER_OPEN}`);
      if (landed !== 'ready') throw err;
      return this.send(method, params, opts);
    }
  }

  /**
   * A per-client connection whose grant acts for the host (token_exchange, jwt_bearer with the
   * host's JWT) that needs a login (no host identity) or was given up on (its identity refused):
   * a session of its client now has an identity this connection has not started with (a new
   * JWT), so it starts again with it, at once (a session admitted, a call), at most once per
   * SUBJECT_RETRY_MS. Returns that restart (resolves once ready or failed; joined while under
   * way); undefined when none applies.
   */
  retryWithSubject(): Promise<void> | undefined {
    if (this.subjectRetry) return this.subjectRetry;
    if (this.state !== 'failed' || !(this.needsLogin || this.gaveUp) || !actsForHost(this.config)) return undefined;
    const subject = this.deps.who?.subject?.();
    if (subject === undefined || subject === this.startedWith || Date.now() < this.subjectRetryAt) return undefined;
    this.subjectRetryAt = Date.now() + SUBJECT_RETRY_MS;
    this.log.info({ ...(this.client !== undefined && { client: this.client }) }, "a session of this client brought the host's identity: starting again with it");
    const again = this.restart().finally(() => (this.subjectRetry = undefined));
    this.subjectRetry = again;
    return again;
  }

  /** It waits for a login that opens itself (mcpmux stdio): it will come, and hosts hear list_changed then. */
  get loginOpens(): boolean {
    return this.needsLogin && this.deps.logins !== undefined && interactiveLogin(this.config) !== undefined;
  }

  /**
   * A call to this upstream while it needs a login (mcpmux stdio): the browser opens (at most
   * once a minute) and the call waits up to oauth.interactiveWaitMs for the login to land and the
   * upstream to be ready again. `none`: there is no login to wait for (not interactive, or one
   * failed within the minute): the call fails as it always did.
   */
  async loginLanded(signal?: CancelSignal): Promise<LoginWait> {
    const how = this.deps.logins && interactiveLogin(this.config);
    if (!how) return 'none';
    if (this.state === 'ready') return 'ready';
    if (!this.needsLogin) return 'none';
    const login = this.openLogin();
    if (!login) return 'none';
    return this.until(how.waitMs, signal, login, false);
  }

  /**
   * Opens the login (or joins the one under way), and restarts this upstream once it lands if
   * it is waiting for one. Undefined: none may open now.
   */
  private openLogin(scope?: string): Promise<boolean> | undefined {
    if (!this.deps.logins || !interactiveLogin(this.config) || this.state === 'closed') return undefined;
    const login = this.deps.logins.login(this.config as RemoteServerConfig, scope);
    if (login && login !== this.watchedLogin) {
      this.watchedLogin = login;
      void login.then((ok) => {
        if (this.watchedLogin === login) this.watchedLogin = undefined;
        if (ok && this.needsLogin && this.state !== 'closed') void this.restart();
        this.wake();
      });
    }
    return login;
  }

  /**
   * Waits for `login` up to `ms`: `ready` once the upstream is ready (a step-up: once its login
   * landed, the connection being the same); `none` when the login failed or the upstream did
   * not start with it; `open` when the time ran out or the host cancelled (the login is still
   * under way, the browser open).
   */
  private until(ms: number, signal: CancelSignal | undefined, login: Promise<boolean>, stepUp: boolean): Promise<LoginWait> {
    return new Promise((resolve) => {
      let landed: boolean | undefined;
      let timer: NodeJS.Timeout | undefined;
      let unsubscribe: (() => void) | undefined;
      let done = false;
      const finish = (how: LoginWait): void => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        unsubscribe?.();
        this.waiters.delete(check);
        resolve(how);
      };
      const check = (): void => {
        if (this.state === 'closed' || landed === false) return finish('none');
        if (stepUp) return void (landed && finish('ready'));
        if (this.state === 'ready') return finish('ready');
        if (landed && this.state === 'failed') return finish('none');
      };
      timer = setTimeout(() => finish('open'), ms);
      timer.unref?.();
      // A host's cancellation ends the wait (already cancelled: at once).
      unsubscribe = signal?.onCancel(() => finish('open'));
      if (done) return;
      this.waiters.add(check);
      void login.then((ok) => {
        landed = ok;
        check();
      });
      check();
    });
  }

  /** Calls held for a login look again (a change of state, a login landed or failed). */
  private wake(): void {
    for (const w of [...this.waiters]) w();
  }

  private send(method: string, params: Params | undefined, opts: CallOptions): Promise<Result> {
    const ep = this.endpoint;
    if (this.state !== 'ready' || !ep) {
      return Promise.reject(new RpcError(MuxError.UpstreamUnavailable, `Upstream "${this.name}" is not available${this.reason ? `: ${this.reason}` : ''}`));
    }
    const modern = this.info?.era === 'modern';
    if (modern && (method === 'resources/subscribe' || method === 'resources/unsubscribe')) {
      // 2026-07-28 has no such methods: a subscription is a listen stream for the URI.
      const uri = typeof params?.uri === 'string' ? params.uri : '';
      this.listens ??= new ResourceListens(this.name, ep, () => envelope(this.deps.clientCapabilities, this.deps.clientInfo), this.deps.timeouts().startupMs);
      return method === 'resources/subscribe' ? this.listens.subscribe(uri) : Promise.resolve(this.listens.unsubscribe(uri));
    }
    const id = ep.allocateId();
    // The upstream sees our request id as the token: unique on this connection by construction.
    if (opts.onProgress && params) withProgressToken(params, id);
    // A 2026-07-28 server gets the envelope on every request (mcpmux's own: its version, the
    // capabilities it declared to this server, its identity).
    if (modern) {
      const caps = opts.hostCapabilities ? askable(opts.hostCapabilities) : this.deps.clientCapabilities;
      params = { ...params, _meta: { ...(params?._meta as Params | undefined), ...envelope(caps, this.deps.clientInfo) } };
    }
    // A legacy server never sees the 2026-07-28 envelope (a host may have put one there).
    else if (params?._meta) stripEnvelope(params);
    // Tracing: this request's span is the upstream's parent, in its _meta (and HTTP headers).
    const traced = this.deps.traceContext?.(opts.context, id);
    if (traced) params = withTraceContext(params, traced);
    const http = modern && this.config.transport === 'http';
    if (http && method === 'tools/call' && typeof params?.name === 'string') {
      const specs = this.headerParams.get(params.name);
      if (specs?.length) (params as Params & { [PARAM_HEADERS]?: Record<string, string> })[PARAM_HEADERS] = paramHeaderValues(specs, params.arguments);
    }
    // A task-augmented call with progress: the task's progress keeps coming under our id after
    // the CreateTaskResult, often in the same read, so its route is in place as the result is read.
    const onProgress = opts.onProgress;
    const taskProgress =
      onProgress && params?.task !== undefined
        ? (res: Params): void => {
            const task = res.task as Params | undefined;
            if (typeof task?.taskId === 'string') this.keepTaskProgress(id, task.taskId, typeof task.ttl === 'number' ? task.ttl : this.deps.timeouts().maxMs, onProgress);
          }
        : undefined;
    const outer = opts.onResult;
    const onResult =
      taskProgress && outer
        ? (res: Params): void => {
            taskProgress(res);
            outer(res);
          }
        : (taskProgress ?? outer);
    // Plain properties (no conditional spreads): this object is made for every request.
    const sent = ep.request(id, method, params, {
      signal: opts.signal,
      onProgress,
      context: opts.context,
      opaque: opts.opaque,
      // A 2026-07-28 server's result is reshaped here (fromModern): always read.
      raw: opts.raw === true && !modern,
      timeoutMs: this.config.timeoutMs,
      maxTotalMs: this.deps.timeouts().maxMs,
      onResult,
    });
    let pending = modern ? sent.then(fromModern) : sent;
    if (http && method === 'tools/list') pending = pending.then((r) => this.learnHeaderParams(r));
    return pending;
  }

  private keepTaskProgress(token: JsonRpcId, taskId: string, ttl: number, onProgress: (p: Params) => void): void {
    // Bounded by the task's ttl even if no terminal status ever arrives.
    const timer = setTimeout(() => this.taskProgress.delete(token), Math.min(ttl, this.deps.timeouts().maxMs));
    timer.unref?.();
    this.taskProgress.set(token, { taskId, onProgress, timer });
  }

  private endTaskProgress(taskId: string): void {
    for (const [token, route] of this.taskProgress) {
      if (route.taskId !== taskId) continue;
      clearTimeout(route.timer);
      this.taskProgress.delete(token);
    }
  }

  notify(method: string, params?: Params): void {
    // 2026-07-28 has no client notifications but cancellation (roots changes are gone).
    if (this.state === 'ready' && this.info?.era !== 'modern') this.endpoint?.notify(method, params);
  }

  /**
   * A modern HTTP server's tools list: which tools mirror arguments into headers (x-mcp-header),
   * remembered for their calls; a tool whose annotations break the rules is left out, as the
   * revision asks of clients (said once per tool).
   */
  private learnHeaderParams(result: Result): Result {
    const tools = result.tools;
    if (!Array.isArray(tools)) return result;
    result.tools = (tools as Params[]).filter((tool) => {
      if (typeof tool?.name !== 'string') return true;
      const specs = paramHeaders(tool);
      if (specs === undefined) {
        this.headerParams.delete(tool.name);
        if (!this.badHeaderTools.has(tool.name)) {
          this.log.warn({ tool: tool.name }, 'tool left out: its x-mcp-header annotations break the 2026-07-28 rules');
          // A server inventing ever-new bad tools is told about again rather than remembered without bound.
          if (this.badHeaderTools.size >= MAX_TOOLS_REMEMBERED) this.badHeaderTools.clear();
          this.badHeaderTools.add(tool.name);
        }
        return false;
      }
      if (specs.length > 0 && (this.headerParams.size < MAX_TOOLS_REMEMBERED || this.headerParams.has(tool.name))) this.headerParams.set(tool.name, specs);
      else this.headerParams.delete(tool.name);
      return true;
    });
    return result;
  }

  /**
   * A modern server says its lists changed only on a subscriptions/listen stream: one is kept
   * open for the kinds it can announce, for as long as this connection lasts (reopened if the
   * server ends it while the connection is fine).
   */
  private listen(ep: Endpoint): void {
    const caps = this.capabilities;
    const changes = (k: string) => (caps[k] as Params | undefined)?.listChanged === true;
    const notifications: Params = {};
    if (changes('tools')) notifications.toolsListChanged = true;
    if (changes('prompts')) notifications.promptsListChanged = true;
    if (changes('resources')) notifications.resourcesListChanged = true;
    if (Object.keys(notifications).length === 0) return;
    let attempt = 0;
    const open = (): void => {
      if (this.endpoint !== ep || this.state !== 'ready') return;
      const params = { notifications, _meta: envelope(this.deps.clientCapabilities, this.deps.clientInfo) };
      const again = (): void => void setTimeout(open, backoffDelay(attempt++, { baseMs: 1000, maxMs: MAX_BACKOFF_MS })).unref();
      // No timeout: the stream is meant to stay open.
      ep.request(ep.allocateId(), 'subscriptions/listen', params, { timeoutMs: 0 }).then(again, (err: unknown) => {
        if (this.endpoint !== ep || this.state !== 'ready') return;
        // A server that does not take the request will not take it next time either.
        if (err instanceof RpcError && (err.code === -32601 || err.code === -32602)) {
          return this.log.warn({ err: err.message }, 'the server refuses subscriptions/listen: its list changes will not be heard');
        }
        this.log.warn({ err: (err as Error).message }, 'the list-change stream (subscriptions/listen) ended; opening it again');
        again();
      });
    };
    open();
  }

  /** Stops under way get at most `grace` from now at each step (a shutdown a host waits on). */
  hurry(grace: StopGrace): void {
    for (const conn of this.stoppingConns) void conn.stop(grace);
  }

  /**
   * Ends it for good; requests in flight fail with `why` (which hosts read, so it names no
   * secret). `grace`: how long a child gets at each step of its stop (the default when omitted).
   */
  async close(why = 'closed by mcpmux', grace?: StopGrace): Promise<void> {
    this.supersede();
    if (this.state === 'closed') return;
    this.setState('closed', why);
    this.publish('closed');
    await this.drop(grace);
  }

  private readonly handlers = {
    request: (req: JsonRpcRequest, signal: CancelSignal, related: JsonRpcId | undefined, info: IncomingInfo): Promise<Result> | Result => {
      // ping is answered here: mcpmux is the upstream's direct peer.
      if (req.method === 'ping') return {};
      return this.deps.listener.request(this, req, signal, this.contextOf(related), info);
    },
    notification: (n: JsonRpcNotification, related: JsonRpcId | undefined): void => {
      if (n.method === 'notifications/progress') {
        const token = n.params?.progressToken;
        if (typeof token === 'number' || typeof token === 'string') {
          if (this.endpoint?.progress(token, n.params!)) return;
          const route = this.taskProgress.get(token);
          if (route) return route.onProgress(n.params!);
        }
        this.log.debug({ token }, 'progress for an unknown token dropped');
        return;
      }
      if (n.method === 'notifications/tasks/status' && TERMINAL.has(n.params?.status as string) && typeof n.params?.taskId === 'string') {
        this.endTaskProgress(n.params.taskId);
      }
      if (n.method === 'notifications/cancelled') return; // handled by the endpoint
      if (n.method === 'notifications/subscriptions/acknowledged' && this.listens?.acknowledged(n.params)) return;
      this.deps.listener.notification(this, n, this.contextOf(related));
    },
  };

  private contextOf(related: JsonRpcId | undefined): unknown {
    return related === undefined ? undefined : this.endpoint?.contextOf(related);
  }

  /** Start `epoch`'s connection ended on its own. A remote session that expired is re-initialized at once. */
  private async lost(epoch: number, how: string): Promise<void> {
    if (epoch !== this.epoch || this.state === 'closed' || this.state === 'failed') return;
    const wasReady = this.state === 'ready';
    this.log.warn({ how }, wasReady ? 'upstream connection lost' : 'upstream failed to start');
    this.setState('failed', how);
    this.publish(wasReady ? 'down' : 'failed', { reason: how });
    const conn = await this.drop();
    // Restarted or closed while its connection stopped: that one decides what comes next.
    if (epoch !== this.epoch) return;
    this.keepStderr(conn);
    this.scheduleRestart(epoch, wasReady && conn?.expired === true, conn);
  }

  /** Start `epoch` failed (its handshake); a superseded start's failure is nobody's business. */
  private async fail(epoch: number, reason: string): Promise<void> {
    if (epoch !== this.epoch || this.state === 'closed' || this.state === 'failed') return;
    this.log.error({ reason }, 'upstream failed');
    this.setState('failed', reason);
    this.publish('failed', { reason });
    const conn = await this.drop();
    if (epoch !== this.epoch) return;
    this.keepStderr(conn);
    this.scheduleRestart(epoch, false, conn);
  }

  /** What a failed child last said on stderr, scrubbed like every reason hosts and operators read. */
  private keepStderr(conn: Connection | undefined): void {
    const tail = conn?.stderrTail?.() ?? [];
    this.stderr = tail.map((line) => this.deps.scrub?.(line) ?? line);
  }

  private publish(state: UpstreamStateName, more?: { reason?: string; attempt?: number; delayMs?: number }): void {
    publishUpstreamState({ server: this.name, connection: this.connectionId, sharing: this.config.sharing, state, ...more });
  }

  /**
   * What this upstream got wrong (garbage on stdout, a response to an unknown id...): logged at
   * warn the first time for each kind, then at debug, and counted on the bus every time.
   */
  private protocolError(what: string, detail: unknown): void {
    publishUpstreamProtocolError({ server: this.name, kind: what });
    if (this.saidProtocolErrors.has(what)) return this.log.debug({ detail: String(detail).slice(0, 200) }, what);
    this.saidProtocolErrors.add(what);
    this.log.warn({ detail: String(detail).slice(0, 200), once: true }, `${what} (said once per kind; counted in mcpmux_upstream_protocol_errors_total)`);
  }

  private setState(state: UpstreamState, reason: string): void {
    // Hosts read the reason (-31001, failed in-flight calls, `check --probe`): no secrets in it.
    reason = this.deps.scrub?.(reason) ?? reason;
    this.state = state;
    for (const route of this.taskProgress.values()) clearTimeout(route.timer);
    this.taskProgress.clear();
    this.reason = reason;
    const ep = this.endpoint;
    // In-flight requests fail fast with a clear reason instead of waiting for their timeout.
    if (ep && !ep.isClosed) void ep.close(reason);
    this.deps.listener.stateChanged(this);
    this.wake();
  }
}

