// Who may talk to the daemon: the Host and Origin checks against DNS rebinding and cross-site
// browsers (403), and bearer tokens per client (401): static tokens, checked at once, and JWTs
// of the organisation's identity provider (`listen.auth.oidc`, oidc.ts), checked
// asynchronously. Shared by every HTTP route and the WebSocket upgrade. Everything that can be precomputed is computed once, in the constructor.
// It also says which toolset a new session gets (`?toolset=`, else the token client's): not an
// authorization (a toolset only narrows), but it is read from the same request and the same
// token table, and a reload replaces both at once.

import { createHash, timingSafeEqual } from 'node:crypto';
import { isIPv4 } from 'node:net';
import type { IncomingMessage } from 'node:http';
import type { ClientToken } from '../../config/types.js';
import { unknownToolset } from '../../config/suggest.js';
import { looksLikeJwt, type HostJwt, type OidcVerifier } from './oidc.js';

export type Verdict = { ok: true } | { ok: false; status: 403; message: string };
export type AuthResult =
  /**
   * `admin`: may take operator actions (its token is marked `admin`, or no tokens are configured).
   * `toolset`: the one its token client's sessions get unless the URL names another.
   * `person`: an unmapped OIDC claim value (client `oidc:<value>`), no client of the config.
   */
  | { ok: true; client: string | undefined; admin: boolean; toolset: string | undefined; jwt?: HostJwt; person?: true }
  | { ok: false; status: 401; message: string; challenge: string };

/** Static tokens (and no auth at all) are answered at once; only a JWT waits for its check. */
export type Authenticated = AuthResult | Promise<AuthResult>;

/** Runs `then` with the verdict: in the same tick when there is one already (static tokens). */
export function afterAuth(auth: Authenticated, then: (auth: AuthResult) => void, failed: (err: unknown) => void): void {
  if (auth instanceof Promise) auth.then(then).catch(failed);
  else then(auth);
}

/**
 * Who a request on an MCP route is for: its token's client, and the toolset a session it opens
 * gets. `asked`: the toolset the URL named (`?toolset=`), if it named one.
 */
export interface Who {
  client: string | undefined;
  toolset: string | undefined;
  asked: string | undefined;
  /** The host's validated JWT, when it signed in through listen.auth.oidc. */
  jwt?: HostJwt;
}
export type WhoResult = ({ ok: true } & Who) | { ok: false; status: 400; message: string };

const NO_NAMES: readonly string[] = [];

/** The query parameter that picks a session's toolset on /mcp, /sse and /ws. */
export const TOOLSET_PARAM = 'toolset';
/** How the 400 for a `?toolset=` the config does not define begins (`mcpmux connect` looks for it). */
export const UNKNOWN_TOOLSET_REFUSAL = `Bad Request: ?${TOOLSET_PARAM}=: `;

export interface GuardOptions {
  /** The address the daemon is bound to (decides whether the Host header is checked). */
  host: string;
  /** Origins allowed in addition to loopback ones; `"*"` allows any origin. */
  allowedOrigins: readonly string[];
  tokens: readonly ClientToken[];
  /** Checks JWTs (listen.auth.oidc); undefined: only static tokens let anyone in. */
  oidc?: OidcVerifier;
  /** The config's toolsets (only their names matter here); none: `?toolset=` names nothing. */
  toolsets?: Readonly<Record<string, unknown>>;
}

const LOOPBACK_HOSTNAMES = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);
/** Origins seen recently and their verdicts: browsers repeat the same few, URL parsing is not free. */
const ORIGIN_CACHE_MAX = 256;

export function isLoopbackName(hostname: string): boolean {
  const h = hostname.toLowerCase();
  // `127.x.y.z` only as an address literal: `127.evil.example` is a name an attacker can own.
  return LOOPBACK_HOSTNAMES.has(h) || h.endsWith('.localhost') || (h.startsWith('127.') && isIPv4(h));
}

