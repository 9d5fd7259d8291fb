// The router: from a host session's request to the one upstream that owns it and back.
//
// It owns the merged view (capabilities, instructions, lists), name resolution, resource
// subscriptions and log levels across sessions. Host sessions reach it through `handle`; it
// reaches them only through the small `SessionPort` interface they register with `attach`.
// Every request to an upstream goes through `forward` (forward.ts); what upstreams say
// unprompted is the Reverse side's (reverse.ts).

import type { CancelSignal } from '../jsonrpc/cancel.js';
import type { ReloadPlan } from '../config/diff.js';
import type { Config } from '../config/types.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { RequestEvent } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import { McpError, progressTokenOf, type Params } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import { Audience } from './audience.js';
import { adaptForHost } from './downgrade.js';
import { ForwardChain, OPEN_GOVERNANCE, ownCall, PASS_THROUGH, type Call, type Forward, type Governance, type Target } from './forward.js';
import { unwrapId, unwrapRelatedTask, wrapId, wrapRelatedTask, wrapTaskResult } from './ids.js';
import { Lists } from './lists.js';
import { LogLevels } from './log-levels.js';
import { mergeCapabilities, mergeInstructions } from './merge.js';
import { NameIndex, type NamedKind } from './naming.js';
import { Owners, Usage } from './owners.js';
import { UpstreamPool } from './pool.js';
import { Resolver, type Resolved } from './resolve.js';
import { Reverse } from './reverse.js';
import { rewritePromptResult, rewriteReadResult, rewriteToolResult } from './rewrite.js';
import type { SessionPort } from './session-port.js';
import { Subscriptions } from './subscriptions.js';

export type { Call, Forward, Governance, Interceptor } from './forward.js';
export type { SessionPort } from './session-port.js';
export { PASS_THROUGH } from './forward.js';

/** What `/status` says of the router's side (see Router.status). */
export interface RouterStatus {
  upstreams: Record<string, unknown>[];
  sessions: { total: number; byTransport: Record<string, number>; byClient: Record<string, number> };
}

export class Router {
  private readonly pool: UpstreamPool;
  private readonly audience: Audience;
  private readonly lists: Lists;
  private readonly resolve: Resolver;
  private readonly subscriptions = new Subscriptions();
  private readonly owners = new Owners();
  private readonly usage = new Usage();
  private readonly logLevels: LogLevels;
  private readonly chain: ForwardChain;
  private governance: Governance = OPEN_GOVERNANCE;
  private startup: Promise<void> = Promise.resolve();
  private startupWait: Promise<void> = Promise.resolve();
  /** Every request to an upstream goes through here: interceptors, then the upstream. */
  readonly forward: Forward;

