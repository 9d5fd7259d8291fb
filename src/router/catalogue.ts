// The four merged lists (tools, prompts, resources, resource templates) and their pagination.
//
// A host page is built by walking the upstreams in config order from where the host's cursor
// points, taking ONE page from each, and stopping at the first upstream that has more: its
// cursor goes into ours. So no request ever holds more than one page per upstream, and paging
// upstreams are paged through rather than read whole.
//
// Upstream pages are cached (already namespaced) for upstreams that promise `listChanged`;
// the cache key carries a generation that a list_changed notification bumps. The cache and the
// memo of whole host pages are bounded by what they hold (JSON characters), not by entries: a
// host paging on through an endless list of large items finds them at their budgets, evicting
// the oldest pages, never growing with the pages.

import { NEVER, type CancelSignal } from '../jsonrpc/cancel.js';
import type { Result } from '../jsonrpc/endpoint.js';
import { LRUCache } from 'lru-cache';
import { RpcError, ErrorCode } from '../jsonrpc/message.js';
import type { Params } from '../protocol/mcp.js';
import type { ListHints } from '../protocol/modern.js';
import type { Upstream } from '../upstream/upstream.js';
import { scopeOf } from '../config/types.js';
import { decodeCursor, encodeCursor, type CursorState } from './cursor.js';
import { markStable } from '../jsonrpc/framing.js';
import { nextCursorOf, walkPages } from '../upstream/paging.js';
import { shareStrings } from './shared-strings.js';

export type ListMethod = 'tools/list' | 'prompts/list' | 'resources/list' | 'resources/templates/list' | 'tasks/list';

export interface ListKind {
  method: ListMethod;
  /** Key of the item array in the result. */
  key: 'tools' | 'prompts' | 'resources' | 'resourceTemplates' | 'tasks';
  /** Server capability that offers this list. */
  capability: 'tools' | 'prompts' | 'resources' | 'tasks';
  /** Turns an upstream item into what hosts see (a new object), or undefined to hide it. */
  present(up: Upstream, item: Params): Params | undefined;
}

/**
 * What a list cost, for whoever asked to know (the request's record, events.ts): set when
 * some page of it was not in the cache and an upstream was asked (or waited on).
 */
export interface ListTally {
  fetched: boolean;
}

/** How the catalogue asks an upstream for one page (through the router's forward step). */
export type PageFetch = (up: Upstream, method: ListMethod, params: Params, signal: CancelSignal | undefined) => Promise<Result>;

interface Page {
  /** What hosts are shown of it. */
  items: Params[];
  next: string | undefined;
  /** How many items the upstream listed (hidden ones included). */
  listed: number;
  /** Its size in the cache (JSON characters of its items and cursors), once cached. */
  size?: number;
  /** Until when the upstream said it stays fresh (its `ttlMs` from when it answered); none: no hint. */
  freshUntil?: number;
  /** The upstream said `cacheScope: "public"` (the same page for every client). */
  public: boolean;
}

/** A merged page's hints, and (memoised pages) when the memo ends: the first ttlMs end of its pages kept for their hint alone (Infinity: none). */
const hints = new WeakMap<object, ListHints & { memoEnds: number }>();

/** The hints of a result the catalogue built (undefined: not a merged list page). */
export function listHintsOf(result: object): ListHints | undefined {
  return hints.get(result);
}

/** The upstreams of `ups` that can be asked for `kind` now: ready, and offering its capability. */
export function offering(kind: ListKind, ups: readonly Upstream[]): Upstream[] {
  return ups.filter((u) => u.state === 'ready' && u.capabilities[kind.capability] !== undefined);
}

/** A memoised host page, and what it was made of: the connections (by id) and their list generations then. */
interface Memo {
  page: Params;
  method: ListMethod;
  epoch: number;
  made: Map<number, number>;
}

/** Upstream pages cached, at most, in JSON characters of what they hold (their cursors included). */
export const MAX_CACHED_PAGE_CHARS = 32 * 1024 * 1024;
/** Whole host pages memoised, at most, in JSON characters of the upstream pages they are made of. */
export const MAX_MEMO_CHARS = 16 * 1024 * 1024;
/** What an entry costs beyond its contents (key, bookkeeping), so empty pages are not free. */
const ENTRY_CHARS = 256;

