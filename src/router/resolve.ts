// From a name or URI a host used to the upstream connection that owns it and the name the
// upstream knows it by. Errors say what is wrong: unknown, or owned by a server that is down.

import type { Config } from '../config/types.js';
import type { CancelSignal } from '../jsonrpc/cancel.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import { McpError, MuxError } from '../protocol/mcp.js';
import { BROWSER_OPEN, type Upstream } from '../upstream/upstream.js';
import type { Governance } from './forward.js';
import type { Lists } from './lists.js';
import type { WalkFailure } from './walks.js';
import { isViewUri, unwrapUri, wrapUri, type NameIndex, type NamedKind } from './naming.js';
import type { UpstreamPool } from './pool.js';
import type { SessionPort } from './session-port.js';

export interface Resolved {
  up: Upstream;
  /** The upstream's own name or URI. */
  name: string;
  /** The name hosts are shown, when the request used another (a view's call): policy, limits and audit go by it. */
  shown?: string;
}

export class Resolver {
  constructor(
    private readonly config: () => Config,
    private readonly pool: UpstreamPool,
    private readonly names: NameIndex,
    private readonly lists: Lists,
    private readonly governance: () => Governance,
  ) {}

  /** The live connections a session uses, in config order. */
  live(session: SessionPort | undefined): Upstream[] {
    return this.pool.forSession(session).filter((u) => u.state === 'ready');
  }

  /**
   * The usual case of `named`, decided without a promise turn: a listed name whose server is
   * ready. Undefined for everything else (the caller then asks `named`).
   */
  listed(session: SessionPort, kind: NamedKind, publicName: string): Resolved | undefined {
    const owner = this.names.resolve(kind, publicName);
    if (!owner) return undefined;
    const up = this.pool.get(session, owner.server);
    return up?.state === 'ready' ? { up, name: owner.name } : undefined;
  }

  /** `signal`: the host's request; cancelling it ends a walk of the lists no other call waits on. */
  async named(session: SessionPort, kind: NamedKind, publicName: string, signal: CancelSignal): Promise<Resolved> {
    let owner = this.names.resolve(kind, publicName);
    // An MCP Apps view's call by its server's own name: known without walking every list.
    const viewed = owner || kind !== 'tools' ? [] : this.viewOwners(session, publicName);
    if (viewed.length === 1) return viewed[0]!;
    let unread: readonly WalkFailure[] = NO_FAILURES;
    if (!owner) {
      // Not in any list served so far (say, a host that remembers tools across an mcpmux
      // restart, or a name that does not exist): have the lists walked (or walked lately,
      // walks.ts), then look again.
      unread = await this.lists.search(kind, this.live(session), signal);
      owner = this.names.resolve(kind, publicName);
    }
    const what = kind === 'tools' ? 'tool' : 'prompt';
    const byPrefix = owner ? undefined : this.serverByPrefix(session, publicName);
    const up = owner ? this.pool.get(session, owner.server) : byPrefix?.up;
    // Down, or (unknown name) its prefix names a server that is down: say so rather than "unknown".
    // In mcpmux stdio, one that needs a login opens it and the call waits for it (bounded).
    if (up && up.state !== 'ready') {
      // A connection acting for the host, down for want of its identity: this session's starts it
      // again, and the call waits for that start (bounded by timeouts.startupMs, or the host's cancel).
      const again = up.retryWithSubject();
      if (again) await untilCancelled(again, signal);
      const login = isReady(up) ? 'ready' : await up.loginLanded(signal);
      if (login !== 'ready') this.unavailable(up, `The ${what} ${publicName}`, login === 'open' ? `; ${BROWSER_OPEN}` : '');
      // Its lists may be news now: look again.
      if (!owner) return this.named(session, kind, publicName, signal);
    }
    if (owner && up) return { up, name: owner.name };
    // A name the server's own allow/deny hides, or a tool that pinning holds, is never
    // published, so it has no owner; it still goes to the forward step, which refuses it and says why.
    const gov = this.governance();
    if (byPrefix && (!gov.serverAllows(byPrefix.up.name, kind, byPrefix.rest) || (kind === 'tools' && gov.toolHeld?.(byPrefix.up.name, byPrefix.rest)))) {
      return { up: byPrefix.up, name: byPrefix.rest };
    }
    // A list read only in part may hold the name past where reading stopped: say which.
    const partly = unread.length === 0 ? '' : `; not every list could be read: ${unread.map((f) => f.error.message).join('; ')}`;
    if (!owner && !byPrefix && kind === 'tools') return this.viewCall(session, publicName, partly);
    throw new RpcError(ErrorCode.InvalidParams, `Unknown ${what}: ${publicName}${partly}`);
  }

