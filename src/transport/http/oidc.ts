// Hosts signed in with the organisation's identity provider (`listen.auth.oidc`): a bearer token
// that is a JWT is checked here, with jose, against the issuer's published keys (JWKS): the
// signature, `iss`, `aud`, `exp` (required), `nbf`, and the algorithm against an asymmetric-only
// allow-list. Only the guard calls this, and only for a token that matched no static token and
// has a JWT's shape, so static tokens never wait on it.
//
// What comes back is the client the host is: the claim value mapped by `clients`, else
// `oidc:<value>` (config/types.ts settingsClient). A refusal carries a short reason of our own
// words (never the token, never jose's message, which may quote claims), logged once here.

import { createRemoteJWKSet, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { plainHttpAllowed } from '../../config/load.js';
import { oidcClient, type OidcSettings } from '../../config/types.js';
import type { Logger } from '../../observe/logger.js';
import { readBody } from '../../upstream/fetch.js';

/** What a validated JWT proved, beyond the client it names: kept per session (sessions.ts HostCredential). */
export interface HostJwt {
  /** The compact JWS itself: what upstream grants exchange (SessionPort.hostToken). A secret: never logged. */
  token: string;
  /** Who signed in (`sub`, else the client claim's value): a session stays this person's. */
  principal: string;
  /** Its `exp`, in milliseconds since the epoch. */
  expiresAt: number;
}

export type OidcResult =
  | { ok: true; client: string; mapped: boolean; jwt: HostJwt }
  | { ok: false; reason: string };

/**
 * A compact JWS: three base64url parts (an empty signature is let through, so that `alg: none`
 * is refused with its reason). Anything else never reaches jose.
 */
const JWT_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$/;

export function looksLikeJwt(token: string): boolean {
  return JWT_SHAPE.test(token);
}

/** Clocks of the identity provider and of this host differ a little: `exp` and `nbf` get this much slack. */
export const CLOCK_TOLERANCE_S = 30;
/** A claim value becomes a client name (logs, audit lines, Redis keys): bounded, and visible ASCII only. */
export const MAX_CLAIM_CHARS = 256;
const CLAIM_CHARS = /^[\x21-\x7e]+$/;
/** How long the JWKS (and the discovery document) may take to arrive. */
const FETCH_TIMEOUT_MS = 5000;
/**
 * After a fetch of the keys, how long a JWT with an unknown `kid` is refused without fetching
 * them again (jose's default): a flood of made-up kids must not become a flood on the IdP. A
 * rotated key is found at the first request after it. MCPMUX_JWKS_COOLDOWN_MS overrides it (tests).
 */
const DEFAULT_COOLDOWN_MS = 30_000;
export const JWKS_COOLDOWN_ENV = 'MCPMUX_JWKS_COOLDOWN_MS';

/** A discovery document is a few kilobytes: an issuer (or what answers in its name) sending more is not read on. */
export const MAX_DISCOVERY_BYTES = 256 * 1024;
/**
 * A jwks_uri found by discovery is looked up again: at most every ten key-set cooldowns (5
 * minutes by default) after its key set could not be fetched (the IdP moved it), and every
 * REDISCOVER_MS anyway. Until the new look-up answers, the known key set stays in use (an IdP
 * down for a moment changes nothing).
 */
const REDISCOVER_AFTER_FAILURE_COOLDOWNS = 10;
const REDISCOVER_MS = 60 * 60_000;
/** jose's codes (and fetch's TypeError) for a key set that could not be fetched or read. */
const JWKS_FETCH_FAILED = new Set(['ERR_JWKS_TIMEOUT', 'ERR_JWKS_INVALID', 'ERR_JOSE_GENERIC']);

/** A refusal whose message is already a reason fit for the log and the host. */
class Refusal extends Error {}

export class OidcVerifier {
  /** The issuer's key set, once its URL is known (configured, or discovered). */
  private keys: JWTVerifyGetKey | undefined;
  private discovering: Promise<JWTVerifyGetKey> | undefined;
  private discoveryFailedAt = -Infinity;
  /** When the key set's URL was last discovered (or a new discovery was last tried); undefined when configured. */
  private discoveredAt: number | undefined;
  private jwksFailedAt = -Infinity;
  private readonly cooldownMs: number;

  constructor(
    readonly settings: OidcSettings,
    private readonly log: Logger,
  ) {
    const env = Number(process.env[JWKS_COOLDOWN_ENV]);
    this.cooldownMs = process.env[JWKS_COOLDOWN_ENV] !== undefined && Number.isFinite(env) && env >= 0 ? env : DEFAULT_COOLDOWN_MS;
    if (settings.jwksUrl !== undefined) this.keys = this.remote(settings.jwksUrl);
  }

  /** The client a JWT names, or why it is refused (logged here, with the reason only). */
  async verify(token: string): Promise<OidcResult> {
    const s = this.settings;
    try {
      const { payload } = await jwtVerify(token, (header, jws) => this.keySet().then((keys) => this.fetchedBy(keys, header, jws)), {
        issuer: s.issuer,
        audience: s.audience,
        algorithms: s.algorithms,
        clockTolerance: CLOCK_TOLERANCE_S,
        // A token without an expiry would be good for ever.
        requiredClaims: ['exp'],
      });
      const value = payload[s.clientClaim];
      if (typeof value !== 'string' || value === '') throw new Refusal(`claim "${s.clientClaim}" is ${value === undefined ? 'missing' : 'not a non-empty string'}`);
      if (value.length > MAX_CLAIM_CHARS || !CLAIM_CHARS.test(value)) throw new Refusal(`claim "${s.clientClaim}" is not 1 to ${MAX_CLAIM_CHARS} visible ASCII characters`);
      const mapped = Object.hasOwn(s.clients, value) ? s.clients[value] : undefined;
      const principal = typeof payload.sub === 'string' && payload.sub !== '' ? payload.sub : value;
      // (`exp` is required above, so it is a number here)
      const jwt = { token, principal, expiresAt: (payload.exp as number) * 1000 };
      return { ok: true, client: mapped ?? oidcClient(value), mapped: mapped !== undefined, jwt };
    } catch (err) {
      const reason = reasonOf(err);
      this.log.info({ reason }, 'host JWT refused');
      return { ok: false, reason };
    }
  }

  private remote(url: string): JWTVerifyGetKey {
    return createRemoteJWKSet(new URL(url), { timeoutDuration: FETCH_TIMEOUT_MS, cooldownDuration: this.cooldownMs });
  }

  /** A key from `keys`, noting when the key set itself could not be fetched (a reason to discover again). */
  private async fetchedBy(keys: JWTVerifyGetKey, ...args: Parameters<JWTVerifyGetKey>): Promise<Awaited<ReturnType<JWTVerifyGetKey>>> {
    try {
      return await keys(...args);
    } catch (err) {
      const e = err as { code?: string; name?: string };
      if (JWKS_FETCH_FAILED.has(e?.code ?? '') || e?.name === 'TypeError') this.jwksFailedAt = Date.now();
      throw err;
    }
  }

  /**
   * The key set: the configured URL's, else the one the issuer's discovery document names
   * (discovered at the first JWT, and again when due: see REDISCOVER_MS).
   */
  private keySet(): Promise<JWTVerifyGetKey> {
    const known = this.keys;
    if (known && !this.rediscoveryDue()) return Promise.resolve(known);
    if (known) {
      // Tried at most once per period whatever comes of it; meanwhile the known keys serve.
      this.discoveredAt = Date.now();
      this.discovering ??= this.discover()
        .catch(() => known)
        .finally(() => (this.discovering = undefined));
      return this.discovering;
    }
    this.discovering ??= this.discover().finally(() => (this.discovering = undefined));
    return this.discovering;
  }

  private rediscoveryDue(): boolean {
    if (this.discoveredAt === undefined) return false;
    const age = Date.now() - this.discoveredAt;
    return age >= REDISCOVER_MS || (this.jwksFailedAt >= this.discoveredAt && age >= REDISCOVER_AFTER_FAILURE_COOLDOWNS * this.cooldownMs);
  }

  private async discover(): Promise<JWTVerifyGetKey> {
    // An IdP that is down is asked again after the cooldown, not at every request meanwhile.
    if (Date.now() - this.discoveryFailedAt < this.cooldownMs) throw new Refusal("the issuer's discovery document could not be read moments ago");
    const issuer = this.settings.issuer;
    const url = `${issuer.replace(/\/+$/, '')}/.well-known/openid-configuration`;
    try {
      let res: Response;
      try {
        res = await fetch(url, { redirect: 'manual', headers: { accept: 'application/json' }, signal: AbortSignal.timeout(FETCH_TIMEOUT_MS) });
      } catch {
        throw new Refusal("the issuer's discovery document is unreachable");
      }
      if (res.status !== 200) throw new Refusal(`the issuer's discovery document answered HTTP ${res.status}`);
      const body = await readBody(res, MAX_DISCOVERY_BYTES).catch(() => undefined);
      if (body && 'tooLarge' in body) throw new Refusal(`the issuer's discovery document is larger than ${MAX_DISCOVERY_BYTES} bytes`);
      const doc = parseObject(body?.text) as { issuer?: unknown; jwks_uri?: unknown } | undefined;
      // OpenID Connect Discovery 1.0, section 4.3: the document must be the issuer's own.
      if (doc?.issuer !== issuer) throw new Refusal("the issuer's discovery document names another issuer");
      if (typeof doc.jwks_uri !== 'string' || !fetchable(doc.jwks_uri)) throw new Refusal("the issuer's discovery document has no https jwks_uri");
      this.keys = this.remote(doc.jwks_uri);
      this.discoveredAt = Date.now();
      return this.keys;
    } catch (err) {
      this.discoveryFailedAt = Date.now();
      this.log.warn({ url, reason: reasonOf(err) }, 'OIDC discovery failed: JWTs are refused until it succeeds');
      throw err;
    }
  }
}

function parseObject(text: string | undefined): unknown {
  if (text === undefined) return undefined;
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** https, or http to a loopback address (the rule the config applies to jwksUrl). */
function fetchable(url: string): boolean {
  try {
    const u = new URL(url);
    return u.protocol === 'https:' || (u.protocol === 'http:' && plainHttpAllowed(u));
  } catch {
    return false;
  }
}

/** Why jose (or discovery) refused a JWT, in words of our own: nothing of the token. */
function reasonOf(err: unknown): string {
  if (err instanceof Refusal) return err.message;
  const e = err as { code?: string; claim?: string; reason?: string; name?: string };
  switch (e?.code) {
    case 'ERR_JWT_EXPIRED':
      return 'expired';
    case 'ERR_JWT_CLAIM_VALIDATION_FAILED':
      if (e.reason === 'missing') return `claim "${e.claim}" is missing`;
      if (e.claim === 'iss') return 'wrong issuer';
      if (e.claim === 'aud') return 'wrong audience';
      if (e.claim === 'nbf') return 'not valid yet (nbf)';
      if (e.claim === 'iat') return 'issued in the future (iat)';
      return `claim "${e.claim}" is invalid`;
    case 'ERR_JOSE_ALG_NOT_ALLOWED':
      return 'algorithm not allowed';
    case 'ERR_JWS_SIGNATURE_VERIFICATION_FAILED':
      return 'bad signature';
    case 'ERR_JWKS_NO_MATCHING_KEY':
      return "no key of the issuer's JWKS matches (unknown kid)";
    case 'ERR_JWKS_MULTIPLE_MATCHING_KEYS':
      return "several keys of the issuer's JWKS match (the JWT names no kid)";
    case 'ERR_JWKS_TIMEOUT':
      return "the issuer's JWKS did not answer in time";
    case 'ERR_JWKS_INVALID':
      return "the issuer's JWKS is not a key set";
    case 'ERR_JOSE_GENERIC':
      return "the issuer's JWKS is unreachable or not JSON";
    case 'ERR_JWS_INVALID':
    case 'ERR_JWT_INVALID':
      return 'malformed JWT';
    case 'ERR_JOSE_NOT_SUPPORTED':
      return 'unsupported key or algorithm';
    default:
      // fetch's own failure (connection refused, DNS) is a TypeError.
      return e?.name === 'TypeError' ? "the issuer's JWKS is unreachable" : 'invalid JWT';
  }
}
