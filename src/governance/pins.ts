// Tool-definition pinning against "rug pulls": a server that changes what a tool says or takes
// after users trusted it. Every upstream tool's definition is hashed (sha256 of its canonical
// JSON, keys sorted) per field. For servers under `pinTools` the approved hashes are kept in a
// state file, and a changed definition, or a tool new to a server already pinned, is held:
// hidden from tools/list and refused when called, until an admin approves it (`mcpmux tools
// --approve NAME`). The first time a pinned server is seen at all, its tools are trusted as they
// are. Other servers are recorded nowhere: a definition that changes while mcpmux runs is only
// compared with the one listed before. Either way a change is logged with the fields that
// changed and published on the bus (counted in metrics).
//
// Bounded: only pinned servers are written; each server's entries (on disk and in memory) are
// pruned to what its latest complete tools/list shows, and a reload that removes a server or
// stops pinning it prunes the server.

import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { readText, watchFile, writePrivate } from '../files.js';
import { publishToolChanged } from '../observe/events.js';
import type { Logger } from '../observe/logger.js';
import type { Params } from '../protocol/mcp.js';

/** The parts of a definition that are hashed and compared. */
const FIELDS = ['name', 'title', 'description', 'inputSchema', 'outputSchema', 'annotations', '_meta'] as const;
const FILE_VERSION = 1;
/** Changes remembered as reported at most (see ToolPins.reported). */
const MAX_REPORTED = 10_000;
/** Names one listing in progress may collect at most; a longer one prunes nothing. */
const MAX_LISTING = 100_000;


interface Pinned {
  /** Field -> sha256 (hex, 16 chars) of its canonical JSON; absent fields are absent. */
  fields: Record<string, string>;
  approvedAt: string;
}

interface StateFile {
  version: number;
  servers: Record<string, Record<string, Pinned>>;
}

export interface PinsOptions {
  file: string;
  /** Servers whose changed or new tools are held (pinTools). */
  pinned: ReadonlySet<string>;
  log: Logger;
  /** What is held changed without the upstream saying so (an approval): lists must be rebuilt. */
  onChange?: () => void;
}

/** One upstream connection as pruning needs it: a closed one's listing no longer counts. */
export interface Lister {
  readonly name: string;
  readonly state: string;
}

export class ToolPins {
  private state: StateFile = { version: FILE_VERSION, servers: {} };
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
  private saveTimer: NodeJS.Timeout | undefined;
  private unwatch: (() => void) | undefined;
  private lastWritten = '';

  constructor(private readonly opts: PinsOptions) {
    this.load();
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
    // Trust on first use: a server with no entry when this process started has its tools
    // recorded as they are, all through this run (a changed one is still caught).
    if (!this.state.servers[server]) this.firstUse.add(server);
    const known = (this.state.servers[server] ??= {});
    const pin = known[name];
    if (!pin) {
      if (this.firstUse.has(server)) {
        known[name] = { fields, approvedAt: now() };
        this.scheduleSave();
        return true;
      }
      this.report(server, name, ['(new tool)'], fields, true);
      return false;
    }
    const changed = FIELDS.filter((f) => pin.fields[f] !== fields[f]);
    if (changed.length === 0) return true;
    this.report(server, name, changed, fields, true);
    return false;
  }

  /**
   * A tools/list page from `conn` was answered (`first`: it asked for no cursor; `last`: no
   * nextCursor came back). When a listing is complete, what its server no longer lists is
   * forgotten: its definitions seen, and for a pinned server its approvals in the file (a tool
   * that comes back later is a new tool). A server with several connections (`sharing:
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
    const keep = (tool: string) => listedAnywhere.has(tool);
    const mine = this.seen.get(server);
    for (const tool of mine?.keys() ?? []) if (!keep(tool)) mine!.delete(tool);
    const known = this.opts.pinned.has(server) ? this.state.servers[server] : undefined;
    let removed = false;
    for (const tool of Object.keys(known ?? {})) {
      if (keep(tool)) continue;
      delete known![tool];
      removed = true;
    }
    if (removed) this.scheduleSave();
  }

  /** Whether a call to `tool` of `server` may go through (a held tool may not). */
  callable(server: string, tool: string): boolean {
    if (!this.opts.pinned.has(server)) return true;
    const fields = this.seen.get(server)?.get(tool);
    return fields === undefined || this.approved(server, tool, fields);
  }

