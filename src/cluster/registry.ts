// The cluster's daemons as Redis knows them. Each daemon with `cluster` in its config writes
// `daemon:<id>` (its address, version, start and state) with a short TTL and rewrites it every
// HEARTBEAT_MS: a daemon that dies (SIGKILL, a machine gone) leaves the list by itself within
// TTL_MS, with no one to clean up after it. The ids are also kept in the sorted set `daemons`
// (scored by the last heartbeat), so that the list is read without scanning the keyspace; an
// id whose key has expired is dropped from it by whoever reads it.
//
// Used by /status (the list) and by forwarding (is a requestState's owner still alive?). While
// Redis is down the heartbeat fails quietly (the store says once that it is down) and starts
// again when it is back; the list says it cannot be read.

import type { SharedStore } from '../store/store.js';
import type { Logger } from '../observe/logger.js';
import { VERSION } from '../version.js';
import type { ClusterIdentity } from './identity.js';

/** How often a daemon says it is alive. */
export const HEARTBEAT_MS = 1_000;
/** How long its entry outlives its last heartbeat (several missed beats: a busy event loop is not death). */
export const TTL_MS = 5_000;
/** Ids in `daemons` not seen for this long are dropped by any heartbeat (their keys expired long ago). */
const FORGET_MS = 10 * 60_000;

export type DaemonState = 'ready' | 'draining';

/** What `daemon:<id>` holds. */
export interface DaemonRecord {
  id: string;
  advertiseUrl: string;
  version: string;
  /** When it started, ms since the epoch. */
  startedAt: number;
  state: DaemonState;
}

/** A daemon in the list /status shows. */
export interface KnownDaemon extends DaemonRecord {
  /** Milliseconds since its last heartbeat reached Redis. */
  seenMsAgo: number;
}

/** /status's `cluster` section. */
export interface ClusterStatus {
  id: string;
  advertiseUrl: string;
  state: DaemonState;
  store: { health: string; reason?: string };
  daemons: { id: string; advertiseUrl: string; state: DaemonState; version: string; startedAt: string; uptimeS: number; seenMsAgo: number; self: boolean }[] | null;
  error?: string;
}

const SET = 'daemons';
const keyOf = (id: string): string => `daemon:${id}`;

export class ClusterRegistry {
  private state: DaemonState = 'ready';
  private readonly startedAt = Date.now();
  private timer: NodeJS.Timeout | undefined;
  private unwatch: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly store: SharedStore,
    readonly self: ClusterIdentity,
    private readonly log: Logger,
  ) {}

  /** Registers this daemon now and every HEARTBEAT_MS from now on. */
  start(): void {
    void this.beat();
    this.timer = setInterval(() => void this.beat(), HEARTBEAT_MS);
    this.timer.unref();
    // A Redis back (perhaps empty: restarted without persistence) hears of this daemon at once.
    this.unwatch = this.store.onHealth((h) => void (h === 'up' && this.beat()));
  }

  get daemonState(): DaemonState {
    return this.state;
  }

  /** Draining (SIGTERM): said at once, so the others see it before the entry expires. */
  setState(state: DaemonState): void {
    this.state = state;
    if (this.timer) void this.beat();
  }

  /** Leaves the list (an orderly shutdown). */
  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.timer);
    this.unwatch?.();
    try {
      await this.store.redis.multi().del(keyOf(this.self.id)).zrem(SET, this.self.id).exec();
    } catch {
      // Redis down: the entry expires by itself.
    }
  }

  /**
   * The daemon `id` as Redis knows it: its record, null when it is not alive (never was, or
   * its entry expired), undefined when Redis cannot say (down).
   */
  async lookup(id: string): Promise<DaemonRecord | null | undefined> {
    try {
      const raw = await this.store.redis.get(keyOf(id));
      return raw === null ? null : parse(raw) ?? null;
    } catch {
      return undefined;
    }
  }

  /** Every daemon alive, this one included, oldest first; or why the list cannot be read. */
  async list(): Promise<{ daemons: KnownDaemon[] } | { error: string }> {
    let ids: string[];
    try {
      ids = await this.store.redis.zrange(SET, '0', '-1');
      if (ids.length === 0) return { daemons: [] };
      const p = this.store.redis.pipeline();
      for (const id of ids) p.get(keyOf(id)).pttl(keyOf(id));
      const replies = (await p.exec()) ?? [];
      const daemons: KnownDaemon[] = [];
      const gone: string[] = [];
      ids.forEach((id, i) => {
        const raw = replies[2 * i]?.[1];
        const pttl = replies[2 * i + 1]?.[1];
        const record = typeof raw === 'string' ? parse(raw) : undefined;
        if (!record) return void gone.push(id);
        daemons.push({ ...record, seenMsAgo: typeof pttl === 'number' && pttl >= 0 ? Math.max(0, TTL_MS - pttl) : 0 });
      });
      if (gone.length > 0) await this.store.redis.zrem(SET, ...gone).catch(() => {});
      daemons.sort((a, b) => a.startedAt - b.startedAt || a.id.localeCompare(b.id));
      return { daemons };
    } catch (err) {
      return { error: this.store.reason ?? (err as Error).message };
    }
  }

  /**
   * The `cluster` section of /status: this daemon, the store's health, and the daemons Redis
   * knows (null while it cannot be read, with why).
   */
  async status(): Promise<ClusterStatus> {
    const listed = await this.list();
    const now = Date.now();
    return {
      id: this.self.id,
      advertiseUrl: this.self.advertiseUrl,
      state: this.state,
      store: { health: this.store.health, ...(this.store.reason !== undefined && { reason: this.store.reason }) },
      daemons:
        'error' in listed
          ? null
          : listed.daemons.map((d) => ({
              id: d.id,
              advertiseUrl: d.advertiseUrl,
              state: d.state,
              version: d.version,
              startedAt: new Date(d.startedAt).toISOString(),
              uptimeS: Math.max(0, Math.round((now - d.startedAt) / 1000)),
              seenMsAgo: d.seenMsAgo,
              self: d.id === this.self.id,
            })),
      ...('error' in listed && { error: `cannot read the cluster's daemons from the shared store: ${listed.error}` }),
    };
  }

  private async beat(): Promise<void> {
    if (this.stopped) return;
    const record: DaemonRecord = { id: this.self.id, advertiseUrl: this.self.advertiseUrl, version: VERSION, startedAt: this.startedAt, state: this.state };
    const now = Date.now();
    try {
      await this.store.redis
        .multi()
        .set(keyOf(this.self.id), JSON.stringify(record), 'PX', TTL_MS)
        .zadd(SET, now, this.self.id)
        .zremrangebyscore(SET, '-inf', now - FORGET_MS)
        .exec();
    } catch (err) {
      // The store reports its own outage once; a beat that fails while it is up is worth a debug line.
      this.log.debug({ err: (err as Error).message }, 'cluster heartbeat failed');
    }
    // Stopped while the beat was on its way: the entry goes again.
    if (this.stopped) await this.store.redis.del(keyOf(this.self.id)).catch(() => {});
  }
}

function parse(raw: string): DaemonRecord | undefined {
  try {
    const r = JSON.parse(raw) as DaemonRecord;
    return typeof r?.id === 'string' && typeof r.advertiseUrl === 'string' ? r : undefined;
  } catch {
    return undefined;
  }
}
