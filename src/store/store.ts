// The shared store: one Redis that several mcpmux daemons use for the state they must agree on
// (rate-limit buckets, tool pins, logins, the cluster's daemons). Without `store` in the config
// there is none, and every part keeps its state in this process (and pins and logins in files).
//
// ioredis (not node-redis): commands fail at once while the connection is down
// (`enableOfflineQueue: false`) instead of queueing behind a reconnect, which is what
// `onError` needs to decide on the spot; it reconnects by itself with the back-off we give it;
// `defineCommand` runs a Lua script by its SHA and loads it again after a Redis restart
// (NOSCRIPT); and `keyPrefix` puts the prefix on every key, Lua KEYS included.
//
// The store says whether it is up, once per change, in the log and to whoever listens
// (`/readyz`, `/status`, metrics): a Redis that flaps must not fill the log.
//
// A Redis that hangs (stopped, or a network that drops packets without a reset) closes nothing:
// ioredis stays "ready" while every command times out. So a command that times out, or a PING
// the watchdog sends every second that does, marks the store down and drops the connection to
// make a new one (which is ready only once Redis answers again); TCP keep-alive catches a peer
// gone silent while idle.

import { createRequire } from 'node:module';
import type { Redis, RedisOptions } from 'ioredis';
import type { StoreConfig } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { MuxError } from '../protocol/mcp.js';

export type StoreHealth = 'connecting' | 'up' | 'down';

/** How long one command may take before it counts as failed (a Redis that hangs is down). */
const COMMAND_TIMEOUT_MS = 2_000;
/** Reconnect back-off: 100 ms more per attempt, at most 2 s apart (a Redis back is seen within 2 s). */
const retryStrategy = (attempt: number): number => Math.min(100 * attempt, 2_000);
/** How often the watchdog pings a connection that says it is ready. */
const WATCHDOG_MS = 1_000;
/** TCP keep-alive's first probe after this long idle (ms). */
const KEEPALIVE_MS = 10_000;

/**
 * ioredis, loaded when a store is made: every command imports this module (pins, rate limits and
 * logins can live in the store), but only a config with `store` needs Redis, and loading it
 * costs a host's `mcpmux stdio` start-up more than anything else it does not use.
 */
let ioredis: typeof import('ioredis') | undefined;
function newRedis(url: string, options: RedisOptions): Redis {
  ioredis ??= createRequire(import.meta.url)('ioredis') as typeof import('ioredis');
  return new ioredis.Redis(url, options);
}

/** Whether a command failed because of the connection (down, hung), not because Redis refused it (OOM, NOPERM, WRONGTYPE...). */
export function connectionError(err: unknown): boolean {
  return !(err instanceof Error && err.name === 'ReplyError');
}

export class SharedStore {
  /** Commands; keys are prefixed by ioredis (`keyPrefix`). */
  readonly redis: Redis;
  /** The subscriber connection (a connection in subscribe mode takes no other command), made on first use. */
  private sub: Redis | undefined;
  private readonly handlers = new Map<string, Set<(message: string) => void>>();
  private readonly listeners = new Set<(health: StoreHealth) => void>();
  private readonly subscribedListeners = new Set<() => void>();
  private state: StoreHealth = 'connecting';
  private why: string | undefined;
  private closed = false;
  private readonly watchdog: NodeJS.Timeout;
  private pinging = false;
  /** Since when the connection has been made but not ready (a hung Redis accepts connections and never answers). */
  private notReadySince: number | undefined;
  /** Refusals (not outages) already logged at warn, by message: said once each. */
  private readonly refusalsSaid = new Set<string>();

  constructor(
    readonly config: StoreConfig,
    private readonly log: Logger,
  ) {
    this.redis = newRedis(config.redis.url, { ...this.options(), keyPrefix: config.redis.keyPrefix });
    this.redis.on('ready', () => this.set('up'));
    this.redis.on('error', (err: Error) => this.set('down', describe(err)));
    this.redis.on('close', () => this.set('down', this.why ?? 'connection closed'));
    this.watchdog = setInterval(() => this.watch(), WATCHDOG_MS);
    this.watchdog.unref();
  }

  get health(): StoreHealth {
    return this.state;
  }

  /** Why the store is down (no secrets: the URL is never part of it). */
  get reason(): string | undefined {
    return this.state === 'up' ? undefined : this.why;
  }

