// Allow/deny policy for tools, prompts and resources, deny winning at every level:
// - global (`policy.tools|prompts|resources`) and per client (`policy.clients.<id>`), on public
//   names and on URIs as the host sees them;
// - per server (`mcpServers.<s>.tools|prompts|resources`), on the upstream's own names and URIs.
// An item that is not allowed is absent from lists (the router asks `serverAllows` and
// `clientAllows`), and a request that names it fails with -31002, which says "policy": the
// interceptor below stands in front of the upstream for every call that names an item.

import { settingsClient, type Config, type GlobList, type ItemLists } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import { publishDenied } from '../observe/events.js';
import { MuxError } from '../protocol/mcp.js';
import type { Interceptor, ItemKind, Target } from '../router/forward.js';
import { compileAllowDeny, remembered, type Matcher } from './glob.js';

const KINDS: readonly ItemKind[] = ['tools', 'prompts', 'resources'];
const WORD: Record<ItemKind, string> = { tools: 'Tool', prompts: 'Prompt', resources: 'Resource' };

type Compiled = Record<ItemKind, Matcher | undefined>;

export class Policy {
  private readonly global: Compiled;
  private readonly perClient = new Map<string, Compiled>();
  private readonly perServer = new Map<string, Compiled>();
  /** Per kind: whether any global or client list can say no (else lists skip the per-client pass). */
  private readonly restricts: Record<ItemKind, boolean>;

  constructor(config: Pick<Config, 'policy' | 'servers'>) {
    this.global = compile(config.policy);
    for (const [client, lists] of Object.entries(config.policy.clients)) this.perClient.set(client, compile(lists));
    for (const s of config.servers) this.perServer.set(s.name, compile(s));
    this.restricts = { tools: false, prompts: false, resources: false };
    for (const kind of KINDS) {
      this.restricts[kind] = this.global[kind] !== undefined || [...this.perClient.values()].some((c) => c[kind] !== undefined);
    }
  }

  /** Global and per-client lists, on a public name or a host-visible URI. */
  clientAllows(client: string, kind: ItemKind, name: string): boolean {
    if (!this.restricts[kind]) return true;
    const global = this.global[kind];
    if (global && !global(name)) return false;
    // An unmapped OIDC host (`oidc:<value>`) has the lists of `policy.clients.oidc`.
    const own = this.perClient.get(settingsClient(client))?.[kind];
    return own ? own(name) : true;
  }

  /** The global list alone (what every client is denied), on a public name or a host-visible URI. */
  globalAllows(kind: ItemKind, name: string): boolean {
    const global = this.global[kind];
    return global ? global(name) : true;
  }

  /** A server's own lists, on its own name or URI. */
  serverAllows(server: string, kind: ItemKind, upstreamName: string): boolean {
    const own = this.perServer.get(server)?.[kind];
    return own ? own(upstreamName) : true;
  }

  filtersClients(kind: ItemKind): boolean {
    return this.restricts[kind];
  }

  /** Stands in front of the upstream: a call that names a denied item never reaches it. */
  interceptor(): Interceptor {
    return (next) => (call) => {
      const { target, session } = call;
      if (!target || !session) return next(call);
      const refusal = this.refusal(session.client, call.upstream.name, target);
      if (refusal === undefined) return next(call);
      publishDenied({ sessionId: session.id, client: session.client, server: call.upstream.name, method: call.method, kind: target.kind, name: target.name });
      return Promise.reject(new RpcError(MuxError.PolicyDenied, `${WORD[target.kind]} ${target.name} is denied by policy${refusal}`));
    };
  }

  /** Undefined if allowed; else what to add to the message (the client, when its own list said no). */
  private refusal(client: string, server: string, t: Target): string | undefined {
    if (!this.serverAllows(server, t.kind, t.upstreamName)) return '';
    if (!this.restricts[t.kind]) return undefined;
    const global = this.global[t.kind];
    if (global && !global(t.name)) return '';
    const own = this.perClient.get(settingsClient(client))?.[t.kind];
    return own && !own(t.name) ? ` for client "${client}"` : undefined;
  }
}

/**
 * A matcher per kind, or undefined where the list allows everything (nothing to check). Each
 * keeps its answers per name (glob.ts: remembered), so a call to a known tool runs no RegExp.
 */
function compile(lists: ItemLists): Compiled {
  const one = (l: GlobList): Matcher | undefined => (l.allow.includes('*') && l.deny.length === 0 ? undefined : remembered(compileAllowDeny(l)));
  return { tools: one(lists.tools), prompts: one(lists.prompts), resources: one(lists.resources) };
}
