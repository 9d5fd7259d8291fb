// Public names for tools and prompts (`<prefix><sep><name>`), and the name index that maps them
// back. Names stay within [A-Za-z0-9_.-] and within maxNameLength: a longer one is cut and given
// a short hash of the full name, so it is stable across restarts and across sessions.

import { toolViewUris } from '../protocol/apps.js';
import { createHash } from 'node:crypto';

export type NamedKind = 'tools' | 'prompts';

export interface Owner {
  server: string;
  /** The upstream's own name for the item. */
  name: string;
}

const SAFE = /[^A-Za-z0-9_.-]/g;
const HASH_LEN = 8;

/**
 * Public names remembered per server and kind (tools, prompts) at most. An upstream that lists
 * ever-new names (every list_changed a new set) would otherwise grow the index forever: past
 * this, the name that server listed least recently is forgotten (see NameIndex.publish).
 */
export const MAX_NAMES_PER_SERVER = 100_000;

export interface NameIndexOptions {
  separator: string;
  maxLength: number;
  /** A server's place in the config: the earlier server keeps a contested name. */
  rank: (server: string) => number;
  /** A name was contested: `owner` shows as `to` instead of `from`. */
  onRename?: (kind: NamedKind, owner: Owner, from: string, to: string) => void;
  /** A name already shown to hosts now belongs to another item: lists must be rebuilt. */
  onMoved?: (kind: NamedKind) => void;
  /**
   * A server went past `maxPerServer` and its `count` least recently listed names were forgotten
   * (said once per trim, however many went): pages cached with them must go, so that a host
   * calling one makes a walk that publishes it again (if the server still lists it).
   */
  onForgotten?: (kind: NamedKind, server: string, count: number) => void;
  /** Default MAX_NAMES_PER_SERVER. */
  maxPerServer?: number;
}

/**
 * Public names, decided by config order rather than by which upstream answered first: when two
 * servers offer the same public name, the one earlier in the config keeps it and the other's
 * becomes `<name>_<its 1-based place in the config>`. So a restart, or upstreams answering in
 * another order, gives the same names to the same tools. (A name can still move when the
 * earlier server appears later than the other: then hosts are told with list_changed.)
 */
export class NameIndex {
  private readonly byPublic: Record<NamedKind, Map<string, Owner>> = { tools: new Map(), prompts: new Map() };
  private readonly byOwner: Record<NamedKind, Map<string, string>> = { tools: new Map(), prompts: new Map() };
  /** Per server, its public names, least recently listed first (a Set keeps insertion order). */
  private readonly byServer: Record<NamedKind, Map<string, Set<string>>> = { tools: new Map(), prompts: new Map() };
  private readonly maxPerServer: number;
  /** Grows with every name published, moved or forgotten (for caches of what a server offers). */
  version = 0;

  constructor(private readonly opts: NameIndexOptions) {
    this.maxPerServer = opts.maxPerServer ?? MAX_NAMES_PER_SERVER;
  }

  /**
   * The public name for an upstream item, registered so `resolve` finds it. Every call counts
   * as the item being listed now; a server past `maxPerServer` names forgets the one it listed
   * least recently (a name it no longer lists, unless one listing alone is bigger than that).
   */
  publish(kind: NamedKind, server: string, prefix: string, name: string): string {
    const ownerKey = server + '\0' + name;
    const known = this.byOwner[kind].get(ownerKey);
    if (known !== undefined) {
      const own = this.byServer[kind].get(server)!;
      own.delete(known);
      own.add(known);
      return known;
    }
    const wanted = this.fit(prefix === '' ? name : prefix + this.opts.separator + name);
    let pub = wanted;
    const holder = this.byPublic[kind].get(wanted);
    if (holder && this.opts.rank(server) < this.opts.rank(holder.server)) {
      // The earlier server takes its name back; the holder moves aside.
      const moved = this.freeName(kind, wanted, holder.server);
      this.place(kind, holder, moved);
      this.opts.onRename?.(kind, holder, wanted, moved);
      this.opts.onMoved?.(kind);
    } else if (holder) {
      pub = this.freeName(kind, wanted, server);
      this.opts.onRename?.(kind, { server, name }, wanted, pub);
    }
    this.place(kind, { server, name }, pub);
    this.trim(kind, server);
    return pub;
  }

  /** Registers `owner` under `pub` (replacing the name it had). */
  private place(kind: NamedKind, owner: Owner, pub: string): void {
    const ownerKey = owner.server + '\0' + owner.name;
    const old = this.byOwner[kind].get(ownerKey);
    this.byPublic[kind].set(pub, owner);
    this.byOwner[kind].set(ownerKey, pub);
    let own = this.byServer[kind].get(owner.server);
    if (!own) this.byServer[kind].set(owner.server, (own = new Set()));
    if (old !== undefined) own.delete(old);
    own.add(pub);
    this.version++;
  }

