// The access token an HTTP upstream's requests carry, from the login `mcpmux login` stored:
// only for the server it was issued for (the stored resource must be this server's URL),
// refreshed shortly before it expires and once when the server answers 401. A refresh the
// authorization server refuses forgets the tokens: the upstream needs a new login.
// A `perClient` server's connection for one host client reads and writes only that client's
// login (its login key): another client's token is never read here.
// The machine grants (client_credentials, token_exchange, jwt_bearer: machine.ts) need no login:
// a token is got when there is none and renewed before it expires (never first a 401); a grant
// the server refused is not asked again with the same input for REFUSED_MS (no loop of requests
// each refused), and its message, which says what to fix, is every request's error meanwhile.

import { createHash } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { RemoteServerConfig } from '../../config/types.js';
import { addRuntimeSecrets, removeRuntimeSecrets, type Logger } from '../../observe/logger.js';
import { GrantError, machineGrant, machineToken, needsSubject } from './machine.js';
import { bearerChallenge, canonicalResource, httpOptions } from './discover.js';
import { clientAuth, mergeScopes } from './client-auth.js';
import { describe, tokensOf } from './responses.js';
import { exclusiveLogin, holdLogin, keepLoginsInMemory, loginCommand, loginKey, readLogin, writeChallenge, writeLogin, writeRefreshed, type StoredLogin } from './store.js';

/** Refresh this long before the access token expires (clock skew, the request's own time). */
const EARLY_MS = 60_000;
/** A machine grant the server refused is not asked again with the same input for this long. */
const REFUSED_MS = 60_000;

/** Refusals per login key: what was asked (a digest), until when not to ask it again, and why. */
const refusals = new Map<string, { input: string; until: number; message: string }>();

const expiring = (t: NonNullable<StoredLogin['tokens']>) => t.expires_at !== undefined && t.expires_at - EARLY_MS < Date.now();
const expired = (t: NonNullable<StoredLogin['tokens']>) => t.expires_at !== undefined && t.expires_at <= Date.now();

export class OAuthTokens {
  private refreshing: Promise<boolean> | undefined;
  private readonly url: string;

  constructor(
    private readonly config: RemoteServerConfig,
    private readonly log: Logger,
    who?: { client?: string; subject?: () => string | undefined },
  ) {
    this.server = config.name;
    this.client = who?.client;
    this.subject = who?.subject;
    this.key = loginKey(config.name, who?.client);
    this.loginCommand = loginCommand(config.name, who?.client);
    this.url = canonicalResource(config.url);
    this.usable = !Object.keys(config.headers).some((h) => h.toLowerCase() === 'authorization');
    // A grant acting for the host gets per-person tokens again at will: memory only (store.ts).
    keepLoginsInMemory(config.name, needsSubject(config.oauth));
    this.unhold = holdLogin(this.key);
  }

  /** Says the store this connection no longer uses its login (true: it was the key's last). */
  private readonly unhold: () => boolean;
  private released = false;

  /**
   * The connection is gone (its transport closed): with the key's last connection, what this
   * process kept for the login goes (an in-memory login, cache entries, its log-scrubber
   * sources), so a daemon serving many people holds state only for those connected now.
   */
  release(): void {
    if (this.released) return;
    this.released = true;
    if (!this.unhold()) return;
    removeRuntimeSecrets(this.log, `oauth:${this.key}`);
    removeRuntimeSecrets(this.log, `oauth-subject:${this.key}`);
    for (const [k, r] of refusals) if (r.until <= Date.now()) refusals.delete(k);
  }

  /** Values the log must never show, under `source`; not after release (the source would stay for good). */
  private scrubbed(source: string, values: readonly (string | undefined)[]): void {
    if (!this.released) addRuntimeSecrets(this.log, source, values);
  }

  readonly server: string;
  /** The host client whose login this is (a perClient server's connection); undefined: the server's one login. */
  readonly client: string | undefined;
  /** The freshest host token (an OIDC JWT) among the client's open sessions, for grants that act for the host. Never logged. */
  readonly subject: (() => string | undefined) | undefined;
  /** Where the login is kept (store.ts): the server's name, or the server's and the client's. */
  readonly key: string;
  /** What a person runs to make this login. */
  readonly loginCommand: string;
  /** Whether the server's 401 can be answered by a login (no static Authorization header configured). */
  readonly usable: boolean;
  private warnedNoSubject = false;

  /**
   * A machine grant: mcpmux gets its own token, no person involved. Except a grant that acts for
   * the host without a host identity (no OIDC session of this client): that is needs-login for
   * this client, since no retry can help.
   */
  get machine(): boolean {
    return machineGrant(this.config.oauth) !== undefined && this.hostToken() !== null;
  }

  /** The grant's name as the config says it (for errors: which token a 401 refused). */
  get grantName(): string {
    return this.config.oauth?.grant ?? 'authorization_code';
  }

