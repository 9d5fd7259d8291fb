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

import { Redis, type RedisOptions } from 'ioredis';
import type { StoreConfig } from '../config/types.js';
import { RpcError } from '../jsonrpc/message.js';
import type { Logger } from '../observe/logger.js';
import { MuxError } from '../protocol/mcp.js';

export type StoreHealth = 'connecting' | 'up' | 'down';

/** How long one command may take before it counts as failed (a Redis that hangs is down). */
const COMMAND_TIMEOUT_MS = 2_000;
/** Reconnect back-off: 100 ms more per attempt, at most 2 s apart (a Redis back is seen within 2 s). */
const retryStrategy = (attempt: number): number => Math.min(100 * attempt, 2_000);

export class SharedStore {
  /** Commands; keys are prefixed by ioredis (`keyPrefix`). */
  readonly redis: Redis;
  /** The subscriber connection (a connection in subscribe mode takes no other command), made on first use. */
  private sub: Redis | undefined;
  private readonly handlers = new Map<string, Set<(message: string) => void>>();
  private readonly listeners = new Set<(health: StoreHealth) => void>();
  private state: StoreHealth = 'connecting';
  private why: string | undefined;
  private closed = false;

  constructor(
    readonly config: StoreConfig,
    private readonly log: Logger,
  ) {
    this.redis = new Redis(config.redis.url, { ...this.options(), keyPrefix: config.redis.keyPrefix });
    this.redis.on('ready', () => this.set('up'));
    this.redis.on('error', (err: Error) => this.set('down', describe(err)));
    this.redis.on('close', () => this.set('down', this.why ?? 'connection closed'));
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
    return new RpcError(MuxError.StoreUnavailable, `${what} needs mcpmux's shared store (Redis), which is unreachable now${this.why ? ` (${this.why})` : ''}; try again shortly`);
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
      this.sub = new Redis(this.config.redis.url, this.options());
      this.sub.on('error', () => {}); // the command connection reports health; this one only listens
      // Every channel again once connected: a SUBSCRIBE sent before (no offline queue) was refused,
      // and ioredis resubscribes after a reconnect only the channels it had subscribed.
      const sub = this.sub;
      sub.on('ready', () => {
        const channels = [...this.handlers.keys()];
        if (channels.length > 0) sub.subscribe(...channels).catch(() => {});
      });
      this.sub.on('message', (ch: string, msg: string) => {
        for (const h of this.handlers.get(ch) ?? []) h(msg);
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
    this.listeners.clear();
    await Promise.allSettled([quit(this.redis), this.sub && quit(this.sub)]);
  }

  private options(): RedisOptions {
    return {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy,
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
    for (const l of [...this.listeners]) l(health);
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
  const r = new Redis(config.redis.url, { lazyConnect: true, enableOfflineQueue: false, maxRetriesPerRequest: 0, connectTimeout: timeoutMs, commandTimeout: timeoutMs, retryStrategy: () => null });
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