  /** A server past its cap forgets the names it listed least recently. */
  private trim(kind: NamedKind, server: string): void {
    const own = this.byServer[kind].get(server)!;
    let count = 0;
    while (own.size > this.maxPerServer) {
      const pub = own.values().next().value as string;
      own.delete(pub);
      const owner = this.byPublic[kind].get(pub);
      if (owner?.server === server) {
        this.byPublic[kind].delete(pub);
        this.byOwner[kind].delete(owner.server + '\0' + owner.name);
      }
      this.version++;
      count++;
    }
    if (count > 0) this.opts.onForgotten?.(kind, server, count);
  }

  /** `<wanted>_<place in the config>`, made unique if even that is taken. */
  private freeName(kind: NamedKind, wanted: string, server: string): string {
    const base = `${wanted}_${this.opts.rank(server) + 1}`;
    let pub = this.fit(base);
    for (let n = 2; this.byPublic[kind].has(pub); n++) pub = this.fit(`${base}_${n}`);
    return pub;
  }

  /** The public names published so far for a server's items (at most `maxPerServer`), not copied. */
  publishedBy(kind: NamedKind, server: string): Iterable<string> {
    return this.byServer[kind].get(server) ?? NONE;
  }

  /** How many public names a server's items have now. */
  count(kind: NamedKind, server: string): number {
    return this.byServer[kind].get(server)?.size ?? 0;
  }

  /**
   * Drops a server's names (a reload removed it, restarted it or changed its prefix), or every
   * name (the config order changed, so contested names may go to others): they are decided
   * afresh when lists are next built.
   */
  forget(server?: string): void {
    for (const kind of ['tools', 'prompts'] as const) {
      if (server === undefined) {
        this.byPublic[kind].clear();
        this.byOwner[kind].clear();
        this.byServer[kind].clear();
        continue;
      }
      for (const pub of this.byServer[kind].get(server) ?? []) {
        const owner = this.byPublic[kind].get(pub);
        if (owner?.server !== server) continue;
        this.byPublic[kind].delete(pub);
        this.byOwner[kind].delete(owner.server + '\0' + owner.name);
      }
      this.byServer[kind].delete(server);
    }
    this.version++;
  }

  /** The public name a server's item `name` is shown as, if it has been published. */
  publicNameOf(kind: NamedKind, server: string, name: string): string | undefined {
    return this.byOwner[kind].get(server + '\0' + name);
  }

  resolve(kind: NamedKind, publicName: string): Owner | undefined {
    return this.byPublic[kind].get(publicName);
  }

  /** Replaces unsafe characters and shortens deterministically to maxLength. */
  private fit(name: string): string {
    const safe = name.replace(SAFE, '_');
    if (safe.length <= this.opts.maxLength) return safe;
    const hash = createHash('sha256').update(name).digest('hex').slice(0, HASH_LEN);
    return safe.slice(0, this.opts.maxLength - HASH_LEN - 1) + '_' + hash;
  }
}

/** MCP Apps views (`ui://`): hosts only treat a resource as a view while its URI keeps the scheme. */
const UI = 'ui://';

export function isViewUri(uri: string): boolean {
  return uri.startsWith(UI);
}

/**
 * `fs` + `file:///a` -> `fs+file:///a`. A view keeps its scheme: `basic` + `ui://get-time/x`
 * -> `ui://basic+get-time/x` (server names are `[A-Za-z0-9_.-]`, so the first `+` splits).
 */
export function wrapUri(server: string, uri: string): string {
  return isViewUri(uri) ? `${UI}${server}+${uri.slice(UI.length)}` : server + '+' + uri;
}

/** `<server><mark><rest>` -> { server, rest }, or undefined when there is no server part. */
export function splitServer(wrapped: string, mark: string): { server: string; rest: string } | undefined {
  const at = wrapped.indexOf(mark);
  if (at <= 0) return undefined;
  return { server: wrapped.slice(0, at), rest: wrapped.slice(at + mark.length) };
}

/** `fs+file:///a` -> { server: 'fs', rest: 'file:///a' }; `ui://basic+get-time/x` -> { server: 'basic', rest: 'ui://get-time/x' }. */
export function unwrapUri(wrapped: string): { server: string; rest: string } | undefined {
  if (isViewUri(wrapped)) {
    const parts = splitServer(wrapped.slice(UI.length), '+');
    return parts && /^[A-Za-z0-9_.-]+$/.test(parts.server) ? { server: parts.server, rest: UI + parts.rest } : undefined;
  }
  return splitServer(wrapped, '+');
}


/** A tool as a host sees it: its view URIs namespaced like every resource URI (a copy; the upstream's page is shared). */
export function wrapToolView(tool: Record<string, unknown>, server: string): Record<string, unknown> {
  const meta = tool._meta as Record<string, unknown> | undefined;
  if (!meta || toolViewUris(tool).length === 0) return tool;
  const out: Record<string, unknown> = { ...meta };
  const ui = meta.ui as Record<string, unknown> | undefined;
  if (typeof ui?.resourceUri === 'string') out.ui = { ...ui, resourceUri: wrapUri(server, ui.resourceUri) };
  if (typeof meta['ui/resourceUri'] === 'string') out['ui/resourceUri'] = wrapUri(server, meta['ui/resourceUri'] as string);
  return { ...tool, _meta: out };
}

const NONE: ReadonlySet<string> = new Set();