/** The hostname part of a Host header (`[::1]:7330` -> `[::1]`, `a.b:80` -> `a.b`), lowercased. */
function hostnameOf(hostHeader: string): string {
  if (hostHeader.startsWith('[')) {
    const end = hostHeader.indexOf(']');
    return (end < 0 ? hostHeader : hostHeader.slice(0, end + 1)).toLowerCase();
  }
  const colon = hostHeader.indexOf(':');
  return (colon < 0 ? hostHeader : hostHeader.slice(0, colon)).toLowerCase();
}

export class Guard {
  /** Host names accepted in the Host header; undefined: not checked (bound to a public address). */
  private readonly hostNames: Set<string> | undefined;
  private anyOrigin = false;
  private origins = new Set<string>();
  private readonly originCache = new Map<string, boolean>();
  private tokens: { client: string; admin: boolean; toolset: string | undefined; digest: Buffer }[] = [];
  private toolsets: Readonly<Record<string, unknown>> = {};
  private oidc: OidcVerifier | undefined;

  constructor(opts: GuardOptions) {
    const bound = opts.host.toLowerCase();
    // Bound to loopback, the only legitimate Host names are loopback ones (and whatever name the
    // operator bound to). A rebinding attacker's page sends its own domain as Host.
    if (isLoopbackName(bound) || bound === '::1') {
      this.hostNames = new Set([...LOOPBACK_HOSTNAMES, bound, bound.includes(':') ? `[${bound}]` : bound]);
    }
    this.admit(opts);
  }

  /** Who is let in from now on (a reload): origins, tokens, OIDC and toolsets. The bound address stays. */
  admit(opts: Pick<GuardOptions, 'allowedOrigins' | 'tokens' | 'toolsets' | 'oidc'>): void {
    this.anyOrigin = opts.allowedOrigins.includes('*');
    this.origins = new Set(opts.allowedOrigins.map(normalizeOrigin));
    this.originCache.clear();
    this.tokens = opts.tokens.map((t) => ({ client: t.client, admin: t.admin, toolset: t.toolset, digest: digest(t.token) }));
    this.toolsets = opts.toolsets ?? {};
    this.oidc = opts.oidc;
  }

  /** Host header (DNS rebinding) and Origin header (cross-site browsers). */
  check(req: IncomingMessage): Verdict {
    if (this.hostNames) {
      const host = req.headers.host;
      if (host !== undefined) {
        const name = hostnameOf(host);
        if (!this.hostNames.has(name) && !isLoopbackName(name)) {
          return { ok: false, status: 403, message: `Forbidden: Host ${JSON.stringify(host)} is not allowed` };
        }
      }
    }
    const origin = req.headers.origin;
    if (origin !== undefined && !this.originAllowed(origin)) {
      return { ok: false, status: 403, message: `Forbidden: Origin ${JSON.stringify(origin)} is not allowed (see listen.allowedOrigins)` };
    }
    return { ok: true };
  }

  /** True for an Origin header that may make requests (used for CORS answers too). */
  originAllowed(origin: string): boolean {
    if (this.anyOrigin) return true;
    const cached = this.originCache.get(origin);
    if (cached !== undefined) return cached;
    const verdict = this.origins.has(normalizeOrigin(origin)) || isLoopbackOrigin(origin);
    if (this.originCache.size >= ORIGIN_CACHE_MAX) this.originCache.clear();
    this.originCache.set(origin, verdict);
    return verdict;
  }

