// From a name or URI a host used to the upstream connection that owns it and the name the
// upstream knows it by. Errors say what is wrong: unknown, or owned by a server that is down.

import type { Config } from '../config/types.js';
import { ErrorCode, RpcError } from '../jsonrpc/message.js';
import { McpError, MuxError } from '../protocol/mcp.js';
import type { Upstream } from '../upstream/upstream.js';
import type { Governance } from './forward.js';
import type { Lists } from './lists.js';
import { unwrapUri, type NameIndex, type NamedKind } from './naming.js';
import type { UpstreamPool } from './pool.js';
import type { SessionPort } from './session-port.js';

export interface Resolved {
  up: Upstream;
  /** The upstream's own name or URI. */
  name: string;
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

  async named(session: SessionPort, kind: NamedKind, publicName: string): Promise<Resolved> {
    let owner = this.names.resolve(kind, publicName);
    if (!owner) {
      // Not in any list served so far (say, a host that remembers tools across an mcpmux
      // restart, or a name that does not exist): walk the lists once, then look again.
      await this.lists.walk(kind, () => this.live(session));
      owner = this.names.resolve(kind, publicName);
    }
    const what = kind === 'tools' ? 'tool' : 'prompt';
    const byPrefix = owner ? undefined : this.serverByPrefix(session, publicName);
    const up = owner ? this.pool.get(session, owner.server) : byPrefix?.up;
    // Down, or (unknown name) its prefix names a server that is down: say so rather than "unknown".
    if (up && up.state !== 'ready') this.unavailable(up, `The ${what} ${publicName}`);
    if (owner && up) return { up, name: owner.name };
    // A name the server's own allow/deny hides is never published, so it has no owner; it still
    // goes to the forward step, where policy refuses it and says so.
    if (byPrefix && !this.governance().serverAllows(byPrefix.up.name, kind, byPrefix.rest)) return { up: byPrefix.up, name: byPrefix.rest };
    // Likewise a tool that pinning holds: the forward step refuses it and says why.
    if (byPrefix && kind === 'tools' && this.governance().toolHeld?.(byPrefix.up.name, byPrefix.rest)) return { up: byPrefix.up, name: byPrefix.rest };
    throw new RpcError(ErrorCode.InvalidParams, `Unknown ${what}: ${publicName}`);
  }

  uri(session: SessionPort, wrapped: string): Resolved {
    const parts = unwrapUri(wrapped);
    const prefixed = parts && this.pool.get(session, parts.server);
    if (parts && prefixed && prefixed.config.resources.namespace === 'prefix') {
      return { up: this.available(prefixed, `Resource ${wrapped}`), name: parts.rest };
    }
    // Passthrough upstreams keep their URIs; with exactly one, it owns every URI that is not prefixed.
    const passthrough = this.live(session).filter((u) => u.config.resources.namespace === 'passthrough' && u.capabilities.resources);
    if (passthrough.length === 1) return { up: passthrough[0]!, name: wrapped };
    throw new RpcError(McpError.ResourceNotFound, `Resource not found: ${wrapped}`, { uri: wrapped });
  }

  available(up: Upstream, what: string): Upstream {
    if (up.state !== 'ready') this.unavailable(up, what);
    return up;
  }

  private unavailable(up: Upstream, what: string): never {
    throw new RpcError(MuxError.UpstreamUnavailable, `${what} belongs to server "${up.name}", which is not available${up.reason ? `: ${up.reason}` : ''}`);
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