  private readonly names: NameIndex;
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
    });
    this.names = names;
    this.chain = new ForwardChain(this.usage);
    this.forward = this.chain.forward;
    this.pool = new UpstreamPool(config, log);
    this.audience = new Audience((up) => this.pool.ownerOf(up));
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
    this.govern(governance);
  }

  /**
   * Puts governance in place, or replaces it (a reload): calls already under way finish under
   * the old rules, lists are rebuilt under the new ones.
   */
  govern(governance: Governance): void {
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
    for (const name of plan.removed) this.names.forget(name);
    for (const s of plan.restarted) this.names.forget(s.name);
    for (const { server } of plan.updated) if (server.prefix !== this.pool.get(undefined, server.name)?.config.prefix) this.names.forget(server.name);
    for (const up of this.pool.all()) {
      if (!plan.removed.includes(up.name) && !plan.restarted.some((s) => s.name === up.name)) continue;
      this.subscriptions.forget(up);
      this.usage.forgetUpstream(up);
    }
    this.governance = governance;
    this.chain.use(governance.interceptors);
    this.lists.catalogue.reset();
    const greeted = [...this.audience.sessions].filter((s) => this.audience.isGreeted(s));
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
   */
  start(): void {
    const starting = this.pool.startShared();
    this.startup = boundedAll(starting, this.config.timeouts.startupMs);
    this.startupWait = boundedAll(starting, this.config.timeouts.startupWaitMs);
  }

  ready(): Promise<void> {
    return this.startup;
  }

  async close(): Promise<void> {
    this.audience.close();
    await this.pool.closeAll();
  }

  /** Shared upstream connections in config order (for `check` and `tools`). */
  list(): Upstream[] {
    return this.pool.sharedList();
  }

  /** Every upstream connection and every host session, as `/status` shows them. */
  status(): RouterStatus {
    const upstreams = this.pool.all().map((up) => ({
      name: up.name,
      transport: up.config.transport,
      sharing: up.config.sharing,
      ...(this.pool.ownerOf(up) && { session: this.pool.ownerOf(up)!.id }),
      // Given up after a crash loop: failed, and left alone until a restart or a reload.
      state: up.state,
      ...(up.gaveUp && { gaveUp: true }),
      ...(up.reason && { lastError: up.reason }),
      ...(up.pid !== undefined && { pid: up.pid }),
      restarts: up.restarts,
      inFlight: up.inFlight,
      ...this.lists.counts(up.name),
    }));
    const byTransport: Record<string, number> = {};
    const byClient: Record<string, number> = {};
    for (const s of this.audience.sessions) {
      byTransport[s.transport] = (byTransport[s.transport] ?? 0) + 1;
      byClient[s.client] = (byClient[s.client] ?? 0) + 1;
    }
    return { upstreams, sessions: { total: this.audience.sessions.size, byTransport, byClient } };
  }

  /** What tool pinning holds changed without the upstreams saying so (an approval): rebuild and tell hosts. */
  refreshTools(): void {
    this.lists.catalogue.reset();
    this.audience.listChanged('tools');
  }

  /** Restarts a shared upstream now (an admin's `mcpmux restart`); false if there is none of that name. */
  restart(name: string): boolean {
    const up = this.pool.sharedList().find((u) => u.name === name);
    if (!up) return false;
    void up.restart();
    return true;
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
    for (const up of this.pool.forSession(session)) {
      if (this.pool.ownerOf(up) !== session) continue;
      this.subscriptions.forget(up);
      this.usage.forgetUpstream(up);
    }
    void this.pool.closeFor(session);
    void this.logLevels.sync();
  }

  /**
   * What a host is told at initialize: capabilities and instructions once shared upstreams have
   * started and this session's own ones (`sharing: "session"`) too. Changes that happened
   * before this moment are not announced to it again with list_changed.
   */
  async greet(session: SessionPort): Promise<{ capabilities: Params; instructions: string | undefined }> {
    const own = this.pool.startFor(session);
    await Promise.all([this.startupWait, boundedAll(own, this.config.timeouts.startupWaitMs)]);
    this.audience.greet(session);
    const live = this.resolve.live(session);
    // Upstreams still starting will come with list_changed; the host must know the lists exist.
    const late = this.pool.forSession(session).some((up) => up.state === 'starting');
    return { capabilities: mergeCapabilities(live, session.protocolVersion, late), instructions: mergeInstructions(live) };
  }

  /** The host's roots changed: every upstream it uses may want to ask again. */
  rootsChanged(session: SessionPort): void {
    for (const up of this.resolve.live(session)) up.notify('notifications/roots/list_changed');
  }

  /** Every tool as `client` would see it, all pages walked (for `mcpmux tools`). */
  async allTools(client: string): Promise<Params[]> {
    const tools = await this.lists.walk('tools', () => this.resolve.live(undefined));
    return tools.filter((t) => this.governance.clientAllows(client, 'tools', t.name as string));
  }

  // ---- host requests ------------------------------------------------------------------

  /**
   * Answers one host request that is not session business (initialize, ping). `event`, when
   * someone observes, learns which server and item the request went to.
   */
  async handle(session: SessionPort, req: JsonRpcRequest, signal: CancelSignal, event?: RequestEvent): Promise<Result> {
    const params = req.params ?? {};
    const id = req.id;
    switch (req.method) {
      case 'tools/list':
        return this.lists.page('tools', session.client, this.resolve.live(session), params, signal);
      case 'prompts/list':
        return this.lists.page('prompts', session.client, this.resolve.live(session), params, signal);
      case 'resources/list':
        return this.lists.page('resources', session.client, this.resolve.live(session), params, signal);
      case 'resources/templates/list':
        return this.lists.page('templates', session.client, this.resolve.live(session), params, signal);
      case 'tasks/list':
        // A shared upstream sees one client (mcpmux): each host sees only its own tasks.
        // Keyed by session: a memoised page must never be served to another host.
        return this.lists.catalogue.list(this.lists.kinds.tasks, this.resolve.live(session), params, signal, (t) => this.owners.tasks.get(t.taskId as string) === session, `session:${session.id}`);
      case 'tools/call':
        return this.callNamed(session, id, 'tools', params, signal, event);
      case 'prompts/get':
        return this.callNamed(session, id, 'prompts', params, signal, event);
      case 'resources/read': {
        const shown = requireString(params, 'uri');
        const { up, name: uri } = this.resolve.uri(session, shown);
        params.uri = uri;
        const result = await this.forward(this.call(session, id, up, req.method, params, signal, event, { kind: 'resources', name: shown, upstreamName: uri }));
        return this.adaptResult(session, up, rewriteReadResult, result);
      }
      case 'resources/subscribe':
        return this.subscribe(session, id, params, signal, event);
      case 'resources/unsubscribe':
        return this.unsubscribe(session, id, params, signal, event);
      case 'completion/complete':
        return this.complete(session, id, params, signal, event);
      case 'logging/setLevel':
        await this.logLevels.set(session, params);
        return {};
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/cancel':
        return this.taskRequest(session, req, params, signal, event);
      default:
        throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    }
  }

  private call(
    session: SessionPort,
    hostRequestId: JsonRpcId,
    upstream: Upstream,
    method: string,
    params: Params,
    signal: CancelSignal,
    event: RequestEvent | undefined,
    target?: Target,
  ): Call {
    const token = progressTokenOf(params);
    const onProgress = token === undefined ? undefined : (p: Params) => session.notify('notifications/progress', { ...p, progressToken: token }, hostRequestId);
    if (event) {
      event.server = upstream.name;
      event.name = target?.name;
      event.upstreamName = target?.upstreamName;
    }
    // A related-task id the host saw as `<server>:<id>` goes upstream as `<id>`.
    unwrapRelatedTask(params);
    return { session, hostRequestId, upstream, method, params, target, signal, onProgress, opaque: PASS_THROUGH.results.has(method), event };
  }

  /** tools/call and prompts/get: resolve the public name, forward, rewrite the result. */
  private async callNamed(session: SessionPort, hostRequestId: JsonRpcId, kind: NamedKind, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const publicName = requireString(params, 'name');
    const { up, name } = await this.resolve.named(session, kind, publicName);
    params.name = name;
    const method = kind === 'tools' ? 'tools/call' : 'prompts/get';
    const call = this.call(session, hostRequestId, up, method, params, signal, event, { kind, name: publicName, upstreamName: name });
    let result: Result;
    try {
      result = await this.forward(call);
    } catch (err) {
      throw this.adaptError(session, up, err);
    }
    if (kind === 'prompts') return this.adaptResult(session, up, rewritePromptResult, result);
    // A task-augmented call answers with a task; the host will come back for it by id.
    if (params.task !== undefined && typeof (result.task as Params | undefined)?.taskId === 'string') {
      wrapTaskResult(result, up.name);
      this.owners.tasks.set((result.task as Params).taskId as string, session);
      return result;
    }
    return this.adaptResult(session, up, rewriteToolResult, result);
  }

  /** Upstream result -> what this host can read: URIs namespaced, ids wrapped, blocks it knows. */
  private adaptResult(session: SessionPort, up: Upstream, rewrite: (r: Params, server: string) => Params, result: Result): Result {
    if (up.config.resources.namespace === 'prefix') rewrite(result, up.name);
    wrapRelatedTask(result, up.name);
    return adaptForHost(session.protocolVersion, result);
  }

  /** -32042 carries elicitations whose ids the host must see namespaced (and that are its own). */
  private adaptError(session: SessionPort, up: Upstream, err: unknown): unknown {
    if (!(err instanceof RpcError) || err.code !== McpError.UrlElicitationRequired) return err;
    const elicitations = (err.data as Params | undefined)?.elicitations;
    if (Array.isArray(elicitations)) {
      for (const e of elicitations as Params[]) {
        if (typeof e?.elicitationId === 'string') {
          e.elicitationId = wrapId(up.name, e.elicitationId);
          this.owners.elicitations.set(e.elicitationId as string, session);
        }
      }
    }
    return err;
  }

  private async taskRequest(session: SessionPort, req: JsonRpcRequest, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const wrapped = requireString(params, 'taskId');
    const parts = unwrapId(wrapped);
    const up = parts && this.owners.tasks.get(wrapped) === session ? this.pool.get(session, parts.server) : undefined;
    if (!parts || !up) throw new RpcError(ErrorCode.InvalidParams, `Unknown task: ${wrapped}`);
    this.resolve.available(up, `Task ${wrapped}`);
    params.taskId = parts.rest;
    const result = await this.forward(this.call(session, req.id, up, req.method, params, signal, event));
    // Ownership lasts as long as the session: a host may still ask about a finished task
    // until the upstream forgets it (its ttl).
    if (req.method === 'tasks/result') return this.adaptResult(session, up, rewriteToolResult, result);
    wrapTaskResult(result, up.name);
    return result;
  }

  private async subscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const { up, uri, target } = this.resource(session, params);
    if (!this.subscriptions.has(up, uri)) {
      // The first subscriber subscribes upstream; later ones only join the set.
      params.uri = uri;
      await this.forward(this.call(session, hostRequestId, up, 'resources/subscribe', params, signal, event, target));
    }
    this.subscriptions.add(up, uri, session);
    return {};
  }

  private async unsubscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const { up, uri, target } = this.resource(session, params);
    if (this.subscriptions.remove(up, uri, session)) {
      params.uri = uri;
      await this.forward(this.call(session, hostRequestId, up, 'resources/unsubscribe', params, signal, event, target));
    }
    return {};
  }

  /** The upstream and URI behind `params.uri`, and the call target policy judges. */
  private resource(session: SessionPort, params: Params): { up: Upstream; uri: string; target: Target } {
    const shown = requireString(params, 'uri');
    const { up, name: uri } = this.resolve.uri(session, shown);
    return { up, uri, target: { kind: 'resources', name: shown, upstreamName: uri } };
  }

  private async complete(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal, event: RequestEvent | undefined): Promise<Result> {
    const ref = params.ref as Params | undefined;
    let owner: Resolved;
    let target: Target;
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      owner = await this.resolve.named(session, 'prompts', ref.name);
      target = { kind: 'prompts', name: ref.name, upstreamName: owner.name };
      params.ref = { ...ref, name: owner.name };
    } else if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
      owner = this.resolve.uri(session, ref.uri);
      target = { kind: 'resources', name: ref.uri, upstreamName: owner.name };
      params.ref = { ...ref, uri: owner.name };
    } else {
      throw new RpcError(ErrorCode.InvalidParams, 'completion/complete needs ref {type: "ref/prompt", name} or {type: "ref/resource", uri}');
    }
    const call = this.call(session, hostRequestId, owner.up, 'completion/complete', params, signal, event, target);
    // A server without completions simply has none to offer; hosts handle an empty list better
    // than an error. Policy still judges the item first.
    if (!owner.up.capabilities.completions) call.local = { completion: { values: [], hasMore: false } };
    return this.forward(call);
  }
}

function requireString(params: Params, key: string): string {
  const v = params[key];
  if (typeof v !== 'string') throw new RpcError(ErrorCode.InvalidParams, `params.${key} must be a string`);
  return v;
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
