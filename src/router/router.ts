// The router: from a host session's request to the one upstream that owns it and back.
//
// It owns the merged view (capabilities, instructions, lists), name resolution, resource
// subscriptions and log levels across sessions, and reloads. Host sessions reach it through
// `handle` (each method's work is in dispatch.ts); it reaches them only through the small
// `SessionPort` interface they register with `attach`.
// Every request to an upstream goes through `forward` (forward.ts); what upstreams say
// unprompted is the Reverse side's (reverse.ts).

import { NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import type { ReloadPlan } from '../config/diff.js';
import type { Config } from '../config/types.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { JsonRpcRequest } from '../jsonrpc/message.js';
import type { RequestEvent } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import type { Params } from '../protocol/mcp.js';
import type { StopGrace } from '../upstream/connect.js';
import type { Upstream } from '../upstream/upstream.js';
import type { InteractiveLogins } from '../upstream/oauth/interactive.js';
import type { PrestartedChildren } from '../upstream/prestart.js';
import type { TraceContextOf } from '../upstream/trace-context.js';
import { Audience } from './audience.js';
import { Dispatch } from './dispatch.js';
import { ForwardChain, OPEN_GOVERNANCE, ownCall, type Forward, type Governance } from './forward.js';
import { Lists } from './lists.js';
import { LogLevels } from './log-levels.js';
import { mergeCapabilities, mergeInstructions } from './merge.js';
import { MAX_NAMES_PER_SERVER, NameIndex } from './naming.js';
import { MAX_OWNED_PER_SESSION, MAX_OWNED_TOTAL, Owners, Usage } from './owners.js';
import { UpstreamPool } from './pool.js';
import { loginKey } from '../upstream/oauth/store.js';
import { Resolver } from './resolve.js';
import { Reverse } from './reverse.js';
import type { SessionPort } from './session-port.js';
import { Subscriptions } from './subscriptions.js';
import { Surfaces, type SessionSurface } from './surface.js';
import type { WalkFailure } from './walks.js';

export type { Call, Forward, Governance, Interceptor } from './forward.js';
export type { SessionPort } from './session-port.js';
export { PASS_THROUGH } from './forward.js';

/** What `/status` says of the router's side (see Router.status). */
export interface RouterStatus {
  upstreams: Record<string, unknown>[];
  /** `statelessOpen`: 2026-07-28 HTTP requests being answered now (listen streams included). */
  sessions: { total: number; byTransport: Record<string, number>; byClient: Record<string, number>; statelessOpen: number };
  /** The configured mode, and the sessions by the surface decided for them (surface.ts). */
  surface: { mode: string; sessions: SurfaceGroup[] };
}

/** One open session as the web console lists it. */
export interface SessionRow {
  id: string;
  client: string;
  transport: string;
  /** `legacy` or `modern` (2026-07-28); null before its first request. */
  era: string | null;
  protocolVersion: string;
  toolset: string | null;
  surface: 'all' | 'search' | 'undecided';
}

/** Sessions that got the same surface for the same reason (the client, toolset and view size alike). */
export interface SurfaceGroup {
  client: string;
  toolset: string | null;
  /** `undecided`: it has not listed its tools yet. */
  mode: 'all' | 'search' | 'undecided';
  reason: string | null;
  /** The tools it may see and their definitions' estimated tokens (null: not weighed, e.g. mode "all"). */
  tools: number | null;
  tokens: number | null;
  sessions: number;
}

export class Router {
  private readonly pool: UpstreamPool;
  private readonly audience: Audience;
  private readonly lists: Lists;
  private readonly resolve: Resolver;
  private readonly subscriptions = new Subscriptions();
  /** Task and elicitation owners; an id forgotten for room is said at debug, and once at warn per kind. */
  private readonly owners = new Owners((kind, id, session) => {
    const first = !this.saidForgotten.has(kind);
    this.saidForgotten.add(kind);
    this.log[first ? 'warn' : 'debug'](
      { kind, id, session: session.id, perSession: MAX_OWNED_PER_SESSION, total: MAX_OWNED_TOTAL, ...(first && { once: true }) },
      `too many ${kind}s owned at once; the oldest is forgotten (its host can no longer reach it)`,
    );
  });
  private readonly usage = new Usage();
  private readonly logLevels: LogLevels;
  private readonly chain: ForwardChain;
  private governance: Governance = OPEN_GOVERNANCE;
  private startup: Promise<void> = Promise.resolve();
  private startupWait: Promise<void> = Promise.resolve();
  /** Every request to an upstream goes through here: interceptors, then the upstream. */
  readonly forward: Forward;

  private readonly names: NameIndex;
  private readonly dispatch: Dispatch;
  private readonly surfaces: Surfaces;
  /** What was said forgotten past a cap (once each): `<kind>\0<server>` for names, `task`/`elicitation`. */
  private readonly saidForgotten = new Set<string>();
  /** A server's place in the config (contested names go to the earlier one). */
  private rank = new Map<string, number>();

  constructor(
    private config: Config,
    private readonly log: Logger,
    governance: Governance = OPEN_GOVERNANCE,
  ) {
    this.rank = new Map(config.servers.map((s, i) => [s.name, i]));
    const names = new NameIndex({
      separator: config.namespace.separator,
      maxLength: config.namespace.maxNameLength,
      rank: (server) => this.rank.get(server) ?? Number.MAX_SAFE_INTEGER,
      onRename: (kind, owner, from, to) =>
        this.log.warn({ kind, server: owner.server, name: owner.name, from, to }, 'public name taken by a server earlier in the config; renamed'),
      // A name hosts have seen changed hands: rebuild every page, and tell them.
      onMoved: (kind) => {
        this.lists.catalogue.reset();
        this.audience.listChanged(kind);
      },
      // A server listing ever-new names: the one it listed least recently is forgotten. Cached
      // pages go too, so a host that still calls it makes a walk that publishes it again.
      onForgotten: (kind, server) => {
        this.lists.catalogue.reset();
        const key = `${kind}\0${server}`;
        if (this.saidForgotten.has(key)) return;
        this.saidForgotten.add(key);
        this.log.warn({ kind, server, max: MAX_NAMES_PER_SERVER, once: true }, 'server has listed more names than mcpmux remembers per server; the least recently listed are forgotten (said once)');
      },
    });
    this.names = names;
    this.chain = new ForwardChain(this.usage);
    this.forward = this.chain.forward;
    this.pool = new UpstreamPool(config, log);
    this.audience = new Audience((up) => this.pool.ownerOf(up), (up) => this.pool.clientOf(up));
    this.pool.retired = (up) => this.forgetConnection(up);
    this.lists = new Lists(names, () => this.governance, (up, method, params, signal) => this.forward(ownCall(up, method, params, signal)));
    this.resolve = new Resolver(() => this.config, this.pool, names, this.lists, () => this.governance);
    this.logLevels = new LogLevels(this.pool, this.audience.sessions, this.forward);
    this.pool.listener = new Reverse({
      pool: this.pool,
      audience: this.audience,
      lists: this.lists,
      subscriptions: this.subscriptions,
      owners: this.owners,
      usage: this.usage,
      logLevels: this.logLevels,
      forward: this.forward,
    });
    this.surfaces = new Surfaces({ config: () => this.config, lists: this.lists, live: (s) => this.resolve.live(s), governance: () => this.governance, log });
    this.dispatch = new Dispatch({
      pool: this.pool,
      lists: this.lists,
      resolve: this.resolve,
      subscriptions: this.subscriptions,
      owners: this.owners,
      logLevels: this.logLevels,
      forward: this.forward,
      surface: this.surfaces,
    });
    this.govern(governance);
  }

  /**
   * Puts governance in place, or replaces it (a reload): calls already under way finish under
   * the old rules, lists are rebuilt under the new ones.
   */
  private govern(governance: Governance): void {
    this.governance = governance;
    this.chain.use(governance.interceptors);
    this.lists.catalogue.reset();
  }

  /**
   * A reload (cli/reload.ts planned it): new governance for new calls, removed and restarted
   * servers stopped (their in-flight calls fail naming the server), added ones started, updated
   * ones reconfigured in place; every other connection is untouched. Hosts hear list_changed
   * for the lists that changed: servers that come or go announce themselves through their
   * state, the rest is said here. Resolves when new connections are ready or failed.
   */
  async reload(next: Config, governance: Governance, plan: ReloadPlan): Promise<void> {
    const orderChanged = plan.policyLists.length > 0 && !sameOrder(this.config, next);
    this.config = next;
    this.rank = new Map(next.servers.map((s, i) => [s.name, i]));
    if (orderChanged) this.names.forget();
    for (const { server } of plan.updated) if (server.prefix !== this.pool.get(undefined, server.name)?.config.prefix) this.names.forget(server.name);
    const gone = new Set([...plan.removed, ...plan.restarted.map((s) => s.name)]);
    for (const name of gone) {
      this.names.forget(name);
      this.lists.forget(name);
    }
    for (const up of this.pool.all()) if (gone.has(up.name)) this.forgetConnection(up);
    this.govern(governance);
    const greeted = [...this.audience.askable()];
    const applied = this.pool.apply(next, plan, greeted);
    const said = new Set(plan.policyLists);
    for (const { lists } of plan.updated) for (const kind of lists) said.add(kind);
    for (const kind of said) this.audience.listChanged(kind);
    await applied;
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /**
   * Starts every shared upstream. `ready()` waits for all of them (bounded by
   * timeouts.startupMs: readiness, commands); a host's initialize only for startupWaitMs.
   * `waitedMs`: how long a host has already been waiting when the router starts, taken off
   * its wait. `mcpmux stdio` passes its own age: its host spawned it and wrote `initialize` at
   * once, so the host's wait began before mcpmux had loaded (docs/decisions.md). `serve` passes
   * nothing: no host is waiting yet.
   */
  start(waitedMs = 0): void {
    const starting = this.pool.startShared();
    this.startup = boundedAll(starting, this.config.timeouts.startupMs);
    this.startupWait = boundedAll(starting, Math.max(0, this.config.timeouts.startupWaitMs - waitedMs));
  }

  ready(): Promise<void> {
    return this.startup;
  }

  async close(): Promise<void> {
    this.audience.close();
    await this.pool.closeAll();
  }

  /**
   * How long each child gets at each step of its stop when a session's connections close and
   * at the shutdown (stops already under way are shortened to it): `mcpmux stdio` stops within
   * its host's grace. A reload's or a restart's stop keeps the default (2 s at each step).
   */
  stopChildrenWithin(grace: StopGrace): void {
    this.pool.grace = grace;
  }

  /** Shared upstream connections in config order (for `check` and `tools`). */
  list(): Upstream[] {
    return this.pool.sharedList();
  }

  /** Every upstream connection and every host session, as `/status` shows them. */
  status(): RouterStatus {
    const upstreams: Record<string, unknown>[] = this.pool.all().map((up) => ({
      name: up.name,
      transport: up.config.transport,
      sharing: up.config.sharing,
      ...(this.pool.ownerOf(up) && { session: this.pool.ownerOf(up)!.id }),
      // A perClient server's connection: whose login it carries (never the token itself).
      ...(up.client !== undefined && { client: up.client }),
      // Given up after a crash loop: failed, and left alone until a restart or a reload.
      state: up.needsLogin ? 'needs-login' : up.state,
      ...(up.gaveUp && { gaveUp: true }),
      ...(up.reason && { lastError: up.reason }),
      // What a failed child last said itself (the real reason, often), until it is ready again.
      ...(up.stderr.length > 0 && up.state !== 'ready' && { stderr: up.stderr }),
      ...(up.pid !== undefined && { pid: up.pid }),
      restarts: up.restarts,
      inFlight: up.inFlight,
      ...this.lists.counts(up),
    }));
    // Servers the config could not start for want of a variable: named, with the reason. Their
    // counts are unknown (null), not 0: nothing was ever listed from them.
    for (const s of this.config.servers) {
      if (s.unavailable) upstreams.push({ name: s.name, transport: s.transport, sharing: s.sharing, state: 'unavailable', unavailable: s.unavailable, restarts: 0, inFlight: 0, tools: null, prompts: null, resources: null });
    }
    const byTransport: Record<string, number> = {};
    const byClient: Record<string, number> = {};
    let total = 0;
    let stateless = 0;
    for (const s of this.audience.sessions) {
      // A 2026-07-28 request over HTTP is no session: counted apart, while it is open.
      if (s.stateless) {
        stateless++;
        continue;
      }
      total++;
      byTransport[s.transport] = (byTransport[s.transport] ?? 0) + 1;
      byClient[s.client] = (byClient[s.client] ?? 0) + 1;
    }
    return { upstreams, sessions: { total, byTransport, byClient, statelessOpen: stateless }, surface: { mode: this.config.surface.mode, sessions: this.surfaceGroups() } };
  }

  /**
   * Open sessions one by one (the web console), oldest first: at most `max`, and how many more.
   * A session id is shown by its first 8 characters: enough to tell sessions apart and find
   * them in the audit log, not a Streamable HTTP session id to paste.
   */
  sessionList(max = 200, client?: string): { list: SessionRow[]; more: number } {
    const list: SessionRow[] = [];
    let more = 0;
    for (const s of this.audience.sessions) {
      if (s.stateless || (client !== undefined && s.client !== client)) continue;
      if (list.length >= max) {
        more++;
        continue;
      }
      list.push({ id: s.id.slice(0, 8), client: s.client, transport: s.transport, era: s.era ?? null, protocolVersion: s.protocolVersion, toolset: s.toolset ?? null, surface: this.surfaces.of(s)?.mode ?? 'undecided' });
    }
    return { list, more };
  }

  /** Open sessions grouped by the surface they got (for /status and mcpmux_surface_* metrics). */
  surfaceGroups(): SurfaceGroup[] {
    const groups = new Map<string, SurfaceGroup>();
    for (const s of this.audience.sessions) {
      if (s.stateless) continue;
      const d: SessionSurface | undefined = this.surfaces.of(s);
      const g: SurfaceGroup = { client: s.client, toolset: s.toolset ?? null, mode: d?.mode ?? 'undecided', reason: d?.reason ?? null, tools: d?.tools ?? null, tokens: d?.tokens ?? null, sessions: 0 };
      const key = JSON.stringify([g.client, g.toolset, g.mode, g.reason, g.tools, g.tokens]);
      const found = groups.get(key);
      if (found) found.sessions++;
      else groups.set(key, { ...g, sessions: 1 });
    }
    return [...groups.values()];
  }

  /** The surface decided for a session (`all`, `search`), for traces; a walk of the sessions, asked only with tracing on. */
  surfaceModeOf(sessionId: string): string | undefined {
    for (const s of this.audience.sessions) if (s.id === sessionId) return this.surfaces.of(s)?.mode;
    return undefined;
  }

  /** What tool pinning holds changed without the upstreams saying so (an approval): rebuild and tell hosts. */
  refreshTools(): void {
    this.lists.catalogue.reset();
    this.audience.listChanged('tools');
  }

  /**
   * Tracing is on (observe/tracing.ts): every upstream request carries the trace context this
   * gives for it. Handed down to the connections; set before start().
   */
  traceWith(traceContext: TraceContextOf): void {
    this.pool.traceContext = traceContext;
  }

  /**
   * `mcpmux stdio` (a person at the screen): upstreams that need a login open it in the browser
   * themselves, and calls wait for it. Set before start(); `serve` never calls this.
   */
  openLoginsWith(logins: InteractiveLogins): void {
    this.pool.logins = logins;
  }

  /**
   * `mcpmux stdio`: children it spawned before it loaded (upstream/prestart.ts), each adopted by
   * its server's first start instead of a new spawn. Set before start().
   */
  adoptChildren(prestarted: PrestartedChildren): void {
    this.pool.prestarted = prestarted;
  }

  /**
   * A login was stored (`mcpmux login`; `key`: its login key, store.ts): the connections waiting
   * for that login start again: the server's, or for a perClient server's login for one
   * client, that client's only.
   */
  loginChanged(key: string): void {
    for (const up of this.pool.all()) if (up.needsLogin && loginKey(up.name, up.client) === key) void up.restart();
  }

  /**
   * Restarts a shared upstream now (an admin's `mcpmux restart`), or every client's connection
   * to a perClient one; false if there is none of that name.
   */
  restart(name: string): boolean {
    const ups = this.pool.all().filter((u) => u.name === name && !this.pool.ownerOf(u));
    for (const up of ups) void up.restart();
    return ups.length > 0;
  }

  attach(session: SessionPort): void {
    this.audience.attach(session);
  }

  detach(session: SessionPort): void {
    this.audience.detach(session);
    for (const { up, uri } of this.subscriptions.dropSession(session)) {
      if (up.state === 'ready') this.forward(ownCall(up, 'resources/unsubscribe', { uri })).catch(() => {});
    }
    this.usage.forgetSession(session);
    this.owners.forgetSession(session);
    for (const up of this.pool.forSession(session)) if (this.pool.ownerOf(up) === session) this.forgetConnection(up);
    void this.pool.closeFor(session);
    void this.logLevels.sync();
  }

  /** A connection that is going away: its subscriptions and usage are no one's any more. */
  private forgetConnection(up: Upstream): void {
    this.subscriptions.forget(up);
    this.usage.forgetUpstream(up);
  }

  /**
   * What a host is told at initialize: capabilities and instructions once shared upstreams have
   * started and this session's own ones (`sharing: "session"`) too. Changes that happened
   * before this moment are not announced to it again with list_changed.
   */
  async greet(session: SessionPort): Promise<{ capabilities: Params; instructions: string | undefined }> {
    await this.admit(session);
    return this.offer(session);
  }

  /** Starts the session's own upstreams and waits (bounded) for them; the host may then be told of changes. */
  async admit(session: SessionPort): Promise<void> {
    const own = this.pool.startFor(session);
    await Promise.all([this.startupWait, boundedAll(own, this.config.timeouts.startupWaitMs)]);
    this.audience.greet(session);
  }

  /** What the session's live upstreams offer together, as a handshake (or server/discover) says it. */
  offer(session: SessionPort): { capabilities: Params; instructions: string | undefined } {
    const live = this.resolve.live(session);
    // Upstreams still starting, or waiting for a login that opened itself (stdio), will come with
    // list_changed; the host must know the lists exist.
    const late = this.pool.forSession(session).some((up) => up.state === 'starting' || up.loginOpens);
    return { capabilities: mergeCapabilities(live, session.protocolVersion, late), instructions: mergeInstructions(live, this.config.servers) };
  }

  /** The host's roots changed: every upstream it uses may want to ask again. */
  rootsChanged(session: SessionPort): void {
    for (const up of this.resolve.live(session)) up.notify('notifications/roots/list_changed');
  }

  /**
   * Every tool as `client` would see it, all pages walked (for `mcpmux tools`), and the servers
   * whose lists could not be read to the end (bounded walks, upstream/paging.ts).
   */
  async allTools(client: string): Promise<{ tools: Params[]; servers: { server: string; tools: Params[] }[]; failed: WalkFailure[] }> {
    const { servers, failed } = await this.lists.all('tools', this.resolve.live(undefined), NEVER);
    const allowed = (t: Params) => this.governance.clientAllows(client, 'tools', t.name as string);
    const shown = servers.map((s) => ({ server: s.server, tools: s.items.filter(allowed) }));
    return { tools: shown.flatMap((s) => s.tools), servers: shown, failed };
  }

  // ---- host requests ------------------------------------------------------------------

  /**
   * Answers one host request that is not session business (initialize, ping). `event`, when
   * someone observes, learns which server and item the request went to.
   */
  handle(session: SessionPort, req: JsonRpcRequest, signal: CancelSignal, event?: RequestEvent): Promise<Result> {
    return this.dispatch.handle(session, req, signal, event);
  }
}

function sameOrder(a: Config, b: Config): boolean {
  const names = (c: Config) => c.servers.map((s) => s.name).join('\0');
  return names(a) === names(b);
}

/** Waits for all, but no longer than `ms`. */
function boundedAll(ps: Promise<void>[], ms: number): Promise<void> {
  if (ps.length === 0) return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref?.();
    void Promise.all(ps).then(() => {
      clearTimeout(t);
      resolve();
    });
  });
}