export class Catalogue {
  private readonly cache = new LRUCache<string, Page>({ maxSize: MAX_CACHED_PAGE_CHARS, sizeCalculation: (p) => p.size ?? ENTRY_CHARS });
  private readonly inflight = new Map<string, Promise<Page>>();
  /** Reasons a list left a server out, said already (once each, not on every list). */
  private readonly saidSkips = new Set<string>();
  /** Whole host pages built only from cached upstream pages, by everything they depend on. */
  private readonly merged = new LRUCache<string, Memo>({ max: 64, maxSize: MAX_MEMO_CHARS });
  /** Per upstream connection and list: bumped by list_changed, so old pages are never served. */
  private readonly generations = new WeakMap<Upstream, Record<string, number>>();
  private readonly ids = new WeakMap<Upstream, number>();
  private nextId = 1;
  /** Bumped by `reset`: pages fetched before it are never served after it. */
  private epoch = 0;

  constructor(private readonly fetchPage: PageFetch) {}

  /** Forget every cached page (what items are shown changed, e.g. a server's allow/deny lists). */
  reset(): void {
    this.epoch++;
    this.cache.clear();
    this.merged.clear();
  }

  /** Forget cached pages of one list (or all lists) of an upstream. */
  invalidate(up: Upstream, capability?: ListKind['capability']): void {
    const gen = this.generationsOf(up);
    for (const k of capability ? [capability] : ['tools', 'prompts', 'resources', 'tasks']) gen[k] = (gen[k] ?? 0) + 1;
  }

  /** One merged host page. `upstreams` are the live ones for this session, in config order. */
  async list(
    kind: ListKind,
    upstreams: readonly Upstream[],
    params: Params | undefined,
    signal: CancelSignal,
    /** Per-host visibility (policy), applied after the cache, and a name for it (the client). */
    visible?: (item: Params) => boolean,
    visibleKey = '',
    /** The page is the same for every client (no policy, toolset, surface or session's own upstream shapes it). */
    shared = false,
    tally?: ListTally,
  ): Promise<Params> {
    // Checked before the memo: a bad cursor (123, "", null) must not find the first page there.
    const from = params?.cursor === undefined ? undefined : decodeCursor(kind.method, params.cursor);
    const offered = offering(kind, upstreams);
    // A page that only cached upstream pages go into is the same object until one of them
    // changes: reuse it, and with it its serialisation (markStable).
    const memoKey = offered.every((u) => this.cacheable(kind, u)) ? this.memoKey(kind, offered, params?.cursor as string | undefined, `${visibleKey}${shared ? '\0shared' : ''}`) : undefined;
    const memo = memoKey === undefined ? undefined : this.merged.get(memoKey)?.page;
    // A memo made of pages kept only for their ttlMs lasts as long as the shortest of them.
    if (memo && !(hints.get(memo)!.memoEnds <= Date.now())) return memo;
    const epoch = this.epoch;
    const made = memoKey === undefined ? undefined : this.versionsOf(kind, offered);
    const { result, size, freshUntil, allPublic, expires } = await this.build(kind, offered, from, signal, visible, tally);
    hints.set(result, { freshUntil, public: shared && allPublic, memoEnds: expires });
    if (memoKey !== undefined) {
      markStable(result);
      this.dropDeadMemos(kind, offered);
      this.merged.set(memoKey, { page: result, method: kind.method, epoch, made: made! }, { size: size + memoKey.length + ENTRY_CHARS });
    }
    return result;
  }

  /**
   * Forgets the memoised pages of a list that no host can be served again, with their bytes
   * (a 2 000-tool page is ~3 MB): those made of a list version since replaced (list_changed, a
   * restart), and those without a connection that every session lists now (made while some
   * shared upstreams were still starting: 2-3 of them stayed behind each 20-server start).
   * Pages of sessions' own connections (per session, per client) are left to the LRU: another
   * session may still be served its own.
   */
  private dropDeadMemos(kind: ListKind, offered: readonly Upstream[]): void {
    const now = this.versionsOf(kind, offered);
    const everyone = offered.filter((u) => scopeOf(u.config) === 'shared').map((u) => this.idOf(u));
    const dead: string[] = [];
    for (const [key, m] of this.merged.entries()) {
      if (m.method !== kind.method) continue;
      let gone = m.epoch !== this.epoch || everyone.some((id) => !m.made.has(id));
      for (const [id, gen] of m.made) if (!gone && now.has(id) && now.get(id) !== gen) gone = true;
      if (gone) dead.push(key);
    }
    for (const key of dead) this.merged.delete(key);
  }