  /**
   * The host's JWT for a grant that acts for the host (undefined for the others); null when it
   * needs one and there is none (said once per connection: the host must sign in with OIDC).
   */
  private hostToken(): string | undefined | null {
    if (!needsSubject(this.config.oauth)) return undefined;
    const t = this.subject?.();
    if (t !== undefined) {
      // Scrubbed like the tokens: an upstream or IdP that echoes it must not put it in the log.
      this.scrubbed(`oauth-subject:${this.key}`, [t]);
      return t;
    }
    if (!this.warnedNoSubject) {
      this.warnedNoSubject = true;
      this.log.warn(
        { server: this.server, ...(this.client !== undefined && { client: this.client }) },
        `no host identity to exchange: the host must sign in with OIDC (listen.auth.oidc) for ${this.server} (grant ${this.config.oauth?.grant}); static-token and stdio sessions have none`,
      );
    }
    return null;
  }

  /**
   * The stored login, if it was made for this server's URL. Its tokens (got by `mcpmux login`,
   * a refresh or client credentials, never in the config) join the log scrubber as soon as
   * they are read: an upstream that echoes its Authorization header in an error, say, must not
   * put it in the log.
   */
  private async login(): Promise<StoredLogin | undefined> {
    const l = await readLogin(this.key);
    if (!l || l.server !== this.url) return undefined;
    this.scrubbed(`oauth:${this.key}`, [l.tokens?.access_token, l.tokens?.refresh_token, l.client.client_secret]);
    return l;
  }

  /** The Authorization header to send now; undefined when there is no login to use. */
  async header(): Promise<string | undefined> {
    // A configured Authorization header is the admin's choice: no stored login replaces it.
    if (!this.usable) return undefined;
    let l = await this.login();
    if (machineGrant(this.config.oauth)) return this.machineHeader(l);
    if (!l?.tokens) return undefined;
    if (l.tokens.expires_at !== undefined && l.tokens.expires_at - EARLY_MS < Date.now() && l.tokens.refresh_token) {
      // A refresh that cannot happen now (a shared store that is down) leaves the token as it is:
      // it still has up to EARLY_MS to live, and a 401 says so if not.
      await this.refresh(`Bearer ${l.tokens.access_token}`).catch((err: Error) => this.log.debug({ err: err.message }, 'no refresh before expiry'));
      l = await this.login();
      if (!l?.tokens) return undefined;
    }
    return `Bearer ${l.tokens.access_token}`;
  }

  /**
   * A machine grant's header: a new token when there is none or it is about to expire, got
   * before the request (never a 401 first). A renewal that fails while the token still has time
   * keeps it; one that fails with no usable token is this request's error (what to fix).
   */
  private async machineHeader(l: StoredLogin | undefined): Promise<string | undefined> {
    const t = l?.tokens;
    if (!t || expiring(t)) {
      // No host identity: needs-login for this client (the server's 401 says so), no grant.
      if (this.hostToken() === null) return t && !expired(t) ? `Bearer ${t.access_token}` : undefined;
      try {
        await this.refresh(t ? `Bearer ${t.access_token}` : undefined);
      } catch (err) {
        if (!t || expired(t)) throw err;
        this.log.debug({ err: (err as Error).message }, 'no renewal before expiry; the token has a little time left');
      }
      l = await this.login();
    }
    return l?.tokens && !expired(l.tokens) ? `Bearer ${l.tokens.access_token}` : undefined;
  }

  challenged(header: string): void {
    try {
      writeChallenge(this.key, header);
    } catch (err) {
      this.log.debug({ err: (err as Error).message }, 'cannot keep the login challenge');
    }
  }

