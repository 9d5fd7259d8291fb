// Tool-definition pinning against "rug pulls": a server that changes what a tool says or takes
// after users trusted it. Every upstream tool's definition is hashed (sha256 of its canonical
// JSON, keys sorted) per field. For servers under `pinTools` the approved hashes are kept: in a
// state file (pins-file.ts), or, when the config has `store`, in Redis (pins-redis.ts) so that
// every daemon holds and releases alike. A changed definition, or a tool new to a server
// already pinned, is held: hidden from tools/list and refused when called, until an admin
// approves it (`mcpmux tools --approve NAME`). The first time a pinned server is seen at all,
// its tools are trusted as they are. Other servers are recorded nowhere: a definition that
// changes while mcpmux runs is only compared with the one listed before. Either way a change
// is logged with the fields that changed and published on the bus (counted in metrics).
//
// Bounded: only pinned servers are written; each server's entries (kept and in memory) are
// pruned to what its latest complete tools/list shows (in Redis: what no daemon lists), and a
// reload that removes a server or stops pinning it prunes the server.

import { createHash } from 'node:crypto';
import type { RpcError } from '../jsonrpc/message.js';
import { publishToolChanged } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import type { Params } from '../protocol/mcp.js';
import type { SharedStore } from '../store/store.js';
import { FilePins } from './pins-file.js';
import { RedisPins } from './pins-redis.js';

/** The parts of a definition that are hashed and compared. */
const FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations', '_meta'] as const;
/** Held tools /status lists at most. */
const MAX_HELD = 500;
/** Changes remembered as reported at most (see ToolPins.reported). */
const MAX_REPORTED = 10_000;
/** Names one listing in progress may collect at most; a longer one prunes nothing. */
const MAX_LISTING = 100_000;

export interface Pinned {
  /** Field -> sha256 (hex, 16 chars) of its canonical JSON; absent fields are absent. */
  fields: Record<string, string>;
  approvedAt: string;
}

/** One server's approved tools: tool name -> its pin. */
export type ServerPins = Record<string, Pinned>;

/**
 * Where the approved pins are kept (a file, or the shared store). It holds what it read last
 * in `servers`, with this process's own changes, and tells the keeper of other processes' ones.
 */
export interface PinStorage {
  /** Per server, its approved tools as known here; a server absent was never recorded. */
  readonly servers: Readonly<Record<string, ServerPins>>;
  /** Whether this server's records have been read (a file: at once; Redis: once it answered, and again for a server a reload pins). */
  isRead(server: string): boolean;
  /**
   * Whether the server's record is where other processes take it from (Redis: written or
   * adopted): first use is over then, for this process too. A file: never (one process).
   */
  sharedRecord(server: string): boolean;
  /** Tools trusted on first use: recorded unless another process recorded them first (then its record is adopted). */
  record(server: string, tools: ServerPins): void;
  /** Approvals by an admin: recorded now (rejects when they cannot be). */
  approve(server: string, tools: ServerPins): Promise<void>;
  /** A complete listing of `server` by this process showed only `listed`: forget what nobody lists. */
  prune(server: string, listed: ReadonlySet<string>): void;
  /** Servers no longer pinned here. */
  drop(servers: readonly string[]): void;
  /** Starts hearing of other processes' changes. */
  watch(): void;
  /** Resolves once what is kept has been read; to why not when it cannot be. */
  ready(): Promise<string | undefined>;
  /** The error a call to a tool of `server` (pinned) gets now, or undefined (it may go on). */
  refusal(server: string, what: string): RpcError | undefined;
  /** Stops watching; writes out what is waiting to be written. */
  close(): Promise<void>;
}

/** What a storage needs of the pins it keeps. */
export interface PinsKeeper {
  readonly pinned: ReadonlySet<string>;
  readonly log: Logger;
  /**
   * Another process changed what is kept: `apply` updates the storage's `servers`. When that
   * changes what this process pins (what an approval can change), `said` is logged with `where`
   * and hosts' lists are rebuilt; `always`: rebuilt in any case (the first read).
   */
  changed(apply: () => void, where: object, said: string, always?: boolean): void;
}

export interface PinsOptions {
  file: string;
  /** The shared store: pins live in Redis instead of the file. */
  store?: SharedStore | undefined;
  /** Servers whose changed or new tools are held (pinTools). */
  pinned: ReadonlySet<string>;
  log: Logger;
  /** What is held changed without the upstream saying so (an approval): lists must be rebuilt. */
  onChange?: () => void;
}

