// The router: from a host session's request to the one upstream that owns it and back, and from
// an upstream's unprompted messages to the host sessions they belong to.
//
// It owns the merged view (capabilities, instructions, catalogue), the name index, resource
// subscriptions and log levels across sessions. Host sessions reach it through `handle`; it
// reaches them only through the small `SessionPort` interface they register with `attach`.

import { NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import type { Config } from '../config/types.js';
import { compileAllowDeny, type Matcher } from '../governance/glob.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { logLevelRank, McpError, MuxError, progressTokenOf, type LogLevel, type Params } from '../protocol/mcp.js';
import type { ProtocolVersion } from '../protocol/versions.js';
import type { Upstream, UpstreamListener } from '../upstream/upstream.js';
import { Catalogue, type ListKind } from './catalogue.js';
import { adaptForHost, hostCanTake } from './downgrade.js';
import { unwrapId, unwrapRelatedTask, wrapId, wrapRelatedTask, wrapTaskResult } from './ids.js';
import { NameIndex, unwrapUri, wrapUri, type NamedKind } from './naming.js';
import { UpstreamPool } from './pool.js';
import { rewritePromptResult, rewriteReadResult, rewriteToolResult } from './rewrite.js';
import { Subscriptions } from './subscriptions.js';

/** What the router needs of a host session. Implemented by HostSession. */
export interface SessionPort {
  readonly id: string;
  /** The client name its bearer token maps to (policy, audit), if tokens are configured. */
  readonly client: string | undefined;
  readonly protocolVersion: ProtocolVersion;
  readonly clientCapabilities: Params;
  /** Set by logging/setLevel; undefined means "everything". */
  logLevel: LogLevel | undefined;
  /** `related`: the host's request this message belongs to, if any (picks the HTTP stream). */
  notify(method: string, params?: Params, related?: JsonRpcId): void;
  /** A server-initiated request to the host (sampling, elicitation, roots). */
  request(method: string, params: Params | undefined, signal: CancelSignal, related?: JsonRpcId): Promise<Result>;
}

/** One forwarded request, as policy, rate limits and observers see it. */
export interface Call {
  session: SessionPort;
  /** The host's id for the request this call serves. */
  hostRequestId: JsonRpcId;
  upstream: Upstream;
  method: string;
  /**
   * Long string values in the params of a passed-through request (PASS_THROUGH) may be raw
   * placeholders: an interceptor that reads argument values calls `materialise(params)` first.
   */
  params: Params;
  /** For tools/call and prompts/get: the name the host used (`params.name` is the upstream's). */
  publicName?: string;
  signal: CancelSignal;
  onProgress?: (p: Params) => void;
  /** The result goes back to the host untouched: its long strings may stay raw (PASS_THROUGH). */
  opaque: boolean;
}
export type Forward = (call: Call) => Promise<Result>;
export type Interceptor = (next: Forward) => Forward;

/** How governance plugs in: wrappers around the forward step, and which tools a client may see. */
export interface Governance {
  interceptors?: readonly Interceptor[];
  toolVisible?: (client: string | undefined, publicName: string) => boolean;
}

/**
 * What the router forwards without reading any long string value in it (tool arguments,
 * content, sampling messages): such values may stay raw bytes from one side to the other
 * (jsonrpc/opaque.ts). Everything else is fully decoded before the router sees it.
 */
export const PASS_THROUGH = {
  /** Host requests whose params go on to an upstream. */
  hostRequests: new Set(['tools/call', 'prompts/get']),
  /** Upstream requests whose params go on to a host. */
  upstreamRequests: new Set(['sampling/createMessage', 'elicitation/create']),
  /** Our requests to upstreams whose results go back to the host. */
  results: new Set(['tools/call', 'prompts/get', 'resources/read']),
} as const;

const LIST_CHANGED_DEBOUNCE_MS = 10;
type ChangeKind = 'tools' | 'prompts' | 'resources';

export class Router {
  private readonly pool: UpstreamPool;
  private readonly sessions = new Set<SessionPort>();
  private readonly catalogue = new Catalogue();
  private readonly names: NameIndex;
  private readonly toolFilters = new Map<string, Matcher>();
  private readonly subscriptions = new Subscriptions();
  /** Level last sent to each upstream connection, to avoid repeating it. */
  private readonly sentLevels = new WeakMap<Upstream, LogLevel>();
  /** Per shared upstream: sessions with requests in flight to it, and the last session that used it. */
  private readonly inflight = new Map<Upstream, Map<SessionPort, number>>();
  private readonly lastUser = new Map<Upstream, SessionPort>();
  /** Host-visible (namespaced) id -> session, for messages that must reach only their originator. */
  private readonly taskOwners = new Map<string, SessionPort>();
  private readonly elicitationOwners = new Map<string, SessionPort>();
  /** Kind -> sequence number of its latest change, waiting for the debounce timer. */
  private readonly pendingListChanged = new Map<ChangeKind, number>();
  /** Session -> sequence number of the catalogue state it was greeted with. */
  private readonly greeted = new Map<SessionPort, number>();
  private changeSeq = 0;
  private listChangedTimer: NodeJS.Timeout | undefined;
  private startup: Promise<void> = Promise.resolve();
  readonly forward: Forward;
  private readonly kinds: Record<'tools' | 'prompts' | 'resources' | 'templates' | 'tasks', ListKind>;

  private readonly toolVisible: Governance['toolVisible'];

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    governance: Governance = {},
  ) {
    this.toolVisible = governance.toolVisible;
    const interceptors = governance.interceptors ?? [];
    this.names = new NameIndex(config.namespace.separator, config.namespace.maxNameLength, (kind, owner, from, to) =>
      this.log.warn({ kind, server: owner.server, name: owner.name, from, to }, 'public name taken by another server; renamed'),
    );
    for (const s of config.servers) this.toolFilters.set(s.name, compileAllowDeny(s.tools));
    this.pool = new UpstreamPool(config, log, this.listener);
    this.forward = interceptors.reduceRight<Forward>((next, wrap) => wrap(next), (call) => this.send(call));
    this.kinds = {
      tools: { method: 'tools/list', key: 'tools', capability: 'tools', present: (up, item) => this.presentNamed('tools', up, item) },
      prompts: { method: 'prompts/list', key: 'prompts', capability: 'prompts', present: (up, item) => this.presentNamed('prompts', up, item) },
      resources: { method: 'resources/list', key: 'resources', capability: 'resources', present: (up, item) => this.presentUri(up, item, 'uri') },
      templates: {
        method: 'resources/templates/list',
        key: 'resourceTemplates',
        capability: 'resources',
        present: (up, item) => this.presentUri(up, item, 'uriTemplate'),
      },
      tasks: {
        method: 'tasks/list',
        key: 'tasks',
        capability: 'tasks',
        present: (up, item) => (typeof item.taskId === 'string' ? { ...item, taskId: wrapId(up.name, item.taskId) } : undefined),
      },
    };
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Starts every shared upstream; `ready()` waits for them (bounded by timeouts.startupMs). */
  start(): void {
    this.startup = boundedAll(this.pool.startShared(), this.config.timeouts.startupMs);
  }

  ready(): Promise<void> {
    return this.startup;
  }

  async close(): Promise<void> {
    clearTimeout(this.listChangedTimer);
    await this.pool.closeAll();
  }

  /** Shared upstream connections in config order (for `check` and `tools`). */
  list(): Upstream[] {
    return this.pool.sharedList();
  }

  attach(session: SessionPort): void {
    this.sessions.add(session);
  }

  detach(session: SessionPort): void {
    this.sessions.delete(session);
    this.greeted.delete(session);
    for (const { up, uri } of this.subscriptions.dropSession(session)) {
      if (up.state === 'ready') up.request('resources/unsubscribe', { uri }).catch(() => {});
    }
    for (const users of this.inflight.values()) users.delete(session);
    for (const [up, s] of this.lastUser) if (s === session) this.lastUser.delete(up);
    for (const owners of [this.taskOwners, this.elicitationOwners]) for (const [id, s] of owners) if (s === session) owners.delete(id);
    for (const up of this.pool.forSession(session)) {
      if (this.pool.ownerOf(up) !== session) continue;
      this.subscriptions.forget(up);
      this.inflight.delete(up);
      this.lastUser.delete(up);
    }
    void this.pool.closeFor(session);
    void this.syncLogLevels();
  }

  /**
   * What a host is told at initialize: capabilities and instructions once shared upstreams have
   * started and this session's own ones (`sharing: "session"`) too. Changes that happened
   * before this moment are not announced to it again with list_changed.
   */
  async greet(session: SessionPort): Promise<{ capabilities: Params; instructions: string | undefined }> {
    const own = this.pool.startFor(session);
    await Promise.all([this.startup, boundedAll(own, this.config.timeouts.startupMs)]);
    // It may have gone while we waited; then there is nobody to greet (and nothing to leak).
    if (this.sessions.has(session)) this.greeted.set(session, this.changeSeq);
    return { capabilities: this.capabilities(session), instructions: this.instructions(session) };
  }

  /** The host's roots changed: every upstream it uses may want to ask again. */
  rootsChanged(session: SessionPort): void {
    for (const up of this.live(session)) up.notify('notifications/roots/list_changed');
  }

  // ---- the merged view ----------------------------------------------------------------

  /** The union of what the session's live upstreams offer. */
  private capabilities(session: SessionPort): Params {
    let caps: Params = {};
    let subscribe = false;
    for (const up of this.live(session)) {
      const c = up.capabilities;
      // Keys mcpmux does not know (experimental, newer ones) pass through, merged.
      const { tools: _t, prompts: _p, resources: _r, logging: _l, completions: _c, tasks: _k, ...other } = c;
      caps = mergeDeep(caps, other);
      if (c.tools) caps.tools = { listChanged: true };
      if (c.prompts) caps.prompts = { listChanged: true };
      if (c.resources) {
        caps.resources = { listChanged: true };
        if ((c.resources as Params).subscribe) subscribe = true;
      }
      if (c.logging) caps.logging = {};
      if (c.completions) caps.completions = {};
      // Tasks arrived in 2025-11-25; older hosts are not offered them.
      if (c.tasks && session.protocolVersion >= '2025-11-25') caps.tasks = mergeDeep((caps.tasks as Params) ?? {}, c.tasks as Params);
    }
    if (caps.resources && subscribe) (caps.resources as Params).subscribe = true;
    return caps;
  }

  /** Every live upstream's instructions under a heading with its name. */
  private instructions(session: SessionPort): string | undefined {
    const parts: string[] = [];
    for (const up of this.live(session)) {
      const text = up.info?.instructions;
      if (text) parts.push(`## ${up.name}\n\n${text.trim()}`);
    }
    return parts.length ? parts.join('\n\n') : undefined;
  }

  /** Every tool as hosts see it, all pages walked (for `mcpmux tools`). */
  async allTools(client?: string): Promise<Params[]> {
    const tools = await this.walk(undefined, this.kinds.tools);
    const visible = this.toolVisible;
    return visible ? tools.filter((t) => visible(client, t.name as string)) : tools;
  }

  private live(session: SessionPort | undefined): Upstream[] {
    return this.pool.forSession(session).filter((u) => u.state === 'ready');
  }

  private presentNamed(kind: NamedKind, up: Upstream, item: Params): Params | undefined {
    if (typeof item.name !== 'string') return undefined;
    if (kind === 'tools' && !this.toolFilters.get(up.name)!(item.name)) return undefined;
    return { ...item, name: this.names.publish(kind, up.name, up.config.prefix, item.name) };
  }

  private presentUri(up: Upstream, item: Params, key: 'uri' | 'uriTemplate'): Params | undefined {
    const uri = item[key];
    if (typeof uri !== 'string') return undefined;
    if (up.config.resources.namespace === 'passthrough') return item;
    return { ...item, [key]: wrapUri(up.name, uri) };
  }

  // ---- host requests ------------------------------------------------------------------

  /** Answers one host request that is not session business (initialize, ping). */
  async handle(session: SessionPort, req: JsonRpcRequest, signal: CancelSignal): Promise<Result> {
    const params = req.params ?? {};
    const id = req.id;
    switch (req.method) {
      case 'tools/list': {
        const visible = this.toolVisible;
        const filter = visible && ((item: Params) => visible(session.client, item.name as string));
        return this.catalogue.list(this.kinds.tools, this.live(session), params, signal, filter, session.client);
      }
      case 'prompts/list':
        return this.catalogue.list(this.kinds.prompts, this.live(session), params, signal);
      case 'resources/list':
        return this.catalogue.list(this.kinds.resources, this.live(session), params, signal);
      case 'resources/templates/list':
        return this.catalogue.list(this.kinds.templates, this.live(session), params, signal);
      case 'tasks/list':
        // A shared upstream sees one client (mcpmux): each host sees only its own tasks.
        // Keyed by session: a memoised page must never be served to another host.
        return this.catalogue.list(this.kinds.tasks, this.live(session), params, signal, (t) => this.taskOwners.get(t.taskId as string) === session, `session:${session.id}`);
      case 'tools/call':
        return this.callNamed(session, id, 'tools', params, signal);
      case 'prompts/get':
        return this.callNamed(session, id, 'prompts', params, signal);
      case 'resources/read': {
        const { up, uri } = this.resolveUri(session, requireString(params, 'uri'));
        params.uri = uri;
        const result = await this.forward(this.call(session, id, up, req.method, params, signal));
        return this.adaptResult(session, up, rewriteReadResult, result);
      }
      case 'resources/subscribe':
        return this.subscribe(session, id, params, signal);
      case 'resources/unsubscribe':
        return this.unsubscribe(session, params);
      case 'completion/complete':
        return this.complete(session, id, params, signal);
      case 'logging/setLevel':
        return this.setLevel(session, params);
      case 'tasks/get':
      case 'tasks/result':
      case 'tasks/cancel':
        return this.taskRequest(session, req, params, signal);
      default:
        throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    }
  }

  private call(session: SessionPort, hostRequestId: JsonRpcId, upstream: Upstream, method: string, params: Params, signal: CancelSignal, publicName?: string): Call {
    const token = progressTokenOf(params);
    const onProgress = token === undefined ? undefined : (p: Params) => session.notify('notifications/progress', { ...p, progressToken: token }, hostRequestId);
    const call: Call = { session, hostRequestId, upstream, method, params, publicName, signal, onProgress, opaque: PASS_THROUGH.results.has(method) };
    // A related-task id the host saw as `<server>:<id>` goes upstream as `<id>`.
    unwrapRelatedTask(params);
    return call;
  }

  /** tools/call and prompts/get: resolve the public name, forward, rewrite the result. */
  private async callNamed(session: SessionPort, hostRequestId: JsonRpcId, kind: NamedKind, params: Params, signal: CancelSignal): Promise<Result> {
    const publicName = requireString(params, 'name');
    const { up, name } = await this.resolveNamed(session, kind, publicName);
    params.name = name;
    const call = this.call(session, hostRequestId, up, kind === 'tools' ? 'tools/call' : 'prompts/get', params, signal, publicName);
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
      this.taskOwners.set((result.task as Params).taskId as string, session);
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
          this.elicitationOwners.set(e.elicitationId as string, session);
        }
      }
    }
    return err;
  }

  private async taskRequest(session: SessionPort, req: JsonRpcRequest, params: Params, signal: CancelSignal): Promise<Result> {
    const wrapped = requireString(params, 'taskId');
    const parts = unwrapId(wrapped);
    const up = parts && this.taskOwners.get(wrapped) === session ? this.pool.get(session, parts.server) : undefined;
    if (!parts || !up) throw new RpcError(ErrorCode.InvalidParams, `Unknown task: ${wrapped}`);
    this.available(up, `Task ${wrapped}`);
    params.taskId = parts.rest;
    const result = await this.forward(this.call(session, req.id, up, req.method, params, signal));
    // Ownership lasts as long as the session: a host may still ask about a finished task
    // until the upstream forgets it (its ttl).
    if (req.method === 'tasks/result') return this.adaptResult(session, up, rewriteToolResult, result);
    wrapTaskResult(result, up.name);
    return result;
  }

  private async subscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal): Promise<Result> {
    const { up, uri } = this.resolveUri(session, requireString(params, 'uri'));
    if (!this.subscriptions.has(up, uri)) {
      // The first subscriber subscribes upstream; later ones only join the set.
      params.uri = uri;
      await this.forward(this.call(session, hostRequestId, up, 'resources/subscribe', params, signal));
    }
    this.subscriptions.add(up, uri, session);
    return {};
  }

  private async unsubscribe(session: SessionPort, params: Params): Promise<Result> {
    const { up, uri } = this.resolveUri(session, requireString(params, 'uri'));
    if (this.subscriptions.remove(up, uri, session)) {
      params.uri = uri;
      await up.request('resources/unsubscribe', params);
    }
    return {};
  }

  private async complete(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: CancelSignal): Promise<Result> {
    const ref = params.ref as Params | undefined;
    let up: Upstream;
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const owner = await this.resolveNamed(session, 'prompts', ref.name);
      up = owner.up;
      params.ref = { ...ref, name: owner.name };
    } else if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
      const owner = this.resolveUri(session, ref.uri);
      up = owner.up;
      params.ref = { ...ref, uri: owner.uri };
    } else {
      throw new RpcError(ErrorCode.InvalidParams, 'completion/complete needs ref {type: "ref/prompt", name} or {type: "ref/resource", uri}');
    }
    // A server without completions simply has none to offer; hosts handle an empty list better than an error.
    if (!up.capabilities.completions) return { completion: { values: [], hasMore: false } };
    return this.forward(this.call(session, hostRequestId, up, 'completion/complete', params, signal));
  }

  private async setLevel(session: SessionPort, params: Params): Promise<Result> {
    const level = params.level;
    if (logLevelRank(level) < 0) throw new RpcError(ErrorCode.InvalidParams, `Invalid log level: ${JSON.stringify(level)}`);
    session.logLevel = level as LogLevel;
    await this.syncLogLevels();
    return {};
  }

  /** A shared upstream gets the most verbose level any session asked for; a session's own, that session's. */
  private async syncLogLevels(): Promise<void> {
    let widest: LogLevel | undefined;
    for (const s of this.sessions) {
      if (s.logLevel && (widest === undefined || logLevelRank(s.logLevel) < logLevelRank(widest))) widest = s.logLevel;
    }
    const sends: Promise<void>[] = [];
    for (const up of this.pool.all()) {
      const owner = this.pool.ownerOf(up);
      const wanted = owner ? owner.logLevel : widest;
      if (!wanted || up.state !== 'ready' || !up.capabilities.logging || this.sentLevels.get(up) === wanted) continue;
      this.sentLevels.set(up, wanted);
      sends.push(
        up.request('logging/setLevel', { level: wanted }).then(
          () => {},
          (err: Error) => up.log.warn({ err: err.message }, 'logging/setLevel failed'),
        ),
      );
    }
    await Promise.all(sends);
  }

  /** The base of the forward chain: one request to one upstream, tracked for reverse routing. */
  private async send(call: Call): Promise<Result> {
    const { upstream: up, session } = call;
    let users = this.inflight.get(up);
    if (!users) this.inflight.set(up, (users = new Map()));
    users.set(session, (users.get(session) ?? 0) + 1);
    this.lastUser.set(up, session);
    try {
      return await up.request(call.method, call.params, { signal: call.signal, onProgress: call.onProgress, context: call, opaque: call.opaque });
    } finally {
      const n = (users.get(session) ?? 1) - 1;
      if (n > 0) users.set(session, n);
      else if (users.delete(session) && users.size === 0) this.inflight.delete(up);
    }
  }

  // ---- resolution ---------------------------------------------------------------------

  private async resolveNamed(session: SessionPort, kind: NamedKind, publicName: string): Promise<{ up: Upstream; name: string }> {
    let owner = this.names.resolve(kind, publicName);
    if (!owner) {
      // Not in any list served so far (say, a host that remembers tools across an mcpmux
      // restart, or a name that does not exist): walk the lists once, then look again.
      await this.walk(session, kind === 'tools' ? this.kinds.tools : this.kinds.prompts);
      owner = this.names.resolve(kind, publicName);
    }
    const what = kind === 'tools' ? 'tool' : 'prompt';
    // A tool the server's allow/deny filter hides is never published (presentNamed), so it
    // resolves to no owner here.
    const up = owner ? this.pool.get(session, owner.server) : this.serverByPrefix(session, publicName);
    // Down, or (unknown name) its prefix names a server that is down: say so rather than "unknown".
    if (up && up.state !== 'ready') this.unavailable(up, `The ${what} ${publicName}`);
    if (!owner || !up) throw new RpcError(ErrorCode.InvalidParams, `Unknown ${what}: ${publicName}`);
    return { up, name: owner.name };
  }

  /** The connection whose prefix starts `publicName` (`fs__read_file` -> fs), if any. */
  private serverByPrefix(session: SessionPort, publicName: string): Upstream | undefined {
    const sep = this.config.namespace.separator;
    const at = publicName.indexOf(sep);
    if (at <= 0) return undefined;
    const prefix = publicName.slice(0, at);
    const cfg = this.config.servers.find((s) => !s.disabled && s.prefix === prefix);
    return cfg && this.pool.get(session, cfg.name);
  }

  private async walk(session: SessionPort | undefined, kind: ListKind): Promise<Params[]> {
    const signal = NEVER;
    const items: Params[] = [];
    let cursor: unknown;
    do {
      const page = await this.catalogue.list(kind, this.live(session), cursor === undefined ? {} : { cursor }, signal);
      items.push(...(page[kind.key] as Params[]));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return items;
  }

  private resolveUri(session: SessionPort, wrapped: string): { up: Upstream; uri: string } {
    const parts = unwrapUri(wrapped);
    const prefixed = parts && this.pool.get(session, parts.server);
    if (parts && prefixed && prefixed.config.resources.namespace === 'prefix') {
      return { up: this.available(prefixed, `Resource ${wrapped}`), uri: parts.rest };
    }
    // Passthrough upstreams keep their URIs; with exactly one, it owns every URI that is not prefixed.
    const passthrough = this.live(session).filter((u) => u.config.resources.namespace === 'passthrough' && u.capabilities.resources);
    if (passthrough.length === 1) return { up: passthrough[0]!, uri: wrapped };
    throw new RpcError(McpError.ResourceNotFound, `Resource not found: ${wrapped}`, { uri: wrapped });
  }

  private available(up: Upstream, what: string): Upstream {
    if (up.state !== 'ready') this.unavailable(up, what);
    return up;
  }

  private unavailable(up: Upstream, what: string): never {
    throw new RpcError(MuxError.UpstreamUnavailable, `${what} belongs to server "${up.name}", which is not available${up.reason ? `: ${up.reason}` : ''}`);
  }

  // ---- upstream -> host ---------------------------------------------------------------

  private readonly listener: UpstreamListener = {
    opaqueRequests: PASS_THROUGH.upstreamRequests,
    notification: (up, n, context) => this.upstreamNotification(up, n, context as Call | undefined),
    request: (up, req, signal, context) => this.upstreamRequest(up, req, signal, context as Call | undefined),
    stateChanged: (up) => {
      this.catalogue.invalidate(up);
      this.sentLevels.delete(up);
      if (up.state === 'ready') {
        // A restarted or re-initialized upstream gets back what hosts had asked of it.
        void this.syncLogLevels();
        for (const uri of this.subscriptions.urisOf(up)) {
          up.request('resources/subscribe', { uri }).catch((err: Error) => up.log.warn({ err: err.message, uri }, 're-subscribe failed'));
        }
      }
      // Hosts learn about servers that came or went through list_changed.
      const c = up.capabilities;
      for (const kind of ['tools', 'prompts', 'resources'] as const) if (c[kind]) this.listChanged(kind, up);
    },
  };

  /** The sessions an upstream's broadcast-style messages go to. */
  private audience(up: Upstream): Iterable<SessionPort> {
    const owner = this.pool.ownerOf(up);
    return owner ? [owner] : this.sessions;
  }

  private upstreamNotification(up: Upstream, n: JsonRpcNotification, call: Call | undefined): void {
    const params = n.params ?? {};
    wrapRelatedTask(params, up.name);
    switch (n.method) {
      case 'notifications/tools/list_changed':
      case 'notifications/prompts/list_changed':
      case 'notifications/resources/list_changed': {
        const kind = n.method.split('/')[1] as ChangeKind;
        this.catalogue.invalidate(up, kind);
        return this.listChanged(kind, up);
      }
      case 'notifications/resources/updated': {
        const uri = params.uri;
        const subs = typeof uri === 'string' ? this.subscriptions.subscribers(up, uri) : undefined;
        if (!subs) return;
        const shown = up.config.resources.namespace === 'prefix' ? wrapUri(up.name, uri as string) : uri;
        const shownParams = { ...params, uri: shown };
        for (const s of subs) s.notify(n.method, shownParams);
        return;
      }
      case 'notifications/message': {
        const rank = logLevelRank(params.level);
        const logger = typeof params.logger === 'string' ? `${up.name}/${params.logger}` : up.name;
        const shown = { ...params, logger };
        for (const s of this.audience(up)) {
          if (s.logLevel === undefined || rank >= logLevelRank(s.logLevel)) s.notify(n.method, shown);
        }
        return;
      }
      case 'notifications/elicitation/complete':
      case 'notifications/tasks/status': {
        // Only the host that started the elicitation or task hears about it.
        const key = n.method === 'notifications/tasks/status' ? 'taskId' : 'elicitationId';
        const owners = key === 'taskId' ? this.taskOwners : this.elicitationOwners;
        if (typeof params[key] !== 'string') return;
        const shownId = wrapId(up.name, params[key] as string);
        const owner = owners.get(shownId) ?? call?.session ?? this.pool.ownerOf(up);
        if (!owner) return up.log.debug({ method: n.method, id: shownId }, 'no session owns this id; dropped');
        owner.notify(n.method, { ...params, [key]: shownId });
        // A completed elicitation is over. A task stays owned until its result is fetched.
        if (key === 'elicitationId') owners.delete(shownId);
        return;
      }
      default:
        up.log.debug({ method: n.method }, 'notification from upstream not routed');
    }
  }

  /** Debounced `notifications/<kind>/list_changed` to every session that can see `up`. */
  private listChanged(kind: ChangeKind, up: Upstream): void {
    const owner = this.pool.ownerOf(up);
    if (owner) {
      if (this.greeted.has(owner)) owner.notify(`notifications/${kind}/list_changed`);
      return;
    }
    this.pendingListChanged.set(kind, ++this.changeSeq);
    this.listChangedTimer ??= setTimeout(() => {
      this.listChangedTimer = undefined;
      const changes = [...this.pendingListChanged];
      this.pendingListChanged.clear();
      for (const [s, seen] of this.greeted) {
        for (const [k, seq] of changes) if (seq > seen) s.notify(`notifications/${k}/list_changed`);
      }
    }, LIST_CHANGED_DEBOUNCE_MS);
  }

  /**
   * A server-initiated request goes to the host session it belongs to, if that host can take it:
   * the owner of a `session` upstream; the session of the call it came with (HTTP upstreams say
   * which); else the session with requests in flight to that upstream.
   */
  private async upstreamRequest(up: Upstream, req: JsonRpcRequest, signal: CancelSignal, call: Call | undefined): Promise<Result> {
    if (req.method === 'roots/list' && up.config.roots) return { roots: up.config.roots };
    const callSession = call && this.greeted.has(call.session) ? call.session : undefined;
    const session = this.pool.ownerOf(up) ?? callSession ?? this.sessionFor(up);
    if (!session || !this.greeted.has(session)) throw new RpcError(ErrorCode.MethodNotFound, `No initialized host session is connected to take ${req.method}`);
    const params = req.params ?? {};
    const refusal = hostCanTake(session, req.method, params);
    if (refusal) throw new RpcError(ErrorCode.MethodNotFound, refusal);
    wrapRelatedTask(params, up.name);
    if (req.method === 'elicitation/create' && typeof params.elicitationId === 'string') {
      params.elicitationId = wrapId(up.name, params.elicitationId);
      this.elicitationOwners.set(params.elicitationId as string, session);
    }
    // `related` picks the host's stream; it only means something for the call's own session.
    const related = call && session === call.session ? call.hostRequestId : undefined;
    const result = await session.request(req.method, params, signal, related);
    unwrapRelatedTask(result);
    return result;
  }

  /**
   * For a shared upstream that cannot say which call a request belongs to (stdio): the one
   * session with requests in flight to it; among several, the most recent of them (logged);
   * with none, the one that used it last, or the only session there is.
   */
  private sessionFor(up: Upstream): SessionPort | undefined {
    const users = this.inflight.get(up);
    const last = this.lastUser.get(up);
    if (users && users.size > 0) {
      if (users.size === 1) return users.keys().next().value;
      up.log.info('several sessions have requests in flight; routing to the most recent');
      return last && users.has(last) ? last : [...users.keys()].pop();
    }
    if (last && this.sessions.has(last)) return last;
    return this.greeted.size === 1 ? this.greeted.keys().next().value : undefined;
  }
}

function requireString(params: Params, key: string): string {
  const v = params[key];
  if (typeof v !== 'string') throw new RpcError(ErrorCode.InvalidParams, `params.${key} must be a string`);
  return v;
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

/** Union of two capability objects (objects merged key by key). */
function mergeDeep(a: Params, b: Params): Params {
  const out: Params = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isObject(prev) && isObject(v) ? mergeDeep(prev, v) : v;
  }
  return out;
}

function isObject(v: unknown): v is Params {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