  /**
   * Step-up (403 insufficient_scope): the scope the server wants is added to what the next
   * `mcpmux login` asks for. A client_credentials client asks for a new token with it at once
   * (the next request, once: a server that keeps asking gets the same answer and the error).
   */
  async needScope(challenge: string): Promise<string | undefined> {
    const wanted = bearerChallenge(challenge)?.scope;
    // The next login discovers from this challenge too (it names the resource metadata).
    this.challenged(challenge);
    if (!wanted) return wanted;
    try {
      // Exclusive like a refresh: a refresh writing at the same moment would otherwise be lost (and its refresh token with it).
      const remembered = await exclusiveLogin(this.key, async () => {
        const l = await readLogin(this.key);
        if (!l) return false;
        // A machine client asks again itself (the next request); a person logs in again.
        await writeLogin(this.key, { ...l, scopeNeeded: mergeScopes(l.scopeNeeded, l.tokens?.scope, wanted), ...(this.machine && { tokens: undefined }) });
        return true;
      });
      if (!remembered) return wanted;
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'cannot remember the scope the server asked for');
      return wanted;
    }
    this.log.warn({ scope: wanted }, this.machine ? 'the server needs more access; the next token is asked with it' : `the server needs more access; run: ${this.loginCommand}`);
    return wanted;
  }

  /**
   * After a 401, or close to expiry: a new access token if the refresh token still works. One
   * at a time in this process, and one at a time per login in the cluster (exclusiveLogin):
   * whoever waited reads the login again and, if `stale` (the Authorization header that failed
   * or is about to expire; none: there was no token) was replaced meanwhile, uses the new token
   * without asking the authorization server again. (A server that refuses fresh tokens too gets one retry per
   * request, then the upstream needs a login; the login watcher ignores this process's own
   * writes, so that does not restart it into another refresh.) Throws (-31007) while a shared
   * store is down: no refresh then.
   */
  refresh(stale?: string): Promise<boolean> {
    return (this.refreshing ??= exclusiveLogin(
      this.key,
      (signal) => this.doRefresh(stale, signal),
      () => this.log.debug('waiting for another process changing this login (its refresh is used)'),
    ).finally(() => (this.refreshing = undefined)));
  }

  private async doRefresh(stale: string | undefined, signal: AbortSignal): Promise<boolean> {
    const l = await this.login();
    // Another daemon (or process) stored new tokens since `stale` was sent (or since there were
    // none, for a machine client): those are the refresh.
    const now = l?.tokens?.access_token;
    if (now !== undefined && `Bearer ${now}` !== stale) return true;
    if (machineGrant(this.config.oauth)) return this.grant(signal);
    const refreshToken = l?.tokens?.refresh_token;
    if (!l || !refreshToken) return false;
    const as: oauth.AuthorizationServer = { issuer: l.as.issuer, token_endpoint: l.as.token_endpoint };
    const client: oauth.Client = { client_id: l.client.client_id };
    const auth = clientAuth(l.client);
    let refreshed: StoredLogin;
    try {
      const res = await oauth.refreshTokenGrantRequest(as, client, auth, refreshToken, {
        additionalParameters: { resource: l.resource },
        ...httpOptions(new URL(l.as.token_endpoint)),
        signal,
      });
      const t = await oauth.processRefreshTokenResponse(as, client, res);
      refreshed = { ...l, tokens: tokensOf(t, refreshToken) };
      this.scrubbed(`oauth:${this.key}`, [refreshed.tokens?.access_token, refreshed.tokens?.refresh_token, l.client.client_secret]);
    } catch (err) {
      // Refused (revoked, expired refresh token, or the client is no more): these tokens are
      // done, a new login is needed. A network error or an outage leaves them for next time.
      const refused = err instanceof oauth.ResponseBodyError && ['invalid_grant', 'invalid_client', 'unauthorized_client'].includes(err.error);
      const current = await readLogin(this.key);
      // Only if no one stored other tokens meanwhile (another process's refresh, a new login).
      if (refused && current?.tokens?.refresh_token === refreshToken) await writeLogin(this.key, { ...current, tokens: undefined });
      this.log.warn({ err: describe(err) }, refused ? `the token refresh was refused; run: ${this.loginCommand}` : 'the token refresh failed; the tokens are kept for the next try');
      return false;
    }
    // Granted: the old refresh token may be spent now. A store that cannot take the new login
    // keeps it (and says so); it is never taken for a failed refresh.
    let stored: boolean;
    try {
      stored = await writeRefreshed(this.key, refreshed, refreshToken);
    } catch (err) {
      this.log.warn({ err: (err as Error).message }, 'the refreshed tokens could not be stored');
      return false;
    }
    this.log.info(stored ? 'access token refreshed' : 'access token refreshed (not stored in the shared store yet)');
    return true;
  }

  /**
   * A new token by the machine grant (held exclusive by refresh()). True when one is stored;
   * false when there is no host identity to act for (needs-login for this client); throws the
   * grant's error (GrantError: what to fix) when it failed, or when the same input was refused
   * less than REFUSED_MS ago (then the server is not asked).
   */
  private async grant(signal: AbortSignal): Promise<boolean> {
    const subject = this.hostToken();
    if (subject === null) return false;
    const o = this.config.oauth!;
    const input = createHash('sha256').update(JSON.stringify([o, this.config.url, subject ?? null])).digest('hex');
    const refused = refusals.get(this.key);
    if (refused?.input === input && refused.until > Date.now()) throw new GrantError(refused.message, true);
    try {
      const l = await machineToken(this.config, this.key, subject, signal);
      this.scrubbed(`oauth:${this.key}`, [l.tokens?.access_token]);
      refusals.delete(this.key);
      this.log.info({ grant: o.grant }, 'access token obtained');
      return true;
    } catch (err) {
      const message = err instanceof GrantError ? err.message : `cannot get a token for ${this.server}: ${(err as Error).message}`;
      if (err instanceof GrantError && err.refused) {
        // Login keys come and go with host clients (unmapped OIDC claims too): the past ones leave.
        for (const [k, r] of refusals) if (r.until <= Date.now()) refusals.delete(k);
        refusals.set(this.key, { input, until: Date.now() + REFUSED_MS, message });
      }
      this.log.warn({ grant: o.grant }, message);
      throw err instanceof GrantError ? err : new GrantError(message, false);
    }
  }
}
