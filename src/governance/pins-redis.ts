// Tool pins kept in the shared store (Redis), so that several daemons behind one balancer hold
// and release alike: an approval (`mcpmux tools --approve` with the same config) or a first-use
// record made by one is seen by all within a second (published on the `pins` channel; a
// counter read every second catches a message missed while a connection was down).
//
// Keys, under the store's keyPrefix:
//   pins:tools:<server>   hash, tool -> JSON pin; the field "\0" marks the server as recorded, so a
//                         server whose tools were all pruned is still known (its new tools are held)
//   pins:listed:<server>  hash, tool -> when a daemon last said it lists the tool (ms, Redis's clock);
//                         "\0" -> when the hash began. Pruning asks it: see SWEEP below.
//   pins:version          bumped by every change
//
// Trust on first use is race-free: records are written with HSETNX in one script, so the first
// daemon's record of a tool wins and the others adopt it (their own definition, if it differs,
// is then held). A store that lost a server this daemon pins (Redis restarted empty) gets this
// daemon's records back, first writer winning again, so a restart never trusts a rug pull.

import type { Redis } from 'ioredis';
import type { RpcError } from '../jsonrpc/message.js';
import { connectionError, type SharedStore } from '../store/store.js';
import type { Pinned, PinsKeeper, PinStorage, ServerPins } from './pins.js';

const CHANNEL = 'pins';
const VERSION = 'pins:version';
const toolsKey = (server: string) => `pins:tools:${server}`;
const listedKey = (server: string) => `pins:listed:${server}`;
/** The field that marks a server as recorded (no tool is named with a NUL). */
const MARK = '\0';
/** How often the version counter is read (a missed message is caught within this). */
const POLL_MS = 1_000;
/**
 * A tool no daemon has said it lists for this long is no longer listed anywhere.
 * MCPMUX_PINS_LIVE_MS: tests shorten it.
 */
const LIVE_MS = Number(process.env.MCPMUX_PINS_LIVE_MS) > 0 ? Number(process.env.MCPMUX_PINS_LIVE_MS) : 60_000;
/** How often each daemon says again which tools it lists (well within LIVE_MS). */
const STAMP_MS = Math.round(LIVE_MS / 3);
/** Names stamped per command (a big listing is many commands: other clients go between them). */
const STAMP_CHUNK = 1_000;
/** Every this many stamps of a server, stamps nobody renewed are cleared (a server listing ever-new names). */
const CLEAR_EVERY = 15;
/** First-use records are written together, a moment after the listing that made them. */
const FLUSH_MS = 50;

/** KEYS: tools, version. ARGV: channel, server, mark, mark value, then tool, pin pairs. Returns the server's whole record. */
const RECORD = `
local added = redis.call('HSETNX', KEYS[1], ARGV[3], ARGV[4])
for i = 5, #ARGV, 2 do added = added + redis.call('HSETNX', KEYS[1], ARGV[i], ARGV[i + 1]) end
if added > 0 then
  redis.call('INCR', KEYS[2])
  redis.call('PUBLISH', ARGV[1], ARGV[2])
end
return redis.call('HGETALL', KEYS[1])`;

/**
 * Prunes a server's records to what some daemon lists. KEYS: tools, listed, version. ARGV:
 * channel, server, LIVE_MS, mark, "1" to also clear stamps nobody renewed, then the candidates
 * (records of tools this daemon does not list). A candidate's record is removed only when no
 * daemon stamped its tool within LIVE_MS, and never while the stamps are younger than that
 * (after a Redis restart, or at the start, the other daemons have not said yet what they list).
 * Only the candidates are looked at (and, now and then, the stamps): a server with 100 000
 * tools must not stop Redis for everyone else.
 */
const SWEEP = `
redis.replicate_commands() -- writes after TIME (a no-op from Redis 5 on)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = tonumber(ARGV[3])
if ARGV[5] == '1' then
  local stamps = redis.call('HGETALL', KEYS[2])
  for i = 1, #stamps, 2 do
    if stamps[i] ~= ARGV[4] and now - tonumber(stamps[i + 1]) > live then redis.call('HDEL', KEYS[2], stamps[i]) end
  end
end
local since = tonumber(redis.call('HGET', KEYS[2], ARGV[4]) or now)
if now - since <= live then return 0 end
local removed = 0
for i = 6, #ARGV do
  local at = redis.call('HGET', KEYS[2], ARGV[i])
  if not at or now - tonumber(at) > live then removed = removed + redis.call('HDEL', KEYS[1], ARGV[i]) end
end
if removed > 0 then
  redis.call('INCR', KEYS[3])
  redis.call('PUBLISH', ARGV[1], ARGV[2])
end
return removed`;

