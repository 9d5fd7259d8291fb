// The tool surface a session is offered (docs/surface.md): every tool it may see listed ("all"),
// or the search surface ("search": a few tools listed plus search_tools and call_tool), picked
// per session (src/surface/decide.ts). And the session's toolset, which narrows what it sees
// and may call.
//
// Dispatch asks this file two things: what a session's tools/list is, and what a tools/call
// means (an answer of its own for search_tools, or the call to make: call_tool's inner call).
// It never calls anything itself, so policy, pinning, rate limits, audit and metrics judge the
// real tool on the one path every call takes.
//
// What a session may see (its "view": every tool policy and its toolset allow, all pages of
// every live upstream) is computed when a decision or a search needs it, shared by the sessions
// of the same client and toolset, and kept until a list changes (the catalogue's versions) or,
// for upstreams that never announce changes, for VIEW_FRESH_MS. The search index over it is
// built off the request path once a session is given the search surface.

import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { settingsClient, type Config, type ToolsetConfig } from '../config/types.js';
import { Canceller, cancelledError, NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import { materialise } from '../jsonrpc/opaque.js';
import type { Logger } from '../observe/logger.js';
import { isObject } from '../objects.js';
import type { Params } from '../protocol/mcp.js';
import { globsOf, type Matcher } from '../governance/glob.js';
import { decideBySize, decideWithoutList, type SurfaceDecision } from '../surface/decide.js';
import { aboutServer } from '../surface/meta-tools.js';
import { ToolIndex } from '../surface/search-index.js';
import { appOnly, buildToolView, searchableTools, searchSurfaceTools, searchToolResult, type ToolView } from '../surface/view.js';
import type { Upstream } from '../upstream/upstream.js';
import type { Governance } from './forward.js';
import type { Lists } from './lists.js';
import type { SessionPort } from './session-port.js';

/** How long a view of upstreams that never say their list changed is trusted before it is checked again. */
const VIEW_FRESH_MS = 30_000;
/** How soon a view that could not read some server's list to its end is made again. */
const INCOMPLETE_RETRY_MS = 5_000;
/**
 * Views kept at most, counted in tools (a view with its index costs some kilobytes per tool):
 * one per client, toolset and set of connections in use (sessions' own upstreams make their own).
 */
const MAX_VIEW_TOOLS = 20_000;

/** A session's toolset, ready to match public names. */
export interface ActiveToolset {
  name: string;
  config: ToolsetConfig;
  allows: Matcher;
}

/** What a session may see of the tools now, and how long that is known to hold. */
interface View extends ToolView {
  madeAt: number;
  /** Every upstream in it announces list changes (so its key's versions alone say when it is stale). */
  announced: boolean;
  /** Some server's list could not be read to its end: tried again soon. */
  incomplete: boolean;
  /** Of its tools' definitions: a view made again that says the same keeps the old one (and its index). */
  fingerprint: string;
  index?: Promise<ToolIndex>;
}

/** A view being made, and who waits for it. */
interface Making {
  made: Promise<View>;
  cancel: Canceller;
  /** Host requests waiting for it; a background refresh (`held`) is never cancelled. */
  waiting: number;
  held: boolean;
}

/** A session's decision and the view size it was made on (for /status). */
export interface SessionSurface extends SurfaceDecision {
  tools?: number;
  tokens?: number;
}

/** What a tools/call is, once the surface has looked at it. */
export type RoutedCall = { answer: Result } | { params: Params; via?: string };

export interface SurfaceDeps {
  config: () => Config;
  lists: Lists;
  live: (session: SessionPort | undefined) => Upstream[];
  governance: () => Governance;
  log: Logger;
}

export class Surfaces {
  /** By client, toolset and the connections' list versions (a list change makes another key). */
  private readonly views = new LRUCache<string, View>({ maxSize: MAX_VIEW_TOOLS, sizeCalculation: (v) => v.byName.size + 1 });
  /** Client, toolset and connections -> the key of its newest view: an older one (older versions) is dropped. */
  private readonly newest = new LRUCache<string, string>({ max: 4096 });
  /** Views being made, with how many host requests wait for each (when all have cancelled, so is the walk). */
  private readonly making = new Map<string, Making>();
  private readonly decided = new WeakMap<SessionPort, { decision: SessionSurface; view: View | undefined; config: Config }>();
  private readonly ids = new WeakMap<Upstream, number>();
  private nextId = 1;

  constructor(private readonly deps: SurfaceDeps) {}

  /** The session's toolset (validated where it was chosen: an unknown name never gets here). */
  toolset(session: SessionPort): ActiveToolset | undefined {
    const name = session.toolset;
    if (name === undefined) return undefined;
    const toolsets = this.deps.config().toolsets;
    const config = Object.hasOwn(toolsets, name) ? toolsets[name] : undefined;
    // A reload that removed the toolset: the session sees nothing rather than everything.
    if (!config) return { name, config: { tools: [] }, allows: () => false };
    return { name, config, allows: globsOf(config.tools) };
  }

  /** Refuses a tool outside the session's toolset, as the issue asks: -32602 naming why. */
  checkToolset(session: SessionPort, publicName: string): void {
    const ts = this.toolset(session);
    if (ts && !ts.allows(publicName)) {
      throw new RpcError(ErrorCode.InvalidParams, `Tool ${publicName} is not in this session's toolset "${ts.name}"`);
    }
  }

  /**
   * The session's tools/list: undefined means "the usual merged page" (all mode). Settled
   * at once, without a turn, where no list needs weighing (mode "all", a host that searches itself).
   */
  list(session: SessionPort, params: Params, signal: CancelSignal): Promise<Result | undefined> | undefined {
    if (this.withoutList(session, this.deps.config(), this.toolset(session))?.mode === 'all') return undefined;
    return this.decide(session, signal).then((decision) => {
      if (decision.mode === 'all') return undefined;
      if (params.cursor !== undefined) throw new RpcError(ErrorCode.InvalidParams, 'Invalid cursor: the search surface lists its tools on one page');
      return { tools: this.searchList(this.decided.get(session)!.view!) };
    });
  }

  /**
   * The decision that needs no list (a fixed mode, a host that searches itself), or undefined
   * when auto must weigh the session's view. An "all" is recorded for /status here: no view follows.
   */
  private withoutList(session: SessionPort, config: Config, ts: ActiveToolset | undefined): SurfaceDecision | undefined {
    const fixed = decideWithoutList(config.surface, ts?.name, ts?.config, session.clientInfo?.name);
    if (fixed?.mode === 'all') {
      const prev = this.decided.get(session);
      if (prev?.config !== config || prev.decision.reason !== fixed.reason) this.decided.set(session, { decision: fixed, view: undefined, config });
    }
    return fixed;
  }

  /** Whether every session is shown the same surface (mode "all"): then a tools/list may be the same for every client. */
  sameForAll(): boolean {
    return this.deps.config().surface.mode === 'all';
  }

  /** Whether a tools/call names a meta-tool (then `route` says what it means). */
  isMeta(name: unknown): boolean {
    const { searchToolName, callToolName } = this.deps.config().surface;
    return name === searchToolName || name === callToolName;
  }

  /**
   * A tools/call of a meta-tool: search_tools answered here, call_tool turned into the call it asks for (the
   * real tool's name and arguments in the same params, so `_meta`, `task` and any raw
   * argument bytes stay), anything else passed on as it is.
   */
  async route(session: SessionPort, params: Params, signal: CancelSignal): Promise<RoutedCall> {
    const name = params.name;
    const { searchToolName, callToolName } = this.deps.config().surface;
    const decision = await this.decide(session, signal);
    if (decision.mode !== 'search') return { params };
    const view = this.decided.get(session)!.view!;
    if (name === searchToolName) return { answer: await this.search(view, params) };
    const args = params.arguments;
    if (!isObject(args)) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: ${callToolName} needs arguments {name: string, arguments?: object}`);
    }
    const inner = args;
    if (typeof inner.name !== 'string') throw new RpcError(ErrorCode.InvalidParams, `Invalid params: ${callToolName}'s arguments.name must be a string (the tool's name)`);
    if (inner.arguments !== undefined && !isObject(inner.arguments)) {
      throw new RpcError(ErrorCode.InvalidParams, `Invalid params: ${callToolName}'s arguments.arguments must be an object (the tool's arguments)`);
    }
    if (inner.name === searchToolName || inner.name === callToolName) {
      throw new RpcError(ErrorCode.InvalidParams, `${callToolName} calls the servers' tools; call ${inner.name} directly`);
    }
    this.refuseAppOnly(session, inner.name);
    params.name = inner.name;
    if (inner.arguments === undefined) delete params.arguments;
    else params.arguments = inner.arguments;
    return { params, via: callToolName };
  }

  /**
   * call_tool never calls an app-only tool: that is its view's to call (directly). Checked by
   * public name, before the call and again once the name is resolved (a view's own name for it).
   */
  refuseAppOnly(session: SessionPort, publicName: string): void {
    const found = this.decided.get(session)?.view?.byName.get(publicName);
    if (found && appOnly(found.tool)) {
      const { callToolName } = this.deps.config().surface;
      throw new RpcError(ErrorCode.InvalidParams, `Tool ${publicName} is for its MCP Apps view only (its _meta.ui.visibility leaves out the model); it cannot be called through ${callToolName}`);
    }
  }

  /** What /status says of a session's surface (undefined until it listed or searched). */
  of(session: SessionPort): SessionSurface | undefined {
    return this.decided.get(session)?.decision;
  }

  // ---- deciding ---------------------------------------------------------------------------

  /**
   * The session's surface now. Kept per session until what it may see changes (another view),
   * the config changes (a reload), or its host's name does (a 2026-07-28 host names itself per request).
   */
  private async decide(session: SessionPort, signal: CancelSignal): Promise<SessionSurface> {
    const config = this.deps.config();
    const ts = this.toolset(session);
    const fixed = this.withoutList(session, config, ts);
    if (fixed?.mode === 'all') return fixed;
    const prev = this.decided.get(session);
    const view = await this.view(session, ts, signal);
    if (prev && prev.view === view && prev.config === config) return prev.decision;
    const size = { tools: view.byName.size, tokens: view.tokens };
    const decision: SessionSurface = { ...(fixed ?? decideBySize(config.surface, size)), ...size };
    this.decided.set(session, { decision, view, config });
    if (decision.mode === 'search') this.indexOf(view).catch(() => {}); // said in indexOf; a search says it too
    if (prev?.decision.mode !== decision.mode) {
      this.deps.log.debug({ session: session.id, client: session.client, toolset: ts?.name, surface: decision.mode, reason: decision.reason }, 'tool surface decided');
    }
    return decision;
  }

  private async view(session: SessionPort, ts: ActiveToolset | undefined, signal: CancelSignal): Promise<View> {
    const ups = this.deps.live(session);
    const kind = this.deps.lists.kinds.tools;
    const versions = ups.map((u) => `${this.idOf(u)}.${this.deps.lists.catalogue.version(kind, u)}`).join(',');
    // Keyed by whose policy applies: every unmapped OIDC host shares `oidc`'s views.
    const family = `${settingsClient(session.client)}\0${ts?.name ?? ''}\0${ups.map((u) => this.idOf(u)).join(',')}`;
    const key = `${family}\0${versions}`;
    const hit = this.views.get(key);
    if (hit) {
      // Served as it is; checked again beside the request, not in its way (nobody cancels that walk).
      if (this.stale(hit)) void this.build(key, family, session.client, ts, ups, NEVER).catch(() => {});
      return hit;
    }
    return this.build(key, family, session.client, ts, ups, signal);
  }

  private stale(view: View): boolean {
    const age = Date.now() - view.madeAt;
    return (view.incomplete && age > INCOMPLETE_RETRY_MS) || (!view.announced && age > VIEW_FRESH_MS);
  }

  /**
   * The view of `key`, made once for everyone asking meanwhile. The walk is the requests' own:
   * when every request waiting for it has been cancelled, it is cancelled too, and the
   * upstreams hear of it as they would from a host's own tools/list.
   */
  private build(key: string, family: string, client: string, ts: ActiveToolset | undefined, ups: Upstream[], signal: CancelSignal): Promise<View> {
    if (signal.aborted) return Promise.reject(cancelledError(signal));
    let making = this.making.get(key);
    if (!making) {
      const cancel = new Canceller();
      const done = (): void => {
        if (this.making.get(key) === making) this.making.delete(key);
      };
      const made = this.make(client, ts, ups, cancel).then(
        (view) => (done(), this.keep(key, family, view)),
        (err: unknown) => {
          done();
          throw err;
        },
      );
      making = { made, cancel, waiting: 0, held: false };
      this.making.set(key, making);
    }
    return this.wait(key, making, signal);
  }

  /** `making`'s view for one waiter; the last host request to give up cancels the walk. */
  private wait(key: string, making: Making, signal: CancelSignal): Promise<View> {
    if (signal === NEVER) {
      making.held = true;
      return making.made;
    }
    making.waiting++;
    return new Promise((resolve, reject) => {
      const off = signal.onCancel(() => {
        reject(cancelledError(signal));
        if (--making.waiting > 0 || making.held) return;
        if (this.making.get(key) === making) this.making.delete(key);
        making.cancel.cancel('every host request waiting for the tool list was cancelled');
      });
      making.made.then(
        (v) => (off(), resolve(v)),
        (e: unknown) => (off(), reject(e)),
      );
    });
  }

  /** A view made: the one kept for `key` (the old one, if it says the same). */
  private keep(key: string, family: string, made: View): View {
    const old = this.views.get(key);
    // The same tools as before: the old view stays (its decisions and its index with it).
    if (old && old.fingerprint === made.fingerprint && !made.incomplete) {
      old.madeAt = made.madeAt;
      old.incomplete = false;
      return old;
    }
    this.views.set(key, made);
    // The same sessions' view before their lists changed will not be asked for again.
    const before = this.newest.get(family);
    if (before !== undefined && before !== key) this.views.delete(before);
    this.newest.set(family, key);
    return made;
  }

  private async make(client: string, ts: ActiveToolset | undefined, ups: Upstream[], signal: CancelSignal): Promise<View> {
    const { servers, failed } = await this.deps.lists.all('tools', ups, signal);
    const gov = this.deps.governance();
    const view = buildToolView(
      servers,
      (name) => gov.clientAllows(client, 'tools', name) && (!ts || ts.allows(name)),
      (server) => {
        const up = ups.find((u) => u.name === server);
        return aboutServer(up?.info?.serverInfo, up?.info?.instructions);
      },
    );
    const announced = ups.every((u) => u.capabilities.tools === undefined || (u.capabilities.tools as Params).listChanged === true);
    const hash = createHash('sha1');
    for (const [name, { server, tool }] of view.byName) hash.update(`${server}\0${name}\0${JSON.stringify(tool)}\0`);
    return { ...view, madeAt: Date.now(), announced, incomplete: failed.length > 0, fingerprint: hash.digest('hex') };
  }

  // ---- the search surface -----------------------------------------------------------------

  /** The meta-tools, then every tool listed in search mode too: alwaysVisible ones and MCP Apps tools. */
  private searchList(view: View): Params[] {
    const { surface } = this.deps.config();
    return searchSurfaceTools(surface, view, globsOf(surface.alwaysVisible));
  }

  private async search(view: View, params: Params): Promise<Result> {
    // A long query may still be raw bytes (jsonrpc/opaque.ts): this one is read.
    materialise(params);
    return searchToolResult(this.deps.config().surface, view, await this.indexOf(view), params.arguments);
  }

  private indexOf(view: View): Promise<ToolIndex> {
    // Built on the next turn, off the request that decided: the answer to tools/list does not wait for it.
    view.index ??= new Promise((resolve, reject) =>
      setImmediate(() => {
        try {
          resolve(ToolIndex.build(searchableTools(view, this.deps.config().surface)));
        } catch (err) {
          this.deps.log.error({ err: (err as Error).message }, 'the tool search index could not be built');
          reject(err);
        }
      }),
    );
    return view.index;
  }

  private idOf(up: Upstream): number {
    let id = this.ids.get(up);
    if (id === undefined) this.ids.set(up, (id = this.nextId++));
    return id;
  }
}