  /**
   * Which servers are pinned from now on, and which are configured at all (a reload). A server
   * this process pinned and no longer pins (removed, or `pinTools` off) leaves the file; one no
   * longer configured is forgotten here too. Servers this process never pinned are left alone:
   * another config sharing the state folder may pin them.
   */
  setPinned(pinned: ReadonlySet<string>, configured: ReadonlySet<string>): void {
    let removed = false;
    for (const server of this.opts.pinned) {
      if (pinned.has(server) || !this.state.servers[server]) continue;
      delete this.state.servers[server];
      this.firstUse.delete(server);
      removed = true;
    }
    for (const server of this.seen.keys()) if (!configured.has(server)) this.seen.delete(server);
    for (const server of this.listed.keys()) if (!configured.has(server)) this.listed.delete(server);
    this.opts.pinned = pinned;
    if (removed) this.saveNow();
  }

  /**
   * Records the definitions seen last for these (server, tool) pairs as approved, for servers
   * that are pinned (nothing else is held or recorded); writes the file now. Returns the pairs recorded.
   */
  approve(pairs: readonly { server: string; tool: string }[]): { server: string; tool: string }[] {
    const done = pairs.filter(({ server, tool }) => {
      const fields = this.seen.get(server)?.get(tool);
      if (!fields || !this.opts.pinned.has(server)) return false;
      (this.state.servers[server] ??= {})[tool] = { fields, approvedAt: now() };
      return true;
    });
    this.saveNow();
    return done;
  }

  /** Re-reads the file when another process (`mcpmux tools --approve`) changes it. */
  watch(): void {
    const warn = (err: Error, what: string) => this.opts.log.warn({ err: err.message, file: this.opts.file }, what);
    try {
      mkdirSync(path.dirname(this.opts.file), { recursive: true, mode: 0o700 });
      this.unwatch = watchFile(
        this.opts.file,
        100,
        (text) => {
          if (text === this.lastWritten) return;
          // Only approvals for servers this process pins change what hosts see; another
          // mcpmux recording its own servers' first use must not make every host re-list.
          const before = this.pinnedState();
          const prior = this.state;
          this.load();
          this.keepPinned(prior);
          if (this.pinnedState() === before) return;
          this.opts.log.info({ file: this.opts.file }, 'tool pins changed on disk; lists rebuilt');
          this.opts.onChange?.();
        },
        (err) => warn(err, 'the tool pins watch failed; approvals apply on restart'),
      );
    } catch (err) {
      warn(err as Error, 'cannot watch the tool pins file; approvals apply on restart');
    }
  }

  /**
   * A server this process pins whose entry another process removed (it stopped pinning it):
   * its approvals stay, or its held tools would be trusted afresh. Written back.
   */
  private keepPinned(prior: StateFile): void {
    const back = [...this.opts.pinned].filter((server) => !this.state.servers[server] && prior.servers[server]);
    if (back.length === 0) return;
    for (const server of back) this.state.servers[server] = prior.servers[server]!;
    this.opts.log.warn({ file: this.opts.file, servers: back }, 'the tool pins file lost servers this process pins; their approvals were written back');
    this.saveNow();
  }

  /** What the file says of the servers this process pins (what an approval can change). */
  private pinnedState(): string {
    return JSON.stringify([...this.opts.pinned].sort().map((name) => [name, this.state.servers[name] ?? null]));
  }

  close(): void {
    this.unwatch?.();
    if (this.saveTimer) this.saveNow();
  }

  /** Whether a definition with these field hashes is the approved one (or needs no approval). */
  private approved(server: string, tool: string, fields: Record<string, string>): boolean {
    const pin = this.state.servers[server]?.[tool];
    if (!pin) return !this.state.servers[server] || this.firstUse.has(server);
    return FIELDS.every((f) => pin.fields[f] === fields[f]);
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

  private load(): void {
    const text = readText(this.opts.file);
    if (text === undefined) return;
    try {
      const doc = JSON.parse(text) as StateFile;
      if (doc && typeof doc === 'object' && doc.servers && typeof doc.servers === 'object') this.state = { version: FILE_VERSION, servers: doc.servers };
    } catch (err) {
      this.opts.log.error({ file: this.opts.file, err: (err as Error).message }, 'the tool pins file is not valid JSON; starting from nothing (it will be rewritten)');
    }
  }

  private scheduleSave(): void {
    this.saveTimer ??= setTimeout(() => this.saveNow(), 200);
    this.saveTimer.unref?.();
  }

  /** Atomically: a temp file beside it, then a rename; mode 0600. */
  private saveNow(): void {
    clearTimeout(this.saveTimer);
    this.saveTimer = undefined;
    const text = JSON.stringify(this.state, null, 2) + '\n';
    try {
      writePrivate(this.opts.file, text);
      this.lastWritten = text;
    } catch (err) {
      this.opts.log.error({ file: this.opts.file, err: (err as Error).message }, 'cannot write the tool pins file');
    }
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
