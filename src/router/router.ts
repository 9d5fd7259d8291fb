// The router: from a host session's request to the one upstream that owns it and back, and from
// an upstream's unprompted messages to the host sessions they belong to.
//
// It owns the merged view (capabilities, instructions, catalogue), the name index, resource
// subscriptions and log levels across sessions. Host sessions reach it through `handle`; it
// reaches them only through the small `SessionPort` interface they register with `attach`.

import type { Config, ServerConfig } from '../config/types.js';
import { compileAllowDeny, type Matcher } from '../governance/glob.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError, type JsonRpcId, type JsonRpcNotification, type JsonRpcRequest } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { logLevelRank, McpError, MuxError, progressTokenOf, type LogLevel, type Params } from '../protocol/mcp.js';
import type { ProtocolVersion } from '../protocol/versions.js';
import { Upstream, type UpstreamListener } from '../upstream/upstream.js';
import { VERSION } from '../version.js';
import { Catalogue, type ListKind } from './catalogue.js';
import { NameIndex, unwrapUri, wrapUri, type NamedKind } from './naming.js';
import { rewritePromptResult, rewriteReadResult, rewriteToolResult } from './rewrite.js';

/** What the router needs of a host session. Implemented by HostSession. */
export interface SessionPort {
  readonly id: string;
  readonly protocolVersion: ProtocolVersion;
  readonly clientCapabilities: Params;
  /** Set by logging/setLevel; undefined means "everything". */
  logLevel: LogLevel | undefined;
  /** `related`: the host's request this message belongs to, if any (picks the HTTP stream). */
  notify(method: string, params?: Params, related?: JsonRpcId): void;
  /** A server-initiated request to the host (sampling, elicitation, roots). */
  request(method: string, params: Params | undefined, signal: AbortSignal, related?: JsonRpcId): Promise<Result>;
}

/** One forwarded request, as policy, rate limits and observers see it. */
export interface Call {
  session: SessionPort;
  /** The host's id for the request this call serves. */
  hostRequestId: JsonRpcId;
  upstream: Upstream;
  method: string;
  params: Params;
  /** For tools/call and prompts/get: the public and upstream names. */
  publicName?: string;
  upstreamName?: string;
  signal: AbortSignal;
  onProgress?: (p: Params) => void;
}
export type Forward = (call: Call) => Promise<Result>;

const LIST_CHANGED_DEBOUNCE_MS = 10;
const CLIENT_INFO = { name: 'mcpmux', version: VERSION };

/** Capabilities mcpmux declares to upstreams: what it can route back to some host. */
const UPSTREAM_CLIENT_CAPABILITIES: Params = {
  roots: { listChanged: true },
  sampling: {},
  elicitation: { form: {}, url: {} },
};

export class Router {
  private readonly upstreams = new Map<string, Upstream>();
  private readonly sessions = new Set<SessionPort>();
  private readonly catalogue = new Catalogue();
  private readonly names: NameIndex;
  private readonly toolFilters = new Map<string, Matcher>();
  /** `${server}\0${uri}` -> sessions subscribed to that upstream resource. */
  private readonly subscriptions = new Map<string, Set<SessionPort>>();
  /** Level last sent to each upstream, to avoid repeating it. */
  private readonly sentLevels = new Map<string, LogLevel>();
  /** Per upstream: sessions with requests in flight to it, and the last session that used it. */
  private readonly inflight = new Map<Upstream, Map<SessionPort, number>>();
  private readonly lastUser = new Map<Upstream, SessionPort>();
  /** Kind -> sequence number of its latest change, waiting for the debounce timer. */
  private readonly pendingListChanged = new Map<string, number>();
  /** Session -> sequence number of the catalogue state it was greeted with. */
  private readonly greeted = new Map<SessionPort, number>();
  private changeSeq = 0;
  private listChangedTimer: NodeJS.Timeout | undefined;
  private startup: Promise<void> = Promise.resolve();
  readonly forward: Forward;