  get onError(): 'closed' | 'open' {
    return this.config.onError;
  }

  /** The full key of a name (what `redis` commands take unprefixed; for Lua scripts' ARGV and for channels). */
  key(name: string): string {
    return this.config.redis.keyPrefix + name;
  }

  /** Resolves when the store is up, or after `timeoutMs` (then it is down, and says why). Never rejects. */
  async ready(timeoutMs = 3_000): Promise<StoreHealth> {
    if (this.state !== 'up') {
      await new Promise<void>((resolve) => {
        const stop = this.onHealth((h) => void (h === 'up' && finish()));
        const timer = setTimeout(finish, timeoutMs);
        timer.unref();
        function finish(): void {
          clearTimeout(timer);
          stop();
          resolve();
        }
      });
    }
    if (this.state === 'connecting') this.set('down', this.why ?? `no answer within ${timeoutMs} ms`);
    return this.state;
  }

  /** Calls `listener` on every change of health. Returns the function that stops it. */
  onHealth(listener: (health: StoreHealth) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The error a call that needs the store gets while it is down and `onError` is "closed":
   * what failed and that it is not the host's fault.
   */
  unavailable(what: string): RpcError {
    // The reason (an address, say) is in the daemon's log, not in what a host sees.
    return new RpcError(MuxError.StoreUnavailable, `${what} needs mcpmux's shared store (Redis), which is unreachable now; try again shortly`);
  }

  /**
   * The error a call gets when a command for `what` failed with `err`: an outage is said as
   * `unavailable` (the store logs it once itself; a timed-out command marks a hung Redis
   * down), a refusal by Redis (OOM, NOPERM, WRONGTYPE...) is logged at warn once per message
   * and named by its code, for it will not pass by waiting.
   */
  failed(what: string, err: unknown): RpcError {
    if (connectionError(err)) {
      if (err instanceof Error && /timed out/i.test(err.message)) this.hung(describe(err));
      this.log.debug({ err: err instanceof Error ? describe(err) : String(err) }, `${what}: the shared store did not answer`);
      return this.unavailable(what);
    }
    const message = describe(err as Error);
    if (this.refusalsSaid.size > 100) this.refusalsSaid.clear();
    if (!this.refusalsSaid.has(message)) {
      this.refusalsSaid.add(message);
      this.log.warn({ err: message }, `the shared store (Redis) refused a command (${what}): check its configuration (maxmemory-policy, ACL user)`);
    }
    const code = /^[A-Z]+/.exec(message)?.[0] ?? 'ERR';
    return new RpcError(MuxError.StoreUnavailable, `${what} failed: mcpmux's shared store (Redis) refused it (${code}); the daemon's log says why`);
  }

  /** Calls `fn` each time the subscriber connection has (re)subscribed: messages sent while it was away were missed. Returns the function that stops it. */
  onSubscribed(fn: () => void): () => void {
    this.subscribedListeners.add(fn);
    return () => this.subscribedListeners.delete(fn);
  }

  /** Publishes on a channel of this store's (prefixed). Rejects while the store is down. */
  async publish(channel: string, message: string): Promise<void> {
    await this.redis.publish(this.key(channel), message);
  }

  /**
   * Calls `onMessage` for every message on `channel` (prefixed), across reconnects (ioredis
   * subscribes again). Returns the function that stops it.
   */
  subscribe(channel: string, onMessage: (message: string) => void): () => void {
    const full = this.key(channel);
    if (!this.sub) {
      // No keyPrefix here: channels are named in full above (ioredis does not prefix them).
      this.sub = newRedis(this.config.redis.url, this.options());
      this.sub.on('error', () => {}); // the command connection reports health; this one only listens
      // Every channel again once connected: a SUBSCRIBE sent before (no offline queue) was refused,
      // and ioredis resubscribes after a reconnect only the channels it had subscribed.
      const sub = this.sub;
      sub.on('ready', () => {
        const channels = [...this.handlers.keys()];
        if (channels.length === 0) return;
        sub.subscribe(...channels).then(
          () => {
            for (const fn of [...this.subscribedListeners]) this.safely(fn, 'a catch-up after the subscriber reconnected');
          },
          () => {},
        );
      });
      this.sub.on('message', (ch: string, msg: string) => {
        for (const h of this.handlers.get(ch) ?? []) this.safely(() => h(msg), `a message on ${ch}`);
      });
    }
    let set = this.handlers.get(full);
    if (!set) {
      this.handlers.set(full, (set = new Set()));
      this.sub.subscribe(full).catch(() => {}); // resubscribed on reconnect (autoResubscribe)
    }
    set.add(onMessage);
    return () => {
      set!.delete(onMessage);
      if (set!.size === 0 && !this.closed) {
        this.handlers.delete(full);
        this.sub?.unsubscribe(full).catch(() => {});
      }
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.watchdog);
    this.listeners.clear();
    this.subscribedListeners.clear();
    await Promise.allSettled([quit(this.redis), this.sub && quit(this.sub)]);
  }

  private options(): RedisOptions {
    return {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy,
      keepAlive: KEEPALIVE_MS,
      // A NOAUTH or WRONGPASS is not going to fix itself by reconnecting faster; the back-off holds.
      lazyConnect: false,
    };
  }

  private set(health: StoreHealth, why?: string): void {
    if (this.closed) return;
    if (why !== undefined) this.why = why;
    if (health === this.state) return;
    const was = this.state;
    this.state = health;
    if (health === 'up') {
      if (was === 'down') this.log.info('the shared store (Redis) is reachable again');
      this.why = undefined;
    } else {
      this.log.error(
        { err: this.why, onError: this.config.onError },
        this.config.onError === 'closed'
          ? 'the shared store (Redis) is unreachable: calls that need it fail until it is back (store.onError "closed")'
          : 'the shared store (Redis) is unreachable: rate limits are skipped, pins and logins use the last values seen, until it is back (store.onError "open")',
      );
    }
    for (const l of [...this.listeners]) this.safely(() => l(health), 'a store health listener');
  }

  /** A handler that throws is logged, never let loose on the daemon (it runs from a socket's event). */
  private safely(fn: () => void, what: string): void {
    try {
      fn();
    } catch (err) {
      this.log.error({ err: (err as Error)?.message ?? String(err) }, `${what} threw; ignored`);
    }
  }

  /** Each second: a ready connection must answer PING; one made but never ready is made again. */
  private watch(): void {
    if (this.closed) return;
    const status = this.redis.status;
    if (status === 'ready') {
      this.notReadySince = undefined;
      if (this.pinging) return;
      this.pinging = true;
      this.redis
        .ping()
        .catch((err: Error) => {
          if (connectionError(err) && /timed out/i.test(err.message)) this.hung(`no answer to PING within ${COMMAND_TIMEOUT_MS} ms`);
        })
        .finally(() => (this.pinging = false));
    } else if (status === 'connect') {
      // Connected, but the ready check (INFO) is not answered: the same hang.
      this.notReadySince ??= Date.now();
      if (Date.now() - this.notReadySince > 2 * COMMAND_TIMEOUT_MS) {
        this.notReadySince = undefined;
        this.redis.disconnect(true);
      }
    } else {
      this.notReadySince = undefined;
    }
  }

  /** Redis hangs: down now, and a new connection (ready once Redis answers again). */
  private hung(why: string): void {
    if (this.closed || this.redis.status !== 'ready') return;
    this.set('down', why);
    this.redis.disconnect(true);
  }
}

/** An error as a log line may show it: its code or message, never the URL (it may hold a password). */
function describe(err: Error): string {
  const code = (err as NodeJS.ErrnoException).code;
  const msg = err.message.replace(/rediss?:\/\/\S+/g, '(url)');
  return code && !msg.includes(code) ? `${code}: ${msg}` : msg;
}

async function quit(r: Redis): Promise<void> {
  try {
    if (r.status === 'ready') await r.quit();
    else r.disconnect();
  } catch {
    r.disconnect();
  }
}

/**
 * For `mcpmux check --probe`: connects, authenticates and pings once. Returns undefined when
 * the store answers, else why not.
 */
export async function probeStore(config: StoreConfig, timeoutMs = 3_000): Promise<string | undefined> {
  const r = newRedis(config.redis.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: timeoutMs, commandTimeout: timeoutMs, retryStrategy: () => null });
  // connect() rejects with "Connection is closed"; the reason (ECONNREFUSED, WRONGPASS...) comes as an event.
  let cause: Error | undefined;
  r.on('error', (err: Error) => (cause ??= err));
  try {
    await r.connect();
    await r.ping();
    return undefined;
  } catch (err) {
    return describe(cause ?? (err as Error));
  } finally {
    r.disconnect();
  }
}
