// Logins in the shared store (Redis), for a cluster of daemons: `login:<server>` holds the
// login sealed (seal.ts; never plain), `mcpmux login`/`logout` announce on the `logins` channel
// so every daemon starts an upstream that waited for one, and a lock (`lock:refresh:<server>`)
// lets one daemon at a time refresh a login: the others wait for it, read the login again and
// find the new token there (one refresh reaches the authorization server, not one per daemon).
//
// The lock is SET NX PX with a random token and released by a compare-and-delete script, so a
// daemon never frees a lock that lapsed and was taken by another. A daemon killed while holding
// it holds it no longer than its timeout (MCPMUX_REFRESH_LOCK_MS, 30 s by default); the token
// request it made is cut off before that, so a slow authorization server cannot make two
// refreshes overlap.
//
// While Redis is down, a login is the last one this daemon read (store.onError "open", kept in
// this process only, decrypted) or an error (-31007, "closed"). No refresh happens while it is
// down, either way: with rotating refresh tokens, a refresh no other daemon can see would leave
// them all holding a refresh token the authorization server has already replaced.

import { randomBytes } from 'node:crypto';
import type { Config } from '../../config/types.js';
import type { Logger } from '../../observe/logger.js';
import type { SharedStore } from '../../store/store.js';
import { loginKey, openLogin, sealLogin } from './seal.js';
import { fileLogins, useLoginStore, type LoginChange, type LoginStore, type StoredLogin } from './store.js';

/** Overrides how long a refresh lock may be held (ms; tests shorten it). */
export const REFRESH_LOCK_ENV = 'MCPMUX_REFRESH_LOCK_MS';
const DEFAULT_LOCK_MS = 30_000;
/** How often a daemon waiting for another's refresh looks whether the lock is free. */
const POLL_MS = 50;
const CHANNEL = 'logins';

const UNLOCK = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0";
type Unlocker = { mcpmuxLoginUnlock?(key: string, token: string): Promise<number> };

export class SharedLogins implements LoginStore {
  private readonly key: Buffer;
  private readonly lockMs: number;
  /** This process, in what it announces: its own announcements are no news to it. */
  private readonly id = randomBytes(8).toString('hex');
  /** The last login read per server (undefined: none stored), for store.onError "open". In this process only. */
  private readonly seen = new Map<string, StoredLogin | undefined>();
  /** Servers whose sealed login did not open: said once, not on every request. */
  private readonly unopened = new Set<string>();

  constructor(
    private readonly store: SharedStore,
    secret: string,
    private readonly log: Logger,
  ) {
    this.key = loginKey(secret);
    const env = Number(process.env[REFRESH_LOCK_ENV]);
    this.lockMs = Number.isInteger(env) && env > 0 ? env : DEFAULT_LOCK_MS;
    if (!(store.redis as unknown as Unlocker).mcpmuxLoginUnlock) store.redis.defineCommand('mcpmuxLoginUnlock', { numberOfKeys: 1, lua: UNLOCK });
  }

  async read(server: string): Promise<StoredLogin | undefined> {
    let sealed: string | null;
    try {
      sealed = await this.store.redis.get(`login:${server}`);
    } catch (err) {
      this.log.debug({ server, err: (err as Error).message }, 'cannot read the login from the shared store');
      if (this.store.onError === 'open' && this.seen.has(server)) return this.seen.get(server);
      throw this.store.unavailable(`the login for server ${server}`);
    }
    const login = sealed === null ? undefined : this.open(server, sealed);
    this.seen.set(server, login);
    return login;
  }

  async write(server: string, login: StoredLogin, change: LoginChange): Promise<void> {
    try {
      await this.store.redis.set(`login:${server}`, sealLogin(this.key, server, login));
    } catch {
      throw this.store.unavailable(`storing the login for server ${server}`);
    }
    this.seen.set(server, login);
    if (change === 'login') await this.announce(server);
  }

