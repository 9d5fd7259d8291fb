// The five merged lists and how an upstream's items are shown to hosts: names published under
// the server's prefix, URIs namespaced, items a server's own allow/deny hides left out, and
// (after the shared page cache) what each client's policy hides.

import type { CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import type { Params } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import { Catalogue, offering, type ListKind, type ListTally, type PageFetch } from './catalogue.js';
import type { Governance, ItemKind } from './forward.js';
import { wrapId } from './ids.js';
import { toolViewUris } from '../protocol/apps.js';
import { wrapToolView, wrapUri, type NameIndex, type NamedKind } from './naming.js';
import { Walks, type WalkFailure } from './walks.js';
import { scopeOf, settingsClient } from '../config/types.js';
import { estimateTokens, toolDefinitionText } from '../surface/tokens.js';
import type { RequestEvent } from '../observe/events.js';

export type ListName = 'tools' | 'prompts' | 'resources' | 'templates' | 'tasks';

export class Lists {
  readonly catalogue: Catalogue;
  readonly kinds: Record<ListName, ListKind>;
  private readonly walks: Walks;
  private readonly seen = new Map<string, { gov: Governance; version: number; value: boolean }>();
  /**
   * Per server, the URIs its lists showed as it wrote them: its resources (for status, and to
   * route a passthrough URI) and its tools' MCP Apps views (a view reads its own URI).
   */
  private readonly uris = new Map<string, Set<string>>();
  private readonly views = new Map<string, Set<string>>();
  /**
   * Per server, each tool's estimated tokens as hosts are shown it (public name -> tokens): its
   * token cost in /status, for servers whose pages are not cached (no listChanged), estimated
   * in a window of COST_WINDOW_MS at most once per COST_EVERY_MS (costGates), not on every
   * host's tools/list. A server whose pages are cached is estimated when /status asks, from
   * those pages, once per list version (costMemo): its list path does no estimating at all.
   */
  private readonly toolTokens = new Map<string, Map<string, number>>();
  private readonly costGates = new Map<string, { until: number; reopen: number }>();
  private readonly costMemo = new WeakMap<Upstream, { version: string; tokens: number }>();
  /** `<server>\0<method>`: lists some upstream of that server has answered (so its count is known). */
  private readonly listed = new Set<string>();

  constructor(
    private readonly names: NameIndex,
    private readonly governance: () => Governance,
    fetch: PageFetch,
  ) {
    this.catalogue = new Catalogue(async (up, method, params, signal) => {
      const page = await fetch(up, method, params, signal);
      this.listed.add(`${up.name}\0${method}`);
      return page;
    });
    this.walks = new Walks(this.catalogue, (kind, up) => (kind.key === 'tools' || kind.key === 'prompts' ? this.names.count(kind.key, up.name) : 0));
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

  /**
   * One merged page of a list of named items or resources, as `client` may see it (and, for
   * tools, as the session's toolset narrows it).
   */
  page(
    list: Exclude<ListName, 'tasks'>,
    client: string,
    ups: readonly Upstream[],
    params: Params,
    signal: CancelSignal,
    toolset?: { name: string; allows: (name: string) => boolean },
    /** False when something outside the list (the tool surface) may show clients other lists. */
    sameForAll = true,
    event?: RequestEvent,
  ): Promise<Result> {
    const kind = this.kinds[list];
    const item: ItemKind = list === 'templates' ? 'resources' : list;
    const gov = this.governance();
    const policy = gov.filtersClients(item);
    // May be `public` (caching hints): only a list every client is shown alike, of shared upstreams
    // alone (not per-session, nor per-client: `sharing` alone does not say the latter, scopeOf does).
    const shared = sameForAll && !policy && !toolset && ups.every((u) => scopeOf(u.config) === 'shared');
    // Only an observed request is told whether its page came from the cache (RequestEvent.cacheHit).
    const tally: ListTally | undefined = event ? { fetched: false } : undefined;
    let answer: Promise<Result>;
    if (!policy && !toolset) answer = this.catalogue.list(kind, ups, params, signal, undefined, '', shared, tally);
    else {
      const key = list === 'resources' ? 'uri' : list === 'templates' ? 'uriTemplate' : 'name';
      // Keyed by client and toolset: a memoised page must never be served to a session that may see less.
      const visible = (it: Params): boolean => (!policy || gov.clientAllows(client, item, it[key] as string)) && (!toolset || toolset.allows(it[key] as string));
      answer = this.catalogue.list(kind, ups, params, signal, visible, `client:${settingsClient(client)}${toolset ? `\0toolset:${toolset.name}` : ''}`, false, tally);
    }
    return tally ? answer.then((r) => ((event!.cacheHit = !tally.fetched), r)) : answer;
  }

  /**
   * Whether `client` may hear from `up` at all (its log messages): policy shows it at least one
   * of the server's tools or prompts known so far, or none is known yet. Cached until a name
   * is published or the governance changes.
   */
  clientSees(client: string, up: Upstream): boolean {
    const gov = this.governance();
    if (!gov.filtersClients('tools') && !gov.filtersClients('prompts')) return true;
    // Every unmapped OIDC host sees what `oidc` sees: one entry for them all, not one per person.
    const key = `${settingsClient(client)}\0${up.name}`;
    const hit = this.seen.get(key);
    if (hit && hit.gov === gov && hit.version === this.names.version) return hit.value;
    let known = false;
    let value = false;
    for (const kind of ['tools', 'prompts'] as const) {
      for (const name of this.names.publishedBy(kind, up.name)) {
        known = true;
        if (gov.clientAllows(client, kind, name)) value = true;
        if (value) break;
      }
      if (value) break;
    }
    value ||= !known;
    this.seen.set(key, { gov, version: this.names.version, value });
    return value;
  }

  /**
   * How many tools, prompts and resources of a server hosts have been shown so far; null for a
   * list nothing has read from that server yet, neither a host nor a prefetch (status says "not
   * listed yet", not a false 0).
   * A list the server does not offer is 0.
   */
  counts(up: Upstream): { tools: number | null; toolTokens: number | null; prompts: number | null; resources: number | null } {
    const known = (kind: ListKind, n: () => number | null): number | null => {
      if (up.state === 'ready' && up.capabilities[kind.capability] === undefined) return 0;
      return this.listed.has(`${up.name}\0${kind.method}`) ? n() : null;
    };
    return {
      tools: known(this.kinds.tools, () => this.names.count('tools', up.name)),
      toolTokens: known(this.kinds.tools, () => this.tokensOf(up)),
      prompts: known(this.kinds.prompts, () => this.names.count('prompts', up.name)),
      resources: known(this.kinds.resources, () => this.uris.get(up.name)?.size ?? 0),
    };
  }

  /**
   * A shared upstream just became ready: its tools and prompts are listed now (first page each,
   * Catalogue.prefetch), so a host's first list finds them in memory instead of waiting on every
   * upstream. Resources and templates are left to hosts: enumerating them can be real work for
   * a server (a file tree, a database's tables) that many hosts never ask for. Resolves when
   * both are done or skipped; never rejects.
   */
  prefetch(up: Upstream): Promise<void> {
    return Promise.all(PREFETCHED.map((list) => this.catalogue.prefetch(this.kinds[list], up))).then(() => undefined);
  }

  /** A server removed or restarted (reload): what its lists showed is no longer known. */
  forget(server: string): void {
    this.uris.delete(server);
    this.toolTokens.delete(server);
    this.costGates.delete(server);
    this.views.delete(server);
    for (const kind of Object.values(this.kinds)) this.listed.delete(`${server}\0${kind.method}`);
  }

  /**
   * Name resolution: every live upstream's list walked lately, so that every name it has is in
   * the index (walks.ts says how often that reads the lists). Says which could not be read to the end.
   */
  search(list: NamedKind, ups: readonly Upstream[], signal: CancelSignal): Promise<WalkFailure[]> {
    return this.walks.ensure(this.kinds[list], ups, signal);
  }

  /**
   * Every item of a list as hosts are shown it, all pages of every live upstream walked, by
   * server in config order (`mcpmux tools`, a session's view). A server whose list cannot be
   * read to its end is left out and said in `failed`.
   */
  async all(
    list: ListName,
    ups: readonly Upstream[],
    signal: CancelSignal,
  ): Promise<{ servers: { server: string; items: Params[] }[]; failed: WalkFailure[] }> {
    const kind = this.kinds[list];
    const offered = offering(kind, ups);
    const walked = await Promise.all(
      offered.map(async (up) => {
        const items: Params[] = [];
        try {
          await this.catalogue.walk(kind, up, signal, (page) => {
            for (const item of page) items.push(item);
          });
          return { server: up.name, items };
        } catch (err) {
          if (signal.aborted) throw err;
          return { server: up.name, items: [], failed: { server: up.name, error: err as Error } };
        }
      }),
    );
    return {
      servers: walked.filter((w) => !w.failed).map((w) => ({ server: w.server, items: w.items })),
      failed: walked.flatMap((w) => (w.failed ? [w.failed] : [])),
    };
  }

  private presentNamed(kind: NamedKind, up: Upstream, item: Params): Params | undefined {
    if (typeof item.name !== 'string') return undefined;
    const gov = this.governance();
    if (!gov.serverAllows(up.name, kind, item.name)) return undefined;
    if (kind === 'tools' && gov.toolVisible && !gov.toolVisible(up.name, item)) return undefined;
    const shown = { ...item, name: this.names.publish(kind, up.name, up.config.prefix, item.name) };
    if (kind !== 'tools') return shown;
    // An MCP Apps view: its URI is shown namespaced like any resource, and remembered so that
    // a view asking for its own URI (it knows no other) finds its server.
    const views = toolViewUris(item);
    if (views.length === 0) return this.costed(up, shown);
    for (const uri of views) remember(this.views, up.name, uri);
    return this.costed(up, up.config.resources.namespace === 'prefix' ? wrapToolView(shown, up.name) : shown);
  }

  /**
   * Notes what a tool's definition costs a host's model (the same estimate auto weighs), as it
   * is shown: only for a server whose pages are not cached, and only in its costing window.
   */
  private costed(up: Upstream, tool: Params): Params {
    if (this.catalogue.announces(this.kinds.tools, up) || !this.costDue(up.name)) return tool;
    const server = up.name;
    let own = this.toolTokens.get(server);
    if (!own) this.toolTokens.set(server, (own = new Map()));
    own.set(tool.name as string, estimateTokens(toolDefinitionText(tool)));
    // Names a server no longer lists go once they outnumber the ones it does: bounded like the names.
    if (own.size > 2 * this.names.count('tools', server) + 64) {
      const live = new Set(this.names.publishedBy('tools', server));
      for (const name of own.keys()) if (!live.has(name)) own.delete(name);
    }
    return tool;
  }

  /** Whether a server's tools are estimated as they are shown now (its window, opened at most every COST_EVERY_MS). */
  private costDue(server: string): boolean {
    const now = Date.now();
    let gate = this.costGates.get(server);
    if (!gate || now >= gate.reopen) this.costGates.set(server, (gate = { until: now + COST_WINDOW_MS, reopen: now + COST_EVERY_MS }));
    return now < gate.until;
  }

  /**
   * A server's tools' estimated tokens: what its tools/list costs a host's model. A server whose
   * pages are cached but not all there now (evicted, or changed and not listed again): the last
   * estimate, or null (not known), never a fetch for it.
   */
  private tokensOf(up: Upstream): number | null {
    const cacheable = this.catalogue.announces(this.kinds.tools, up);
    const cached = cacheable ? this.catalogue.cachedItems(this.kinds.tools, up) : undefined;
    if (cacheable && !cached) return this.costMemo.get(up)?.tokens ?? null;
    if (cached) {
      const version = this.catalogue.version(this.kinds.tools, up);
      const memo = this.costMemo.get(up);
      if (memo?.version === version) return memo.tokens;
      let tokens = 0;
      for (const tool of cached) tokens += estimateTokens(toolDefinitionText(tool));
      this.costMemo.set(up, { version, tokens });
      return tokens;
    }
    const server = up.name;
    const own = this.toolTokens.get(server);
    let sum = 0;
    if (own) for (const name of this.names.publishedBy('tools', server)) sum += own.get(name) ?? 0;
    return sum;
  }

  /** Whether a server's tools open MCP Apps views (its views call tools by their own names). */
  hasViews(server: string): boolean {
    return (this.views.get(server)?.size ?? 0) > 0;
  }

  /** The servers (of `among`) whose lists showed `uri` as it is, as a resource or a tool's view. */
  ownersOf(uri: string, among: readonly string[]): string[] {
    return among.filter((server) => this.uris.get(server)?.has(uri) || this.views.get(server)?.has(uri));
  }

  private presentUri(up: Upstream, item: Params, key: 'uri' | 'uriTemplate'): Params | undefined {
    const uri = item[key];
    if (typeof uri !== 'string') return undefined;
    if (!this.governance().serverAllows(up.name, 'resources', uri)) return undefined;
    if (key === 'uri') remember(this.uris, up.name, uri);
    if (up.config.resources.namespace === 'passthrough') return item;
    return { ...item, [key]: wrapUri(up.name, uri) };
  }
}

/** The lists a shared upstream is asked for as soon as it is ready (Lists.prefetch): what hosts list first. */
const PREFETCHED: readonly ListName[] = ['tools', 'prompts'];

/** How long a server whose pages are not cached has its tools estimated as they are shown (one walk's pages). */
const COST_WINDOW_MS = 1000;
/** How often such a window opens at most: a host listing in a loop costs one estimate per this. */
const COST_EVERY_MS = 30_000;

/** URIs remembered per server at most: a server listing ever-new URIs cannot grow the sets without bound. */
const MAX_URIS_PER_SERVER = 100_000;

function remember(map: Map<string, Set<string>>, server: string, uri: string): void {
  let set = map.get(server);
  if (!set) map.set(server, (set = new Set()));
  if (set.size < MAX_URIS_PER_SERVER) set.add(uri);
}