/** ioredis flattens the array: a listing of 100 000 names is not spread into one call's arguments. */
interface PinsCommands {
  pinsRecord(tools: string, version: string, args: string[]): Promise<string[]>;
  pinsSweep(tools: string, listed: string, version: string, args: string[]): Promise<number>;
}

export class RedisPins implements PinStorage {
  readonly servers: Record<string, ServerPins> = {};
  private readonly redis: Redis & PinsCommands;
  /** Pinned servers whose records have been read (present in the store or not). */
  private readonly read = new Set<string>();
  /** Servers this process has found in the store (one gone from it since was lost, or dropped by another daemon). */
  private readonly stored = new Set<string>();
  /** First-use records not written yet, per server. */
  private pending = new Map<string, ServerPins>();
  /** Per pinned server, what this daemon lists (said again every STAMP_MS), and how many times it said so. */
  private readonly lists = new Map<string, ReadonlySet<string>>();
  private readonly rounds = new Map<string, number>();
  private version: string | null | undefined;
  private reading: Promise<void> | undefined;
  private again = false;
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly stops: (() => void)[] = [];
  /** Refusals by Redis already said at warn, by message. */
  private readonly refusals = new Set<string>();

  constructor(
    private readonly store: SharedStore,
    private readonly keeper: PinsKeeper,
  ) {
    this.redis = store.redis as Redis & PinsCommands;
    this.redis.defineCommand('pinsRecord', { numberOfKeys: 2, lua: RECORD });
    this.redis.defineCommand('pinsSweep', { numberOfKeys: 3, lua: SWEEP });
  }

  record(server: string, tools: ServerPins): void {
    Object.assign((this.servers[server] ??= {}), tools);
    const waiting = this.pending.get(server);
    if (waiting) Object.assign(waiting, tools);
    else this.pending.set(server, { ...tools });
    this.flushTimer ??= setTimeout(() => {
      this.flushTimer = undefined;
      void this.flush().catch((err: Error) => this.failed(err, {}, 'tool pins not written to the shared store yet'));
    }, FLUSH_MS);
    this.flushTimer.unref();
  }

  async approve(server: string, tools: ServerPins): Promise<void> {
    const what = 'Approving tool definitions';
    if (this.store.health !== 'up') throw this.store.unavailable(what);
    const key = toolsKey(server);
    const fields = Object.fromEntries(Object.entries(tools).map(([tool, pin]) => [tool, JSON.stringify(pin)]));
    try {
      const done = await this.redis.multi().hsetnx(key, MARK, now()).hset(key, fields).incr(VERSION).publish(this.store.key(CHANNEL), server).exec();
      const failed = done?.find(([err]) => err);
      if (!done || failed) throw failed?.[0] ?? new Error('transaction discarded');
    } catch (err) {
      throw this.store.failed(what, err);
    }
    Object.assign((this.servers[server] ??= {}), tools);
    this.stored.add(server);
  }

  prune(server: string, listed: ReadonlySet<string>): void {
    this.lists.set(server, listed);
    void this.sweep(server, listed);
  }

  drop(servers: readonly string[]): void {
    const tx = this.redis.multi();
    for (const server of servers) {
      delete this.servers[server];
      this.pending.delete(server);
      this.lists.delete(server);
      this.rounds.delete(server);
      this.stored.delete(server);
      this.read.delete(server);
      tx.del(toolsKey(server), listedKey(server)).publish(this.store.key(CHANNEL), server);
    }
    Promise.resolve()
      .then(() => tx.incr(VERSION).exec())
      .catch((err: Error) => this.keeper.log.warn({ err: err.message, servers }, 'servers no longer pinned are still recorded in the shared store (it did not take their removal)'));
  }

  async ready(): Promise<string | undefined> {
    if (this.keeper.pinned.size === 0) return undefined; // nothing to read
    if ((await this.store.ready()) !== 'up') return this.store.reason ?? 'unreachable';
    try {
      await this.refresh();
      return undefined;
    } catch (err) {
      return (err as Error).message;
    }
  }