/**
 * A tool held by pinning: its server, its own name there, what changed (or `(new tool)`), its
 * description now (the text a rug pull changes; untrusted, cut to HELD_TEXT_CHARS) and the
 * fingerprint of the definition held: an approval that names it approves that one only.
 */
export interface HeldTool {
  server: string;
  tool: string;
  changed: string[];
  description: string | null;
  fingerprint: string;
}

/** A held tool's description is kept to this many characters (the console shows it). */
const HELD_TEXT_CHARS = 2000;

/** The fingerprint of a definition by its field hashes (what an approval records). */
export function fingerprintOf(fields: Record<string, string>): string {
  return createHash('sha256').update(FIELDS.map((f) => fields[f] ?? '').join('.')).digest('hex').slice(0, 16);
}

/** One upstream connection as pruning needs it: a closed one's listing no longer counts. */
export interface Lister {
  readonly name: string;
  readonly state: string;
}

export class ToolPins {
  private readonly storage: PinStorage;
  /**
   * The field hashes of the definitions seen last, per server and tool: a call to a pinned
   * server compares these (it does not hash again), an approval records them, and an unpinned
   * server's next listing is compared with them. Pruned to what the server lists.
   */
  readonly seen = new Map<string, Map<string, Record<string, string>>>();
  /** Per connection, the tool names of the listing it is paging through (undefined: more than MAX_LISTING). */
  private readonly listing = new WeakMap<Lister, Set<string> | undefined>();
  /** Per server, per connection, the tool names of its latest complete listing. */
  private readonly listed = new Map<string, Map<Lister, Set<string>>>();
  /**
   * `server\0tool\0fieldhash` of changes already reported (once each, not on every listing).
   * Emptied at MAX_REPORTED: a server inventing definitions cannot grow it without bound (it
   * is then reported again, which is what it deserves).
   */
  private readonly reported = new Set<string>();
  /** Servers first seen by this process (trusted on first use). */
  private readonly firstUse = new Set<string>();
  /** Per pinned server, the descriptions of its tools as last held (the console shows them). */
  private readonly heldText = new Map<string, Map<string, string | null>>();

  constructor(private readonly opts: PinsOptions) {
    const keeper: PinsKeeper = {
      get pinned() {
        return opts.pinned;
      },
      log: opts.log,
      changed: (apply, where, said, always) => {
        const before = this.pinnedState();
        apply();
        if (this.pinnedState() === before && !always) return;
        opts.log.info(where, said);
        opts.onChange?.();
      },
    };
    this.storage = opts.store ? new RedisPins(opts.store, keeper) : new FilePins(opts.file, keeper);
  }

  /** Whether hosts may see and call this tool of `server` now; records what it sees. */
  visible(server: string, tool: Params): boolean {
    const name = tool.name as string;
    let mine = this.seen.get(server);
    if (!mine) this.seen.set(server, (mine = new Map()));
    const fields = hashFields(tool);
    const before = mine.get(name);
    mine.set(name, fields);
    if (!this.opts.pinned.has(server)) {
      // Not pinned: nothing is written; a change since the last listing is said and counted.
      const changed = before ? FIELDS.filter((f) => before[f] !== fields[f]) : [];
      if (changed.length > 0) this.report(server, name, changed, fields, false);
      return true;
    }
    // Nothing read yet (Redis not answered): nothing to judge by, so nothing is shown; the
    // first read rebuilds the lists.
    if (!this.storage.isRead(server)) return false;
    // Trust on first use: a server with no entry when this process started has its tools
    // recorded as they are, all through this run (a changed one is still caught); with the
    // shared store only until its record is there, since every daemon adopts what it holds
    // (a tool new after that is held, on this daemon as on the others).
    const known = this.storage.servers[server];
    if (!known) this.firstUse.add(server);
    const pin = known?.[name];
    if (!pin) {
      if (this.trusting(server)) {
        this.storage.record(server, { [name]: { fields, approvedAt: now() } });
        return true;
      }
      this.report(server, name, ['(new tool)'], fields, true);
      this.holdText(server, name, tool);
      return false;
    }
    const changed = FIELDS.filter((f) => pin.fields[f] !== fields[f]);
    if (changed.length === 0) return true;
    this.report(server, name, changed, fields, true);
    this.holdText(server, name, tool);
    return false;
  }