  private readonly kinds: Record<'tools' | 'prompts' | 'resources' | 'templates', ListKind>;

  constructor(
    private readonly config: Config,
    private readonly log: Logger,
    interceptors: readonly ((next: Forward) => Forward)[] = [],
  ) {
    this.names = new NameIndex(config.namespace.separator, config.namespace.maxNameLength, (kind, owner, from, to) =>
      this.log.warn({ kind, server: owner.server, name: owner.name, from, to }, 'public name taken by another server; renamed'),
    );
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
    };
  }

  // ---- lifecycle ------------------------------------------------------------------------

  /** Starts every enabled upstream; `ready()` waits for them (bounded by timeouts.startupMs). */
  start(): void {
    const starts: Promise<void>[] = [];
    for (const cfg of this.config.servers) {
      if (cfg.disabled) continue;
      starts.push(this.addUpstream(cfg).start());
    }
    this.startup = boundedAll(starts, this.config.timeouts.startupMs);
  }

  ready(): Promise<void> {
    return this.startup;
  }

  async close(): Promise<void> {
    clearTimeout(this.listChangedTimer);
    await Promise.all([...this.upstreams.values()].map((u) => u.close()));
  }

  list(): Upstream[] {
    return [...this.upstreams.values()];
  }

  private addUpstream(cfg: ServerConfig): Upstream {
    const up = new Upstream(cfg, {
      log: this.log,
      listener: this.listener,
      maxMessageBytes: this.config.limits.maxMessageBytes,
      startupMs: this.config.timeouts.startupMs,
      maxMs: this.config.timeouts.maxMs,
      clientCapabilities: UPSTREAM_CLIENT_CAPABILITIES,
      clientInfo: CLIENT_INFO,
    });
    this.upstreams.set(cfg.name, up);
    this.toolFilters.set(cfg.name, compileAllowDeny(cfg.tools));
    return up;
  }

  attach(session: SessionPort): void {
    this.sessions.add(session);
  }

  detach(session: SessionPort): void {
    this.sessions.delete(session);
    this.greeted.delete(session);
    for (const [key, subs] of this.subscriptions) {
      if (subs.delete(session) && subs.size === 0) {
        this.subscriptions.delete(key);
        const [server, uri] = key.split('\0') as [string, string];
        this.upstreams.get(server)?.request('resources/unsubscribe', { uri }).catch(() => {});
      }
    }
    for (const users of this.inflight.values()) users.delete(session);
    for (const [up, s] of this.lastUser) if (s === session) this.lastUser.delete(up);
    void this.syncLogLevels();
  }

  /** The host's roots changed: every upstream may want to ask again. */
  rootsChanged(): void {
    for (const up of this.live()) up.notify('notifications/roots/list_changed');
  }

  // ---- the merged view ----------------------------------------------------------------

  /**
   * What a host is told at initialize: capabilities and instructions as of now. Changes that
   * happened before this moment are not announced to it again with list_changed.
   */
  greet(session: SessionPort): { capabilities: Params; instructions: string | undefined } {
    this.greeted.set(session, this.changeSeq);
    return { capabilities: this.capabilities(), instructions: this.instructions() };
  }

  /** The union of what the live upstreams offer. */
  capabilities(): Params {
    const caps: Params = {};
    let subscribe = false;
    for (const up of this.live()) {
      const c = up.capabilities;
      if (c.tools) caps.tools = { listChanged: true };
      if (c.prompts) caps.prompts = { listChanged: true };
      if (c.resources) {
        caps.resources = { listChanged: true };
        if ((c.resources as Params).subscribe) subscribe = true;
      }
      if (c.logging) caps.logging = {};
      if (c.completions) caps.completions = {};
    }
    if (caps.resources && subscribe) (caps.resources as Params).subscribe = true;
    return caps;
  }

  /** Every live upstream's instructions under a heading with its name. */
  instructions(): string | undefined {
    const parts: string[] = [];
    for (const up of this.live()) {
      const text = up.info?.instructions;
      if (text) parts.push(`## ${up.name}\n\n${text.trim()}`);
    }
    return parts.length ? parts.join('\n\n') : undefined;
  }

  private live(): Upstream[] {
    return [...this.upstreams.values()].filter((u) => u.state === 'ready');
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
  handle(session: SessionPort, req: JsonRpcRequest, signal: AbortSignal): Promise<Result> {
    const params = req.params ?? {};
    switch (req.method) {
      case 'tools/list':
        return this.catalogue.list(this.kinds.tools, this.live(), params, signal);
      case 'prompts/list':
        return this.catalogue.list(this.kinds.prompts, this.live(), params, signal);
      case 'resources/list':
        return this.catalogue.list(this.kinds.resources, this.live(), params, signal);
      case 'resources/templates/list':
        return this.catalogue.list(this.kinds.templates, this.live(), params, signal);
      case 'tools/call':
        return this.callTool(session, req.id, params, signal);
      case 'prompts/get':
        return this.getPrompt(session, req.id, params, signal);
      case 'resources/read':
        return this.readResource(session, req.id, params, signal);
      case 'resources/subscribe':
        return this.subscribe(session, req.id, params, signal);
      case 'resources/unsubscribe':
        return this.unsubscribe(session, params);
      case 'completion/complete':
        return this.complete(session, req.id, params, signal);
      case 'logging/setLevel':
        return this.setLevel(session, params);
      default:
        return Promise.reject(new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`));
    }
  }

  private async callTool(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: AbortSignal): Promise<Result> {
    const publicName = requireString(params, 'name');
    const { up, name } = await this.resolveNamed('tools', publicName);
    params.name = name;
    const result = await this.forward({ session, hostRequestId, upstream: up, method: 'tools/call', params, publicName, upstreamName: name, signal, ...this.progressRelay(session, hostRequestId, params) });
    return up.config.resources.namespace === 'prefix' ? rewriteToolResult(result, (u) => wrapUri(up.name, u)) : result;
  }

  private async getPrompt(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: AbortSignal): Promise<Result> {
    const publicName = requireString(params, 'name');
    const { up, name } = await this.resolveNamed('prompts', publicName);
    params.name = name;
    const result = await this.forward({ session, hostRequestId, upstream: up, method: 'prompts/get', params, publicName, upstreamName: name, signal, ...this.progressRelay(session, hostRequestId, params) });
    return up.config.resources.namespace === 'prefix' ? rewritePromptResult(result, (u) => wrapUri(up.name, u)) : result;
  }

  private async readResource(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: AbortSignal): Promise<Result> {
    const { up, uri } = this.resolveUri(requireString(params, 'uri'));
    params.uri = uri;
    const result = await this.forward({ session, hostRequestId, upstream: up, method: 'resources/read', params, signal, ...this.progressRelay(session, hostRequestId, params) });
    return up.config.resources.namespace === 'prefix' ? rewriteReadResult(result, (u) => wrapUri(up.name, u)) : result;
  }

  private async subscribe(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: AbortSignal): Promise<Result> {
    const { up, uri } = this.resolveUri(requireString(params, 'uri'));
    const key = up.name + '\0' + uri;
    let subs = this.subscriptions.get(key);
    if (!subs) {
      // The first subscriber subscribes upstream; later ones only join the set.
      params.uri = uri;
      await this.forward({ session, hostRequestId, upstream: up, method: 'resources/subscribe', params, signal });
      subs = this.subscriptions.get(key) ?? new Set();
      this.subscriptions.set(key, subs);
    }
    subs.add(session);
    return {};
  }

  private async unsubscribe(session: SessionPort, params: Params): Promise<Result> {
    const { up, uri } = this.resolveUri(requireString(params, 'uri'));
    const key = up.name + '\0' + uri;
    const subs = this.subscriptions.get(key);
    if (subs?.delete(session) && subs.size === 0) {
      this.subscriptions.delete(key);
      params.uri = uri;
      await up.request('resources/unsubscribe', params);
    }
    return {};
  }

  private async complete(session: SessionPort, hostRequestId: JsonRpcId, params: Params, signal: AbortSignal): Promise<Result> {
    const ref = params.ref as Params | undefined;
    let up: Upstream;
    if (ref?.type === 'ref/prompt' && typeof ref.name === 'string') {
      const owner = await this.resolveNamed('prompts', ref.name);
      up = owner.up;
      params.ref = { ...ref, name: owner.name };
    } else if (ref?.type === 'ref/resource' && typeof ref.uri === 'string') {
      const owner = this.resolveUri(ref.uri);
      up = owner.up;
      params.ref = { ...ref, uri: owner.uri };
    } else {
      throw new RpcError(ErrorCode.InvalidParams, 'completion/complete needs ref {type: "ref/prompt", name} or {type: "ref/resource", uri}');
    }
    // A server without completions simply has none to offer; hosts handle an empty list better than an error.
    if (!up.capabilities.completions) return { completion: { values: [], hasMore: false } };
    return this.forward({ session, hostRequestId, upstream: up, method: 'completion/complete', params, signal });
  }

  private async setLevel(session: SessionPort, params: Params): Promise<Result> {
    const level = params.level;
    if (logLevelRank(level) < 0) throw new RpcError(ErrorCode.InvalidParams, `Invalid log level: ${JSON.stringify(level)}`);
    session.logLevel = level as LogLevel;
    await this.syncLogLevels();
    return {};
  }

  /** Each upstream gets the most verbose level any session asked for. */
  private async syncLogLevels(): Promise<void> {
    let wanted: LogLevel | undefined;
    for (const s of this.sessions) {
      if (s.logLevel && (wanted === undefined || logLevelRank(s.logLevel) < logLevelRank(wanted))) wanted = s.logLevel;
    }
    if (!wanted) return;
    await Promise.all(
      this.live()
        .filter((up) => up.capabilities.logging && this.sentLevels.get(up.name) !== wanted)
        .map(async (up) => {
          this.sentLevels.set(up.name, wanted);
          await up.request('logging/setLevel', { level: wanted }).catch((err: Error) => up.log.warn({ err: err.message }, 'logging/setLevel failed'));
        }),
    );
  }

  private progressRelay(session: SessionPort, hostRequestId: JsonRpcId, params: Params): { onProgress?: (p: Params) => void } {
    const token = progressTokenOf(params);
    if (token === undefined) return {};
    return { onProgress: (p) => session.notify('notifications/progress', { ...p, progressToken: token }, hostRequestId) };
  }

  /** The base of the forward chain: one request to one upstream, tracked for reverse routing. */
  private async send(call: Call): Promise<Result> {
    const { upstream: up, session } = call;
    let users = this.inflight.get(up);
    if (!users) this.inflight.set(up, (users = new Map()));
    users.set(session, (users.get(session) ?? 0) + 1);
    this.lastUser.set(up, session);
    try {
      return await up.request(call.method, call.params, { signal: call.signal, onProgress: call.onProgress, context: call });
    } finally {
      const n = (users.get(session) ?? 1) - 1;
      if (n === 0) users.delete(session);
      else users.set(session, n);
    }
  }

  // ---- resolution ---------------------------------------------------------------------

  private async resolveNamed(kind: NamedKind, publicName: string): Promise<{ up: Upstream; name: string }> {
    let owner = this.names.resolve(kind, publicName) ?? this.parseByPrefix(publicName);
    if (!owner) {
      // A name from a list this process never served (say, a host that remembers tools across
      // an mcpmux restart): walk the lists once, then look again.
      await this.walk(kind === 'tools' ? this.kinds.tools : this.kinds.prompts);
      owner = this.names.resolve(kind, publicName);
    }
    const what = kind === 'tools' ? 'tool' : 'prompt';
    if (!owner) throw new RpcError(ErrorCode.InvalidParams, `Unknown ${what}: ${publicName}`);
    const up = this.upstreams.get(owner.server);
    if (!up || up.state !== 'ready') {
      throw new RpcError(MuxError.UpstreamUnavailable, `The ${what} ${publicName} belongs to server "${owner.server}", which is not available${up?.reason ? `: ${up.reason}` : ''}`);
    }
    if (kind === 'tools' && !this.toolFilters.get(up.name)!(owner.name)) throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${publicName}`);
    return { up, name: owner.name };
  }

  /** `fs__read_file` -> fs / read_file, when `fs` is a prefix in use. */
  private parseByPrefix(publicName: string): { server: string; name: string } | undefined {
    const sep = this.config.namespace.separator;
    const at = publicName.indexOf(sep);
    if (at <= 0) return undefined;
    const prefix = publicName.slice(0, at);
    for (const up of this.upstreams.values()) {
      if (up.config.prefix === prefix) return { server: up.name, name: publicName.slice(at + sep.length) };
    }
    return undefined;
  }

  /** Every tool as hosts see it, all pages walked (for `mcpmux tools`). */
  allTools(): Promise<Params[]> {
    return this.walk(this.kinds.tools);
  }

  private async walk(kind: ListKind): Promise<Params[]> {
    const signal = new AbortController().signal;
    const items: Params[] = [];
    let cursor: unknown;
    do {
      const page = await this.catalogue.list(kind, this.live(), cursor === undefined ? {} : { cursor }, signal);
      items.push(...(page[kind.key] as Params[]));
      cursor = page.nextCursor;
    } while (cursor !== undefined);
    return items;
  }

  private resolveUri(wrapped: string): { up: Upstream; uri: string } {
    const parts = unwrapUri(wrapped);
    const prefixed = parts && this.upstreams.get(parts.server);
    if (parts && prefixed && prefixed.config.resources.namespace === 'prefix') return this.available(prefixed, parts.uri, wrapped);
    // Passthrough upstreams keep their URIs; with exactly one, it owns every URI that is not prefixed.
    const passthrough = this.live().filter((u) => u.config.resources.namespace === 'passthrough' && u.capabilities.resources);
    if (passthrough.length === 1) return { up: passthrough[0]!, uri: wrapped };
    throw new RpcError(McpError.ResourceNotFound, `Resource not found: ${wrapped}`, { uri: wrapped });
  }

  private available(up: Upstream, uri: string, wrapped: string): { up: Upstream; uri: string } {
    if (up.state !== 'ready') {
      throw new RpcError(MuxError.UpstreamUnavailable, `Resource ${wrapped} belongs to server "${up.name}", which is not available${up.reason ? `: ${up.reason}` : ''}`);
    }
    return { up, uri };
  }

  // ---- upstream -> host ---------------------------------------------------------------

  private readonly listener: UpstreamListener = {
    notification: (up, n, context) => this.upstreamNotification(up, n, context as Call | undefined),
    request: (up, req, signal, context) => this.upstreamRequest(up, req, signal, context as Call | undefined),
    stateChanged: (up) => {
      this.catalogue.invalidate(up);
      this.sentLevels.delete(up.name);
      if (up.state === 'ready') {
        // A restarted or re-initialized upstream gets back what hosts had asked of it.
        void this.syncLogLevels();
        this.resubscribe(up);
      }
      // Hosts learn about servers that came or went through list_changed.
      const c = up.capabilities;
      if (c.tools) this.listChanged('tools');
      if (c.prompts) this.listChanged('prompts');
      if (c.resources) this.listChanged('resources');
    },
  };

  private resubscribe(up: Upstream): void {
    for (const key of this.subscriptions.keys()) {
      const [server, uri] = key.split('\0') as [string, string];
      if (server !== up.name) continue;
      up.request('resources/subscribe', { uri }).catch((err: Error) => up.log.warn({ err: err.message, uri }, 're-subscribe failed'));
    }
  }

  private upstreamNotification(up: Upstream, n: JsonRpcNotification, call: Call | undefined): void {
    const params = n.params ?? {};
    switch (n.method) {
      case 'notifications/tools/list_changed':
        this.catalogue.invalidate(up, 'tools');
        return this.listChanged('tools');
      case 'notifications/prompts/list_changed':
        this.catalogue.invalidate(up, 'prompts');
        return this.listChanged('prompts');
      case 'notifications/resources/list_changed':
        this.catalogue.invalidate(up, 'resources');
        return this.listChanged('resources');
      case 'notifications/resources/updated': {
        const uri = params.uri;
        if (typeof uri !== 'string') return;
        const subs = this.subscriptions.get(up.name + '\0' + uri);
        if (!subs) return;
        const shown = up.config.resources.namespace === 'prefix' ? wrapUri(up.name, uri) : uri;
        for (const s of subs) s.notify(n.method, { ...params, uri: shown });
        return;
      }
      case 'notifications/message': {
        const rank = logLevelRank(params.level);
        const logger = typeof params.logger === 'string' ? `${up.name}/${params.logger}` : up.name;
        for (const s of this.sessions) {
          if (s.logLevel === undefined || rank >= logLevelRank(s.logLevel)) s.notify(n.method, { ...params, logger });
        }
        return;
      }
      default:
        up.log.debug({ method: n.method }, 'notification from upstream not routed');
    }
  }

  /** Debounced `notifications/<kind>/list_changed` to every session. */
  private listChanged(kind: 'tools' | 'prompts' | 'resources'): void {
    this.pendingListChanged.set(kind, ++this.changeSeq);
    this.listChangedTimer ??= setTimeout(() => {
      this.listChangedTimer = undefined;
      const changes = [...this.pendingListChanged];
      this.pendingListChanged.clear();
      for (const [s, seen] of this.greeted) {
        for (const [kind, seq] of changes) if (seq > seen) s.notify(`notifications/${kind}/list_changed`);
      }
    }, LIST_CHANGED_DEBOUNCE_MS);
  }

  /**
   * A server-initiated request goes to the host session it belongs to, if that host can take it:
   * exactly the session of the call it came with (HTTP upstreams say which), else a best guess.
   */
  private async upstreamRequest(up: Upstream, req: JsonRpcRequest, signal: AbortSignal, call: Call | undefined): Promise<Result> {
    const needs = CAPABILITY_FOR[req.method];
    if (req.method === 'roots/list' && up.config.roots) return { roots: up.config.roots };
    if (!needs) throw new RpcError(ErrorCode.MethodNotFound, `Method not found: ${req.method}`);
    const session = call && this.sessions.has(call.session) ? call.session : this.sessionFor(up);
    if (!session) throw new RpcError(ErrorCode.MethodNotFound, `No host session is connected to take ${req.method}`);
    if (session.clientCapabilities[needs] === undefined) {
      throw new RpcError(ErrorCode.MethodNotFound, `The host does not support ${req.method} (it did not declare the ${needs} capability)`);
    }
    return session.request(req.method, req.params, signal, call?.hostRequestId);
  }

  /** The session with requests in flight to this upstream; else the one that used it last. */
  private sessionFor(up: Upstream): SessionPort | undefined {
    const users = this.inflight.get(up);
    if (users && users.size === 1) return users.keys().next().value;
    const last = this.lastUser.get(up);
    if (users && users.size > 1) up.log.info('several sessions have requests in flight; routing to the most recent');
    if (last && this.sessions.has(last)) return last;
    return this.sessions.size === 1 ? this.sessions.values().next().value : undefined;
  }
}

const CAPABILITY_FOR: Record<string, string> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
  'roots/list': 'roots',
};

function requireString(params: Params, key: string): string {
  const v = params[key];
  if (typeof v !== 'string') throw new RpcError(ErrorCode.InvalidParams, `params.${key} must be a string`);
  return v;
}

/** Waits for all, but no longer than `ms`. */
function boundedAll(ps: Promise<void>[], ms: number): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(resolve, ms);
    t.unref?.();
    void Promise.all(ps).then(() => {
      clearTimeout(t);
      resolve();
    });
  });
}