  isRead(server: string): boolean {
    return this.read.has(server);
  }

  sharedRecord(server: string): boolean {
    return this.stored.has(server);
  }

  refusal(server: string, what: string): RpcError | undefined {
    // Never read: nothing to judge by, whatever onError says. Read once: "open" goes by it.
    if (!this.read.has(server)) return this.store.unavailable(what);
    if (this.store.onError === 'closed' && this.store.health !== 'up') return this.store.unavailable(what);
    return undefined;
  }

  watch(): void {
    const resync = (why: string) => void this.refresh().then(() => this.flush()).catch((err: Error) => this.failed(err, { why }, 'tool pins not read from the shared store'));
    this.stops.push(this.store.subscribe(CHANNEL, () => resync('message')));
    // Back after an outage: messages may have been missed, and the store may have lost pins.
    this.stops.push(this.store.onHealth((h) => h === 'up' && resync('reconnected')));
    // The subscriber reconnects on its own: what was published before it was back was missed.
    this.stops.push(this.store.onSubscribed(() => resync('resubscribed')));
    const poll = setInterval(() => {
      if (this.store.health !== 'up') return;
      // A server never read (the first read failed, or a reload pinned it), or records not written yet.
      if ([...this.keeper.pinned].some((s) => !this.read.has(s)) || this.pending.size > 0) return resync('poll');
      void this.redis.get(VERSION).then((v) => v !== this.version && resync('version'), () => {});
    }, POLL_MS);
    const stamp = setInterval(() => {
      for (const [server, listed] of this.lists) void this.sweep(server, listed);
    }, STAMP_MS);
    for (const t of [poll, stamp]) t.unref();
    this.timers.push(poll, stamp);
    if (this.store.health === 'up') resync('start');
  }

  async close(): Promise<void> {
    for (const t of this.timers) clearInterval(t);
    clearTimeout(this.flushTimer);
    for (const stop of this.stops.splice(0)) stop();
    if (this.pending.size > 0 && this.store.health === 'up') await this.flush().catch(() => {});
  }

  /** A command failed: an outage is the store's to say (once); Redis refusing it (OOM, NOPERM, WRONGTYPE...) is said here. */
  private failed(err: unknown, where: object, said: string): void {
    const message = err instanceof Error ? err.message : String(err);
    // Each refusal once (it comes back at every poll until someone fixes Redis).
    if (connectionError(err) || this.refusals.has(message)) return this.keeper.log.debug({ err: message, ...where }, said);
    if (this.refusals.size > 100) this.refusals.clear();
    this.refusals.add(message);
    this.keeper.log.warn({ err: message, ...where }, `${said}: the shared store (Redis) refused a command`);
  }

  /** Reads the records of every pinned server (once at a time; a request meanwhile reads again after). */
  private refresh(): Promise<void> {
    if (this.reading) {
      this.again = true;
      return this.reading;
    }
    this.reading = (async () => {
      try {
        do {
          this.again = false;
          await this.readAll();
        } while (this.again);
      } finally {
        this.reading = undefined;
      }
    })();
    return this.reading;
  }

  private async readAll(): Promise<void> {
    const servers = [...this.keeper.pinned].sort();
    const tx = this.redis.pipeline().get(VERSION);
    for (const server of servers) tx.hgetall(toolsKey(server));
    const res = await exec(tx);
    // Servers read for the first time were hidden until now: their lists are rebuilt in any case.
    const first = servers.filter((s) => !this.read.has(s));
    const lost: string[] = [];
    this.keeper.changed(
      () => {
        servers.forEach((server, i) => {
          const read = fromHash(res[i + 1]![1] as Record<string, string>);
          if (read) {
            // What the store says wins over this process's records not written yet.
            this.servers[server] = { ...this.pending.get(server), ...read };
            this.stored.add(server);
          } else if (this.servers[server]) {
            // Gone from the store (Redis restarted empty, or a daemon that stopped pinning it
            // removed it): written back, or its held tools would be trusted afresh.
            if (this.stored.has(server)) lost.push(server);
            this.pending.set(server, { ...this.servers[server], ...this.pending.get(server) });
          }
        });
        for (const server of servers) this.read.add(server);
      },
      { store: 'redis', ...(first.length > 0 && { read: first }) },
      first.length > 0 ? 'tool pins read from the shared store' : 'tool pins changed in the shared store; lists rebuilt',
      first.length > 0,
    );
    this.version = res[0]![1] as string | null;
    if (lost.length > 0) this.keeper.log.warn({ servers: lost }, 'the shared store lost servers this process pins; their approvals were written back');
  }