  /** Keeps a held tool's description for the console; bounded per server (a stale one is only read while its tool is held). */
  private holdText(server: string, name: string, tool: Params): void {
    let texts = this.heldText.get(server);
    if (!texts) this.heldText.set(server, (texts = new Map()));
    if (texts.size >= 2 * MAX_HELD && !texts.has(name)) texts.clear();
    const d = tool.description;
    texts.set(name, typeof d === 'string' ? (d.length > HELD_TEXT_CHARS ? `${d.slice(0, HELD_TEXT_CHARS)}…` : d) : null);
  }

  /**
   * A tools/list page from `conn` was answered (`first`: it asked for no cursor; `last`: no
   * nextCursor came back). When a listing is complete, what its server no longer lists is
   * forgotten: its definitions seen, and for a pinned server its approvals kept (a tool that
   * comes back later is a new tool). A server with several connections (`sharing:
   * "session"`) keeps what any open one listed last.
   */
  page(conn: Lister, first: boolean, names: readonly string[], last: boolean): void {
    let acc: Set<string> | undefined;
    if (first) acc = new Set();
    else if (this.listing.has(conn)) acc = this.listing.get(conn);
    else return; // a page of a listing whose start went by before (or was cached)
    if (acc) for (const n of names) acc.add(n);
    if (acc && acc.size > MAX_LISTING) acc = undefined;
    if (!last) {
      this.listing.set(conn, acc);
      return;
    }
    this.listing.delete(conn);
    if (acc) this.prune(conn, acc);
  }

  private prune(conn: Lister, names: Set<string>): void {
    const server = conn.name;
    let lists = this.listed.get(server);
    if (!lists) this.listed.set(server, (lists = new Map()));
    lists.set(conn, names);
    // Closed connections go here (a server's next complete listing, on any connection); what
    // the open ones listed is kept, gathered once rather than asked per tool and connection.
    for (const c of lists.keys()) if (c.state === 'closed') lists.delete(c);
    const listedAnywhere = lists.size === 1 ? names : new Set([...lists.values()].flatMap((l) => [...l]));
    const mine = this.seen.get(server);
    for (const tool of mine?.keys() ?? []) if (!listedAnywhere.has(tool)) mine!.delete(tool);
    // A held description of a tool no longer listed is never read again: forgotten with it.
    const texts = this.heldText.get(server);
    for (const tool of texts?.keys() ?? []) if (!listedAnywhere.has(tool)) texts!.delete(tool);
    if (this.opts.pinned.has(server)) this.storage.prune(server, listedAnywhere);
  }

  /** Whether a call to `tool` of `server` may go through (a held tool may not). */
  callable(server: string, tool: string): boolean {
    if (!this.opts.pinned.has(server)) return true;
    // Not read yet: refused (refusal says why), as a held tool is.
    if (!this.storage.isRead(server)) return false;
    const fields = this.seen.get(server)?.get(tool);
    return fields === undefined || this.approved(server, tool, fields);
  }

  /**
   * Why a call to a tool of `server` cannot be judged now (the shared store is down under
   * onError "closed", or was never read), or undefined. `what` names the call in the error.
   */
  refusal(server: string, what: string): RpcError | undefined {
    return this.opts.pinned.has(server) ? this.storage.refusal(server, what) : undefined;
  }

  /**
   * Which servers are pinned from now on, and which are configured at all (a reload). A server
   * this process pinned and no longer pins (removed, or `pinTools` off) leaves what is kept; one no
   * longer configured is forgotten here too. Servers this process never pinned are left alone:
   * another config sharing the state folder may pin them.
   */
  setPinned(pinned: ReadonlySet<string>, configured: ReadonlySet<string>): void {
    const dropped = [...this.opts.pinned].filter((server) => !pinned.has(server) && this.storage.servers[server]);
    for (const server of dropped) this.firstUse.delete(server);
    for (const server of this.seen.keys()) if (!configured.has(server)) this.seen.delete(server);
    for (const server of this.heldText.keys()) if (!pinned.has(server)) this.heldText.delete(server);
    for (const server of this.listed.keys()) if (!configured.has(server)) this.listed.delete(server);
    this.opts.pinned = pinned;
    if (dropped.length > 0) this.storage.drop(dropped);
  }