  /**
   * An MCP Apps view calls its server's tools by the names it knows, the server's own, and the
   * host passes them on as they are. Among servers that open views, one with a tool of that own
   * name owns the call; several cannot be told apart, and the error names them.
   */
  private viewCall(session: SessionPort, ownName: string, partly: string): Resolved {
    const owners = this.viewOwners(session, ownName);
    if (owners.length === 1) return owners[0]!;
    if (owners.length > 1) {
      const servers = owners.map((o) => o.up.name);
      throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${ownName}; servers ${servers.join(', ')} each have a tool of that name, so call it by its namespaced name`, { candidates: owners.map((o) => o.shown) });
    }
    throw new RpcError(ErrorCode.InvalidParams, `Unknown tool: ${ownName}${partly}`);
  }

  /** The live servers that open views and published a tool whose own name is `ownName`. */
  private viewOwners(session: SessionPort, ownName: string): Array<Resolved & { shown: string }> {
    return this.live(session).flatMap((up) => {
      const shown = this.lists.hasViews(up.name) ? this.names.publicNameOf('tools', up.name, ownName) : undefined;
      return shown === undefined ? [] : [{ up, name: ownName, shown }];
    });
  }

  uri(session: SessionPort, wrapped: string): Resolved {
    const parts = unwrapUri(wrapped);
    const prefixed = parts && this.pool.get(session, parts.server);
    if (parts && prefixed && prefixed.config.resources.namespace === 'prefix') {
      return { up: this.available(prefixed, `Resource ${wrapped}`), name: parts.rest };
    }
    // A URI as its server wrote it: a passthrough server's, or an MCP Apps view's own `ui://`
    // URI (a view knows no other). The server whose lists showed it owns it; two such servers
    // cannot be told apart.
    const live = this.live(session);
    const passthrough = live.filter((u) => u.config.resources.namespace === 'passthrough' && u.capabilities.resources);
    const view = isViewUri(wrapped);
    const among = view ? live : passthrough;
    const owners = this.lists.ownersOf(wrapped, among.map((u) => u.name));
    const up = owners.length === 1 ? among.find((u) => u.name === owners[0])! : undefined;
    if (up) return { up, name: wrapped, shown: up.config.resources.namespace === 'prefix' ? wrapUri(up.name, wrapped) : wrapped };
    if (owners.length > 1) {
      const hint = view ? '; read it by its namespaced URI (ui://<server>+...)' : '';
      throw new RpcError(ErrorCode.InvalidParams, `Resource ${wrapped} is served by several servers (${owners.join(', ')})${hint}`, { uri: wrapped, servers: owners });
    }
    // A URI no list showed (a template's, say) goes to the one passthrough server, if there is one.
    if (passthrough.length === 1) return { up: passthrough[0]!, name: wrapped };
    throw new RpcError(McpError.ResourceNotFound, `Resource not found: ${wrapped}`, { uri: wrapped });
  }

  available(up: Upstream, what: string): Upstream {
    if (up.state !== 'ready') this.unavailable(up, what);
    return up;
  }

  private unavailable(up: Upstream, what: string, more = ''): never {
    throw new RpcError(MuxError.UpstreamUnavailable, `${what} belongs to server "${up.name}", which is not available${up.reason ? `: ${up.reason}` : ''}${more}`);
  }

  /** The connection whose prefix starts `publicName` (`fs__read_file` -> fs), and the rest. */
  private serverByPrefix(session: SessionPort, publicName: string): { up: Upstream; rest: string } | undefined {
    const config = this.config();
    const sep = config.namespace.separator;
    const at = publicName.indexOf(sep);
    if (at <= 0) return undefined;
    const prefix = publicName.slice(0, at);
    const cfg = config.servers.find((s) => !s.disabled && s.prefix === prefix);
    const up = cfg && this.pool.get(session, cfg.name);
    return up && { up, rest: publicName.slice(at + sep.length) };
  }
}

/** Read afresh (a start may have finished since the caller last looked). */
const isReady = (up: Upstream): boolean => up.state === 'ready';

/** `p` settled, or `signal` cancelled first. */
function untilCancelled(p: Promise<void>, signal: CancelSignal): Promise<void> {
  return new Promise((resolve) => {
    const off = signal.onCancel(resolve);
    void p.finally(() => {
      off();
      resolve();
    });
  });
}

/** No list left unread (most calls): shared, not allocated per call. */
const NO_FAILURES: readonly WalkFailure[] = [];
