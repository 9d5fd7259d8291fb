// Public names for tools and prompts (`<prefix><sep><name>`), and the name index that maps them
// back. Names stay within [A-Za-z0-9_.-] and within maxNameLength: a longer one is cut and given
// a short hash of the full name, so it is stable across restarts and across sessions.

import { createHash } from 'node:crypto';

export type NamedKind = 'tools' | 'prompts';

export interface Owner {
  server: string;
  /** The upstream's own name for the item. */
  name: string;
}

const SAFE = /[^A-Za-z0-9_.-]/g;
const HASH_LEN = 8;

export class NameIndex {
  private readonly byPublic: Record<NamedKind, Map<string, Owner>> = { tools: new Map(), prompts: new Map() };
  private readonly byOwner: Record<NamedKind, Map<string, string>> = { tools: new Map(), prompts: new Map() };
  private readonly byServer: Record<NamedKind, Map<string, string[]>> = { tools: new Map(), prompts: new Map() };
  /** Grows with every name published (for caches of what a server offers). */
  version = 0;

  constructor(
    private readonly separator: string,
    private readonly maxLength: number,
    private readonly onRename: (kind: NamedKind, owner: Owner, from: string, to: string) => void = () => {},
  ) {}

  /**
   * The public name for an upstream item, registered so `resolve` finds it. A name another
   * server already holds is renamed (the later one loses) rather than shadowing it.
   */
  publish(kind: NamedKind, server: string, prefix: string, name: string): string {
    const ownerKey = server + '\0' + name;
    const known = this.byOwner[kind].get(ownerKey);
    if (known !== undefined) return known;
    const wanted = this.fit(prefix === '' ? name : prefix + this.separator + name);
    let pub = wanted;
    for (let n = 2; this.byPublic[kind].has(pub); n++) pub = this.fit(`${wanted}_${n}`);
    if (pub !== wanted) this.onRename(kind, { server, name }, wanted, pub);
    this.byPublic[kind].set(pub, { server, name });
    this.byOwner[kind].set(ownerKey, pub);
    const own = this.byServer[kind].get(server);
    if (own) own.push(pub);
    else this.byServer[kind].set(server, [pub]);
    this.version++;
    return pub;
  }

  /** The public names published so far for a server's items. */
  publishedBy(kind: NamedKind, server: string): readonly string[] {
    return this.byServer[kind].get(server) ?? [];
  }

  resolve(kind: NamedKind, publicName: string): Owner | undefined {
    return this.byPublic[kind].get(publicName);
  }

  /** Replaces unsafe characters and shortens deterministically to maxLength. */
  private fit(name: string): string {
    const safe = name.replace(SAFE, '_');
    if (safe.length <= this.maxLength) return safe;
    const hash = createHash('sha256').update(name).digest('hex').slice(0, HASH_LEN);
    return safe.slice(0, this.maxLength - HASH_LEN - 1) + '_' + hash;
  }
}

/** `fs` + `file:///a` -> `fs+file:///a`. */
export function wrapUri(server: string, uri: string): string {
  return server + '+' + uri;
}

/** `<server><mark><rest>` -> { server, rest }, or undefined when there is no server part. */
export function splitServer(wrapped: string, mark: string): { server: string; rest: string } | undefined {
  const at = wrapped.indexOf(mark);
  if (at <= 0) return undefined;
  return { server: wrapped.slice(0, at), rest: wrapped.slice(at + mark.length) };
}

/** `fs+file:///a` -> { server: 'fs', rest: 'file:///a' }. */
export function unwrapUri(wrapped: string): { server: string; rest: string } | undefined {
  return splitServer(wrapped, '+');
}