  /** Each connection's (by id) list generation now. */
  private versionsOf(kind: ListKind, ups: readonly Upstream[]): Map<number, number> {
    return new Map(ups.map((u) => [this.idOf(u), this.generationsOf(u)[kind.capability] ?? 0]));
  }

  private memoKey(kind: ListKind, offering: readonly Upstream[], cursor: string | undefined, visibleKey: string): string {
    let key = `${this.epoch}|${kind.method}|${cursor ?? ''}|${visibleKey}|`;
    for (const u of offering) key += `${this.idOf(u)}.${this.generationsOf(u)[kind.capability] ?? 0},`;
    return key;
  }

  /**
   * Whether an upstream's pages are kept: it says when its list changes (kept until it does),
   * or its pages say how long they stay fresh (`ttlMs` above 0: kept that long; see page()).
   */
  private cacheable(kind: ListKind, up: Upstream): boolean {
    return this.announces(kind, up) || (this.ttlSeen.get(up)?.[kind.capability] ?? false);
  }

  /** Whether the upstream says when this list changes (listChanged): its pages are then kept until it does. */
  announces(kind: ListKind, up: Upstream): boolean {
    return (up.capabilities[kind.capability] as Params | undefined)?.listChanged === true;
  }

  /** Upstreams whose last page of a list came with a ttlMs above 0 (so the next ones are worth keeping). */
  private readonly ttlSeen = new WeakMap<Upstream, Record<string, boolean>>();

  private async build(
    kind: ListKind,
    offering: readonly Upstream[],
    from: CursorState | undefined,
    signal: CancelSignal,
    visible: ((item: Params) => boolean) | undefined,
    tally: ListTally | undefined,
  ): Promise<{ result: Params; size: number; freshUntil: number; allPublic: boolean; expires: number }> {
    const now = Date.now();
    let freshUntil = Infinity;
    let allPublic = true;
    let expires = Infinity;
    const hinted = (p: Page, up: Upstream): Page => {
      freshUntil = Math.min(freshUntil, p.freshUntil ?? now);
      allPublic &&= p.public;
      if (!this.announces(kind, up) && p.freshUntil !== undefined) expires = Math.min(expires, p.freshUntil);
      return p;
    };
    const out = (result: Params, size: number) => ({ result, size, freshUntil: freshUntil === Infinity ? now : freshUntil, allPublic, expires });
    let start = 0;
    let innerCursor: string | undefined;
    if (from !== undefined) {
      start = offering.findIndex((u) => u.name === from.server);
      if (start < 0) throw new RpcError(ErrorCode.InvalidParams, `Invalid cursor: server "${from.server}" is no longer available`);
      innerCursor = from.cursor;
    }
    if (offering.length === 0) return out({ [kind.key]: [] }, 0);

    // The cursor's upstream first: if it has more pages, that page is the whole answer.
    const take = (items: Params[]): Params[] => (visible ? items.filter(visible) : items);
    // A first upstream that fails is left out like any other (a host walking its later pages
    // goes on with the next servers); only the host's own cancellation ends the list.
    const first = hinted(
      await this.page(kind, offering[start]!, innerCursor, signal, tally).catch((err) => {
        if (signal.aborted) throw err;
        return this.skip(offering[start]!, kind, err);
      }),
      offering[start]!,
    );
    let size = first.size ?? 0;
    if (first.next !== undefined) return out(this.result(kind, take(first.items), offering[start]!, first.next), size);

    // Otherwise the following upstreams' first pages, fetched together, until one has more.
    const rest = offering.slice(start + 1);
    const pages = await Promise.all(rest.map(async (u) => hinted(await this.page(kind, u, undefined, signal, tally).catch((err) => this.skip(u, kind, err)), u)));
    const items = take(first.items).slice();
    for (let i = 0; i < pages.length; i++) {
      const p = pages[i]!;
      size += p.size ?? 0;
      for (const item of take(p.items)) items.push(item);
      if (p.next !== undefined) return out(this.result(kind, items, rest[i]!, p.next), size);
    }
    return out({ [kind.key]: items }, size);
  }

  private result(kind: ListKind, items: Params[], up: Upstream, next: string): Params {
    return { [kind.key]: items, nextCursor: encodeCursor({ list: kind.method, server: up.name, cursor: next }) };
  }