  /**
   * The client a bearer token belongs to. Without configured tokens (or OIDC) everyone is
   * anonymous (and, there being no one to tell apart, an operator too: such a daemon is for one
   * user's loopback). Every token is compared (no early exit) in constant time over sha256
   * digests, so neither the length nor the position of a match leaks through timing. A token
   * that matches none and has a JWT's shape goes to the OIDC check (a Promise); a static token
   * is answered synchronously, as before OIDC existed.
   */
  authenticate(req: IncomingMessage): Authenticated {
    if (this.tokens.length === 0 && !this.oidc) return { ok: true, client: undefined, admin: true, toolset: undefined };
    const header = req.headers.authorization;
    if (header === undefined) {
      return { ok: false, status: 401, message: 'Unauthorized: a bearer token is required', challenge: 'Bearer realm="mcpmux"' };
    }
    const token = header.length > 7 && header.slice(0, 7).toLowerCase() === 'bearer ' ? header.slice(7).trim() : '';
    const given = digest(token);
    let match: { client: string; admin: boolean; toolset: string | undefined } | undefined;
    for (const t of this.tokens) {
      if (timingSafeEqual(given, t.digest) && match === undefined) match = t;
    }
    const client = match?.client;
    if (client !== undefined && token !== '') return { ok: true, client, admin: match!.admin, toolset: match!.toolset };
    if (this.oidc && looksLikeJwt(token)) return this.viaOidc(this.oidc, token);
    return invalidToken();
  }

  /**
   * A JWT's client: a mapped claim value is that token client, with its admin flag and toolset;
   * an unmapped one is `oidc:<value>`, no operator, no toolset of its own (its claim may equal a
   * token client's name: it is still `oidc:<value>`, never that client).
   */
  private async viaOidc(oidc: OidcVerifier, token: string): Promise<AuthResult> {
    const r = await oidc.verify(token);
    if (!r.ok) return invalidToken(r.reason);
    const own = r.mapped ? this.tokens.find((t) => t.client === r.client) : undefined;
    return { ok: true, client: r.client, admin: own?.admin ?? false, toolset: own?.toolset, jwt: r.jwt, ...(!r.mapped && { person: true as const }) };
  }

  /**
   * Who an authenticated request on /mcp, /sse or /ws is for. The URL's `?toolset=` wins over
   * the token's (a toolset narrows, it grants nothing); a name the config does not define is a
   * 400, answered before any session exists. Call after `authenticate`: the message lists the
   * toolsets, which only a client let in may learn.
   */
  who(query: string, auth: { client: string | undefined; toolset: string | undefined; jwt?: HostJwt }, existingSession = false): WhoResult {
    // Most requests carry no query at all: nothing to parse.
    const named = query === '' ? NO_NAMES : new URLSearchParams(query).getAll(TOOLSET_PARAM);
    if (named.length > 1) return { ok: false, status: 400, message: `Bad Request: name one toolset, not ${named.length} (?${TOOLSET_PARAM}=)` };
    const asked = named[0];
    // A request of a session already open is compared with the session's own toolset later: a
    // reload that removed that toolset must not lock its host out of its session (nor out of DELETE).
    if (asked !== undefined && !existingSession && !Object.hasOwn(this.toolsets, asked)) {
      return { ok: false, status: 400, message: `${UNKNOWN_TOOLSET_REFUSAL}${unknownToolset(asked, this.toolsets)}` };
    }
    return { ok: true, client: auth.client, toolset: asked ?? auth.toolset, asked, ...(auth.jwt && { jwt: auth.jwt }) };
  }
}

/** The 401 for a token that names no client (`why`: an OIDC refusal's reason, which the host may read). */
function invalidToken(why?: string): AuthResult {
  return {
    ok: false,
    status: 401,
    message: `Unauthorized: invalid bearer token${why === undefined ? '' : ` (${why})`}`,
    challenge: 'Bearer realm="mcpmux", error="invalid_token"',
  };
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** `HTTPS://App.Example.com/` -> `https://app.example.com` (an Origin has no path). */
function normalizeOrigin(o: string): string {
  const s = o.trim().toLowerCase();
  return s.endsWith('/') ? s.slice(0, -1) : s;
}

/** `http(s)://localhost:*`, `http(s)://127.0.0.1:*`, `http(s)://[::1]:*`. */
function isLoopbackOrigin(origin: string): boolean {
  let url: URL;
  try {
    url = new URL(origin);
  } catch {
    return false; // includes the opaque origin "null"
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false;
  return isLoopbackName(url.hostname);
}