  async delete(server: string): Promise<boolean> {
    let removed: number;
    try {
      removed = await this.store.redis.del(`login:${server}`);
    } catch {
      throw this.store.unavailable(`removing the login for server ${server}`);
    }
    this.seen.delete(server);
    await this.announce(server);
    return removed > 0;
  }

  async exclusive<T>(server: string, fn: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const lock = `lock:refresh:${server}`;
    const token = randomBytes(16).toString('hex');
    // A holder ends (or lapses) within lockMs; waiters behind it only read. Past twice that, something is wrong.
    const giveUp = Date.now() + 2 * this.lockMs + 1_000;
    for (;;) {
      let got: string | null;
      try {
        got = await this.store.redis.set(lock, token, 'PX', this.lockMs, 'NX');
      } catch {
        throw this.store.unavailable(`refreshing the login for server ${server}`);
      }
      if (got === 'OK') break;
      if (Date.now() > giveUp) throw new Error(`another daemon kept the refresh of the login for server ${server} for over ${this.lockMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
    // What `fn` asks the authorization server must end before the lock can lapse under it.
    const abort = new AbortController();
    const timer = setTimeout(() => abort.abort(new Error('the refresh took longer than its lock allows')), Math.max(this.lockMs - Math.min(2_000, this.lockMs / 5), 1));
    try {
      return await fn(abort.signal);
    } finally {
      clearTimeout(timer);
      // Only our own lock: if it lapsed and another daemon took it, that one is left alone.
      await (this.store.redis as unknown as Required<Unlocker>).mcpmuxLoginUnlock(lock, token).catch(() => {});
    }
  }

  watch(onChange: (server: string) => void): () => void {
    const stop = this.store.subscribe(CHANNEL, (message) => {
      let m: { server?: unknown; by?: unknown };
      try {
        m = JSON.parse(message) as typeof m;
      } catch {
        return;
      }
      if (typeof m.server === 'string' && m.by !== this.id) onChange(m.server);
    });
    // A login stored while this daemon could not hear it: every login it asked for may have changed.
    let wasDown = false;
    const unhealth = this.store.onHealth((h) => {
      if (h === 'down') wasDown = true;
      else if (h === 'up' && wasDown) {
        wasDown = false;
        for (const server of this.seen.keys()) onChange(server);
      }
    });
    return () => {
      stop();
      unhealth();
    };
  }

  where(): string {
    return "the shared store (Redis), encrypted with the key in store.secretEnv's variable";
  }

  /** Every daemon hears of a login or logout (a daemon waiting for one starts its upstream again). */
  private async announce(server: string): Promise<void> {
    try {
      await this.store.publish(CHANNEL, JSON.stringify({ server, by: this.id }));
    } catch {
      throw this.store.unavailable(`announcing the login for server ${server}`);
    }
  }

  private open(server: string, sealed: string): StoredLogin | undefined {
    try {
      const login = openLogin(this.key, server, sealed);
      this.unopened.delete(server);
      return login;
    } catch {
      if (!this.unopened.has(server)) {
        this.unopened.add(server);
        this.log.warn({ server }, `the login stored for server ${server} does not open with this daemon's store key (does store.secretEnv hold the same value on every daemon?); run: mcpmux login ${server}`);
      }
      return undefined;
    }
  }
}

/**
 * Chooses where this process keeps logins: in the shared store when the config has one and its
 * key (store.secretEnv), else in the state folder's files as without a store (then each daemon
 * has its own logins, which a daemon with remote servers says once).
 */
export function chooseLoginStore(config: Config, store: SharedStore | undefined, log: Logger): void {
  if (store && config.store?.secret) return useLoginStore(new SharedLogins(store, config.store.secret, log));
  useLoginStore(fileLogins);
  if (store && config.servers.some((s) => s.transport === 'http')) {
    log.info('OAuth logins stay in this daemon\'s state folder: the store has no key for them (store.secretEnv); each daemon needs its own mcpmux login');
  }
}