  /**
   * A dead upstream must not take the whole list down with it: its items are left out. Said at
   * warn once per server, method and reason (every list would repeat it), then at debug.
   */
  private skip(up: Upstream, kind: ListKind, err: unknown): Page {
    const reason = (err as Error).message;
    const key = `${up.name}\0${kind.method}\0${reason}`;
    if (this.saidSkips.has(key)) up.log.debug({ err: reason, method: kind.method }, 'list failed; leaving this server out');
    else {
      if (this.saidSkips.size >= 1000) this.saidSkips.clear();
      this.saidSkips.add(key);
      up.log.warn({ err: reason, method: kind.method, once: true }, 'list failed; leaving this server out (said once per server and reason)');
    }
    return { items: [], next: undefined, listed: 0, public: false };
  }

  /**
   * Every page of one upstream's list, in order, each page's shown items handed to `each`:
   * bounded like every walk (upstream/paging.ts), ended by `signal`. Pages come from the cache
   * where it has them.
   */
  walk(kind: ListKind, up: Upstream, signal: CancelSignal, each?: (items: Params[]) => void): Promise<void> {
    return walkPages(
      up.name,
      kind.method,
      async (cursor) => {
        const p = await this.page(kind, up, cursor, signal);
        each?.(p.items);
        return { items: p.listed, next: p.next };
      },
      signal,
    );
  }

  /**
   * What an upstream's list is now, as far as the catalogue knows: changes when the list
   * changes (list_changed, a restart) and when what is shown of it does (reset).
   */
  version(kind: ListKind, up: Upstream): string {
    return `${this.epoch}.${this.generationsOf(up)[kind.capability] ?? 0}`;
  }

  /** An upstream page's cache key: gone stale with the epoch and the list's generation. */
  private pageKey(kind: ListKind, up: Upstream, cursor: string | undefined): string {
    return `${this.epoch}:${this.idOf(up)}:${this.generationsOf(up)[kind.capability] ?? 0}:${kind.method}:${cursor ?? ''}`;
  }

  /**
   * Every item of an upstream's list as shown, from the cache alone (never a fetch): undefined
   * when the upstream's pages are not cached (no listChanged) or not all are there now.
   */
  cachedItems(kind: ListKind, up: Upstream): Params[] | undefined {
    if (!this.cacheable(kind, up)) return undefined;
    const prefix = this.pageKey(kind, up, undefined);
    const items: Params[] = [];
    let cursor = '';
    // Bounded like a walk: a cursor seen twice ends it (a cycle), as do the cache's own bounds.
    const seen = new Set<string>();
    for (;;) {
      const p = this.cache.peek(prefix + cursor);
      if (!p) return undefined;
      for (const item of p.items) items.push(item);
      if (p.next === undefined) return items;
      if (seen.has(p.next)) return undefined;
      seen.add((cursor = p.next));
    }
  }

  /**
   * Reads an upstream's FIRST page of a list before any host asks (it just became ready), into
   * the cache exactly as a host's list would (same fetch, same interceptors, same pin checks),
   * so the first host list is served from memory or joins this fetch in flight. Only where the
   * page would be kept (cacheable): a page nobody keeps would be asked for again anyway. One
   * page, not a walk: a host's first list reads one page per upstream, and an endless list is
   * not paged through by mcpmux on its own. Never rejects: a failure is the on-demand path's
   * to meet (and to say), the upstream stays as it is.
   */
  prefetch(kind: ListKind, up: Upstream): Promise<'cached' | 'skipped' | 'failed'> {
    if (up.state !== 'ready' || up.capabilities[kind.capability] === undefined || !this.cacheable(kind, up)) return Promise.resolve('skipped');
    // page() registers its fetch as in flight before it first awaits: a host list that comes
    // now joins it instead of asking the upstream a second time.
    return this.page(kind, up, undefined, NEVER).then(
      () => 'cached' as const,
      (err: unknown) => {
        up.log.debug({ err: (err as Error).message, method: kind.method }, 'listing ahead of hosts failed; the first host list asks again');
        return 'failed' as const;
      },
    );
  }