  /** Writes the first-use records waiting; adopts what another daemon recorded first. */
  private async flush(): Promise<void> {
    const waiting = this.pending;
    this.pending = new Map();
    try {
      for (const [server, tools] of waiting) {
        if (!this.keeper.pinned.has(server)) {
          waiting.delete(server);
          continue;
        }
        const pairs = Object.entries(tools).flatMap(([tool, pin]) => [tool, JSON.stringify(pin)]);
        const all = await this.redis.pinsRecord(toolsKey(server), VERSION, [this.store.key(CHANNEL), server, MARK, now(), ...pairs]);
        waiting.delete(server);
        const read = fromHash(Object.fromEntries(pairsOf(all)));
        if (!read || !this.keeper.pinned.has(server)) continue;
        this.keeper.changed(
          () => {
            this.servers[server] = { ...this.pending.get(server), ...read };
            this.stored.add(server);
          },
          { server },
          'another daemon recorded this server\'s tools first; its record is adopted and lists rebuilt',
        );
      }
    } finally {
      // Not written (the store went down): tried again when it is back.
      for (const [server, tools] of waiting) this.pending.set(server, { ...tools, ...this.pending.get(server) });
    }
  }

  /**
   * Says what this daemon lists of `server` (stamped with Redis's clock, in chunks), then prunes
   * the records of tools it does not list that no other daemon lists either (SWEEP).
   */
  private async sweep(server: string, listed: ReadonlySet<string>): Promise<void> {
    if (this.store.health !== 'up') return;
    try {
      const [sec, usec] = await this.redis.time();
      const at = String(Number(sec) * 1000 + Math.floor(Number(usec) / 1000));
      const key = listedKey(server);
      const tx = this.redis.pipeline().hsetnx(key, MARK, at);
      const names = [...listed];
      for (let i = 0; i < names.length; i += STAMP_CHUNK) tx.hset(key, Object.fromEntries(names.slice(i, i + STAMP_CHUNK).map((n) => [n, at])));
      await exec(tx.pexpire(key, 2 * LIVE_MS));
      const rounds = (this.rounds.get(server) ?? 0) + 1;
      this.rounds.set(server, rounds);
      const clear = rounds % CLEAR_EVERY === 0;
      const candidates = Object.keys(this.servers[server] ?? {}).filter((tool) => !listed.has(tool));
      if (candidates.length === 0 && !clear) return;
      const removed = await this.redis.pinsSweep(toolsKey(server), key, VERSION, [this.store.key(CHANNEL), server, String(LIVE_MS), MARK, clear ? '1' : '0', ...candidates]);
      if (removed > 0) {
        this.keeper.log.info({ server, removed }, 'tool pins pruned: tools no daemon lists any more');
        await this.refresh();
      }
    } catch (err) {
      this.failed(err, { server }, 'tool pins not swept');
    }
  }
}

/** Runs a pipeline; rejects with the first command's error. */
async function exec(tx: ReturnType<Redis['pipeline']>): Promise<[Error | null, unknown][]> {
  const res = await tx.exec();
  const failed = res?.find(([err]) => err);
  if (!res || failed) throw failed?.[0] ?? new Error('no answer');
  return res;
}

/** A server's record as HGETALL gives it; undefined when the server is not recorded. */
function fromHash(hash: Record<string, string>): ServerPins | undefined {
  if (hash[MARK] === undefined) return undefined;
  const out: ServerPins = {};
  for (const [tool, text] of Object.entries(hash)) {
    if (tool === MARK) continue;
    try {
      const pin = JSON.parse(text) as Pinned;
      if (pin && typeof pin === 'object' && pin.fields && typeof pin.fields === 'object') out[tool] = pin;
    } catch {
      // not ours: a tool without a valid record is a new tool (held)
    }
  }
  return out;
}

function pairsOf(flat: string[]): [string, string][] {
  const out: [string, string][] = [];
  for (let i = 0; i + 1 < flat.length; i += 2) out.push([flat[i]!, flat[i + 1]!]);
  return out;
}

function now(): string {
  return new Date().toISOString();
}