  /**
   * Records the definitions seen last for these (server, tool) pairs as approved, for servers
   * that are pinned (nothing else is held or recorded); writes them now. Resolves to the pairs
   * recorded; rejects when they cannot be written (the shared store is down).
   */
  async approve(pairs: readonly { server: string; tool: string; fingerprint?: string }[]): Promise<{ server: string; tool: string }[]> {
    const byServer = new Map<string, ServerPins>();
    const done = pairs.filter(({ server, tool, fingerprint }) => {
      const fields = this.seen.get(server)?.get(tool);
      if (!fields || !this.opts.pinned.has(server)) return false;
      // Approved only as the operator saw it: a definition that changed again since is not.
      if (fingerprint !== undefined && fingerprintOf(fields) !== fingerprint) return false;
      let tools = byServer.get(server);
      if (!tools) byServer.set(server, (tools = {}));
      tools[tool] = { fields, approvedAt: now() };
      return true;
    });
    for (const [server, tools] of byServer) {
      await this.storage.approve(server, tools);
      // Approved (written): no longer held, so its held description goes.
      const texts = this.heldText.get(server);
      if (texts) for (const tool of Object.keys(tools)) texts.delete(tool);
    }
    return done;
  }

  /**
   * The tools held now (the web console's list, with an approve button each): of the pinned
   * servers, the definitions seen last that are not the approved ones. Computed from what is
   * kept and seen, never stored apart. `max`: at most this many.
   */
  held(max = MAX_HELD): HeldTool[] {
    const out: HeldTool[] = [];
    for (const server of this.opts.pinned) {
      if (!this.storage.isRead(server)) continue;
      for (const [tool, fields] of this.seen.get(server) ?? []) {
        if (this.approved(server, tool, fields)) continue;
        const pin = this.storage.servers[server]?.[tool];
        const description = this.heldText.get(server)?.get(tool) ?? null;
        out.push({ server, tool, changed: pin ? FIELDS.filter((f) => pin.fields[f] !== fields[f]) : ['(new tool)'], description, fingerprint: fingerprintOf(fields) });
        if (out.length >= max) return out;
      }
    }
    return out;
  }

  /** Hears of approvals by other processes (`mcpmux tools --approve`, other daemons). */
  watch(): void {
    this.storage.watch();
  }

  /** Resolves once the approvals have been read (for one-shot commands); to why not when they cannot be. */
  ready(): Promise<string | undefined> {
    return this.storage.ready();
  }

  /** What is kept of the servers this process pins (what an approval can change). */
  private pinnedState(): string {
    return JSON.stringify([...this.opts.pinned].sort().map((name) => [name, this.storage.servers[name] ?? null]));
  }

  close(): Promise<void> {
    return this.storage.close();
  }

  /** Whether a definition with these field hashes is the approved one (or needs no approval). */
  private approved(server: string, tool: string, fields: Record<string, string>): boolean {
    const pin = this.storage.servers[server]?.[tool];
    if (!pin) return !this.storage.servers[server] || this.trusting(server);
    return FIELDS.every((f) => pin.fields[f] === fields[f]);
  }

  /** Whether tools of `server` new to it are recorded as they are (first use), not held. */
  private trusting(server: string): boolean {
    if (!this.firstUse.has(server)) return false;
    if (!this.storage.sharedRecord(server)) return true;
    this.firstUse.delete(server);
    return false;
  }

  private report(server: string, tool: string, changed: string[], fields: Record<string, string>, held: boolean): void {
    const key = `${server}\0${tool}\0${JSON.stringify(fields)}`;
    if (this.reported.has(key)) return;
    if (this.reported.size >= MAX_REPORTED) this.reported.clear();
    this.reported.add(key);
    publishToolChanged({ server, tool, fields: changed, held });
    this.opts.log.warn(
      { server, tool, changed, held },
      held ? `tool definition changed since it was approved; held until: mcpmux tools --approve ${server}/${tool}` : 'tool definition changed',
    );
  }
}

function hashFields(tool: Params): Record<string, string> {
  const out: Record<string, string> = {};
  for (const f of FIELDS) if (tool[f] !== undefined) out[f] = createHash('sha256').update(canonical(tool[f])).digest('hex').slice(0, 16);
  return out;
}

/** JSON with object keys sorted at every level: the same definition always hashes the same. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

function now(): string {
  return new Date().toISOString();
}