  private async page(kind: ListKind, up: Upstream, cursor: string | undefined, signal: CancelSignal, tally?: ListTally): Promise<Page> {
    const key = this.pageKey(kind, up, cursor);
    if (!this.cacheable(kind, up)) {
      if (tally) tally.fetched = true;
      // Not kept so far; a page that now says how long it stays fresh is kept that long.
      const epoch = this.epoch;
      const p = await this.fetch(kind, up, cursor, signal);
      if (epoch === this.epoch && this.cacheable(kind, up)) this.cache.set(key, p, { size: (p.size = sizeOf(key, p)) });
      return p;
    }
    const hit = this.cache.get(key);
    // A page kept for its ttlMs alone is asked for again once that has passed; one from an
    // upstream that announces changes stays until list_changed says otherwise.
    if (hit && (this.announces(kind, up) || !(hit.freshUntil! <= Date.now()))) return hit;
    if (tally) tally.fetched = true;
    let pending = this.inflight.get(key);
    if (!pending) {
      // Shared by every host asking at once, so it is not tied to any one host's cancellation.
      const epoch = this.epoch;
      pending = this.fetch(kind, up, cursor, undefined).then(
        (p) => {
          this.inflight.delete(key);
          if (epoch === this.epoch) this.cache.set(key, p, { size: (p.size = sizeOf(key, p)) });
          return p;
        },
        (err: unknown) => {
          this.inflight.delete(key);
          throw err;
        },
      );
      this.inflight.set(key, pending);
    }
    return pending;
  }

  private async fetch(kind: ListKind, up: Upstream, cursor: string | undefined, signal: CancelSignal | undefined): Promise<Page> {
    const res = await this.fetchPage(up, kind.method, cursor === undefined ? {} : { cursor }, signal);
    const raw = res[kind.key];
    if (!Array.isArray(raw)) {
      throw new RpcError(ErrorCode.InternalError, `Upstream "${up.name}" answered ${kind.method} without a ${kind.key} array`);
    }
    const items: Params[] = [];
    const strings = new Map<string, string>();
    for (const item of raw) {
      if (typeof item !== 'object' || item === null) continue;
      shareStrings(item, strings);
      const shown = kind.present(up, item as Params);
      if (shown) items.push(shown);
    }
    // 2026-07-28 caching hints (a legacy upstream sends none: fresh for no time, private).
    const ttl = res.ttlMs;
    const freshUntil = typeof ttl === 'number' && Number.isFinite(ttl) && ttl >= 0 ? Date.now() + ttl : undefined;
    let seen = this.ttlSeen.get(up);
    if (!seen) this.ttlSeen.set(up, (seen = {}));
    seen[kind.capability] = freshUntil !== undefined && (ttl as number) > 0;
    return { items, next: nextCursorOf(res), listed: raw.length, freshUntil, public: res.cacheScope === 'public' };
  }

  private generationsOf(up: Upstream): Record<string, number> {
    let g = this.generations.get(up);
    if (!g) this.generations.set(up, (g = {}));
    return g;
  }

  private idOf(up: Upstream): number {
    let id = this.ids.get(up);
    if (id === undefined) this.ids.set(up, (id = this.nextId++));
    return id;
  }
}

/** A page's cost in the cache: JSON characters of its items, its cursors and its key. */
function sizeOf(key: string, p: Page): number {
  return jsonChars(p.items) + key.length + (p.next?.length ?? 0) + ENTRY_CHARS;
}

/**
 * About how many characters `value` takes as JSON, counted without writing it: a string of a
 * 100-tool page (~140 KB) would be garbage at once, and with 20 upstreams answering together
 * such strings outlive the young generation and wait for a full collection (issue 23: peak
 * RSS). Strings count their length (escapes aside: the cost is what the page holds in memory).
 * Iterative: how deep an item nests is the upstream's choice.
 */
export function jsonChars(value: unknown): number {
  let n = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    if (typeof v === 'string') n += v.length + 2;
    else if (typeof v === 'number') n += String(v).length;
    else if (typeof v === 'boolean') n += v ? 4 : 5;
    else if (v === null) n += 4;
    else if (Array.isArray(v)) {
      n += v.length + 1;
      for (const x of v) stack.push(x ?? null);
    } else if (typeof v === 'object') {
      n += 1;
      for (const k of Object.keys(v)) {
        const x = (v as Record<string, unknown>)[k];
        if (x === undefined || typeof x === 'function') continue;
        n += k.length + 4;
        stack.push(x);
      }
    }
  }
  return n;
}
