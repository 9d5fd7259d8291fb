// Logins in the shared store (Redis), for a cluster of daemons: `login:<key>` holds the
// login sealed (seal.ts; never plain; the key is store.ts's loginKey: the server's name, or
// `<server>@<client>` for a perClient server's login for one client, and what is called
// `server` below is that key), `mcpmux login`/`logout` announce on the `logins` channel
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
// them all holding a refresh token the authorization server has already replaced. A refresh
// whose grant succeeded but whose write failed (Redis dropped in between) is kept in this
// process (the old refresh token is spent) and written back, under the lock, once the store
// answers again.
//
// A blob that does not open is an error, never "no login": a daemon with another key would
// otherwise get a client-credentials token of its own and overwrite the other daemons' login,
// and they its, back and forth.

import { randomBytes } from 'node:crypto';
import type { Config } from '../../config/types.js';
import { RpcError } from '../../jsonrpc/message.js';
import type { Logger } from '../../observe/logger.js';
import { MuxError } from '../../protocol/mcp.js';
import type { SharedStore } from '../../store/store.js';
import { loginKey, openLogin, sealLogin } from './seal.js';
import { fileLogins, loginCommandOfKey, useLoginStore, type LoginChange, type LoginStore, type StoredLogin } from './store.js';

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
  /** Refreshed logins the store could not take (it was down): used here, written back when it is up; with the refresh token they replaced. */
  private readonly unsaved = new Map<string, { login: StoredLogin; replaced: string | undefined }>();
  private writingBack: Promise<void> | undefined;

  constructor(
    private readonly store: SharedStore,
    secret: string,
    private readonly log: Logger,
  ) {
    this.key = loginKey(secret);
    const env = Number(process.env[REFRESH_LOCK_ENV]);
    this.lockMs = Number.isInteger(env) && env > 0 ? env : DEFAULT_LOCK_MS;
    if (!(store.redis as unknown as Unlocker).mcpmuxLoginUnlock) store.redis.defineCommand('mcpmuxLoginUnlock', { numberOfKeys: 1, lua: UNLOCK });
    store.onHealth((h) => h === 'up' && this.writeBack());
  }

  async read(server: string): Promise<StoredLogin | undefined> {
    let sealed: string | null;
    try {
      sealed = await this.store.redis.get(`login:${server}`);
    } catch (err) {
      const failed = this.store.failed(`the login for server ${server}`, err);
      if (this.store.onError === 'open' && this.seen.has(server)) return this.seen.get(server);
      throw failed;
    }
    // A refresh this process could not store yet is newer than what the store holds.
    const unsaved = this.unsaved.get(server);
    if (unsaved) {
      this.writeBack();
      return unsaved.login;
    }
    const login = sealed === null ? undefined : this.open(server, sealed);
    this.seen.set(server, login);
    return login;
  }

  async write(server: string, login: StoredLogin, change: LoginChange): Promise<void> {
    try {
      await this.store.redis.set(`login:${server}`, sealLogin(this.key, this.store.config.redis.keyPrefix, server, login));
    } catch (err) {
      throw this.store.failed(`storing the login for server ${server}`, err);
    }
    this.unsaved.delete(server);
    this.seen.set(server, login);
    if (change === 'login') await this.announce(server);
  }

  /**
   * A refresh that the authorization server granted and the store could not take: the old
   * refresh token is spent, so the new login is the only one that works. Used by this process
   * (as the last login seen) and written back under the lock when the store answers, unless
   * someone stored another login meanwhile (a new `mcpmux login`).
   */
  keepUnsaved(server: string, login: StoredLogin, replaced: string | undefined, err: unknown): void {
    this.unsaved.set(server, { login, replaced });
    this.seen.set(server, login);
    this.log.warn(
      { server, err: err instanceof Error ? err.message : String(err) },
      `the refreshed login for server ${server} could not be stored in the shared store; this daemon uses it and stores it when the store answers again`,
    );
  }

  /** Stores the refreshed logins the store could not take (once at a time). */
  private writeBack(): void {
    if (this.unsaved.size === 0 || this.writingBack || this.store.health !== 'up') return;
    this.writingBack = (async () => {
      for (const [server, { login, replaced }] of [...this.unsaved]) {
        try {
          await this.exclusive(server, async () => {
            const sealed = await this.store.redis.get(`login:${server}`);
            const current = sealed === null ? undefined : this.tryOpen(server, sealed);
            // Redis lost it, or it still holds what the refresh replaced (or that with its tokens forgotten): ours is newer.
            const ours = current === undefined || !current.tokens || current.tokens.refresh_token === replaced;
            if (this.unsaved.get(server)?.login !== login) return;
            if (ours) await this.store.redis.set(`login:${server}`, sealLogin(this.key, this.store.config.redis.keyPrefix, server, login));
            this.unsaved.delete(server);
            this.seen.set(server, ours ? login : current);
            this.log.info({ server }, ours ? 'the refreshed login kept while the shared store was down is stored' : 'a newer login was stored meanwhile; the refreshed one kept while the shared store was down is dropped');
          });
        } catch (err) {
          this.log.debug({ server, err: (err as Error).message }, 'the refreshed login is not stored yet');
        }
      }
    })().finally(() => (this.writingBack = undefined));
  }

  async delete(server: string): Promise<boolean> {
    let removed: number;
    try {
      removed = await this.store.redis.del(`login:${server}`);
    } catch (err) {
      throw this.store.failed(`removing the login for server ${server}`, err);
    }
    this.unsaved.delete(server);
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
      } catch (err) {
        throw this.store.failed(`refreshing the login for server ${server}`, err);
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
    // A login stored while this daemon could not hear it: every login it asked for may have
    // changed. Heard from when the subscriber is back (pub/sub does not replay what it missed,
    // and it reconnects on its own, not with the command connection).
    const catchUp = () => {
      for (const server of this.seen.keys()) onChange(server);
    };
    let wasDown = false;
    const unhealth = this.store.onHealth((h) => {
      if (h === 'down') wasDown = true;
      else if (h === 'up' && wasDown) {
        wasDown = false;
        catchUp();
      }
    });
    const unsubscribed = this.store.onSubscribed(catchUp);
    return () => {
      stop();
      unhealth();
      unsubscribed();
    };
  }

  where(): string {
    return "the shared store (Redis), encrypted with the key in store.secretEnv's variable";
  }

  /** Every daemon hears of a login or logout (a daemon waiting for one starts its upstream again). */
  private async announce(server: string): Promise<void> {
    try {
      await this.store.publish(CHANNEL, JSON.stringify({ server, by: this.id }));
    } catch (err) {
      throw this.store.failed(`announcing the login for server ${server}`, err);
    }
  }

  private tryOpen(server: string, sealed: string): StoredLogin | undefined {
    try {
      return openLogin(this.key, this.store.config.redis.keyPrefix, server, sealed);
    } catch {
      return undefined;
    }
  }

  /** The login in a blob; throws (-31007) when it does not open: never taken as "no login". */
  private open(server: string, sealed: string): StoredLogin {
    const login = this.tryOpen(server, sealed);
    if (login) {
      this.unopened.delete(server);
      return login;
    }
    const said = `the login stored for server ${server} was sealed with another store key: check store.secretEnv on every daemon (the same value everywhere), or run: ${loginCommandOfKey(server)}`;
    if (!this.unopened.has(server)) {
      this.unopened.add(server);
      this.log.warn({ server }, said);
    }
    throw new RpcError(MuxError.StoreUnavailable, said);
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
