// Finding who issues tokens for an MCP server (the specification's authorization section,
// 2025-06-18 and 2025-11-25): the protected resource metadata (RFC 9728) named by the 401's
// WWW-Authenticate `resource_metadata`, else at the well-known paths (path-specific first,
// then root); its authorization server's metadata (RFC 8414, then OpenID discovery); and for
// 2025-03-26 servers, which publish no resource metadata, the server's own origin as the
// authorization server, with the default /authorize, /token and /register when even that has
// no metadata. The scope: the challenge's `scope`, else the resource's `scopes_supported`.

import * as oauth from 'oauth4webapi';
import type { RemoteServerConfig } from '../../config/types.js';
import { plainHttpAllowed } from '../../config/load.js';
import { fetchSameOrigin, readBody } from '../fetch.js';
import { readChallenge } from './store.js';

export interface Discovered {
  as: oauth.AuthorizationServer;
  /** The resource indicator (RFC 8707) to ask tokens for: the server's URL, canonical. */
  resource: string;
  scope: string | undefined;
}

/** Plain HTTP is allowed for loopback servers only (a local authorization server in tests or dev). */
export function insecureOk(url: URL): boolean {
  return url.protocol === 'http:' && plainHttpAllowed(url);
}

export function httpOptions(url: URL): { [oauth.allowInsecureRequests]?: boolean } {
  return insecureOk(url) ? { [oauth.allowInsecureRequests]: true } : {};
}

/** The canonical resource URI of an MCP server URL: no fragment, no trailing slash on a bare path. */
export function canonicalResource(serverUrl: string): string {
  const u = new URL(serverUrl);
  u.hash = '';
  return u.href.replace(/\/$/, '');
}

// Kept in a module of its own (no imports) so the HTTP transport can read challenges without loading this one.
export { bearerChallenge } from './challenge.js';
import { bearerChallenge } from './challenge.js';

/**
 * `strict`: the authorization server only as the server's resource metadata names it, with
 * metadata whose issuer is that name (RFC 8414 3.3): no 2025-03-26 origin guess, no loose or
 * default metadata. For grants whose token (an ID-JAG minted for that issuer) must not go to a
 * token endpoint an upstream merely claims.
 */
export async function discover(serverUrl: string, challenge: Record<string, string> | undefined, strict = false): Promise<Discovered> {
  const server = new URL(serverUrl);
  let resource = canonicalResource(serverUrl);
  const prm = await resourceMetadata(server, challenge?.resource_metadata);
  if (strict && typeof prm?.authorization_servers?.[0] !== 'string') {
    throw new Error(`${serverUrl} publishes no protected resource metadata naming its authorization server (RFC 9728), which this grant requires`);
  }
  if (prm) {
    // The metadata may name the server itself or a resource above it (same origin, a parent
    // path: metadata found at the root); tokens are then asked for that resource.
    const named = canonicalResource(String(prm.resource));
    if (!covers(named, resource)) throw new Error(`the server's resource metadata names another resource (${String(prm.resource)}), not ${resource}`);
    resource = named;
  }
  const issuer = new URL(prm?.authorization_servers?.[0] ?? server.origin);
  // Without resource metadata (2025-03-26), the server's origin is the authorization server,
  // and its metadata is taken as it is: such servers often name themselves loosely.
  const checked = await asMetadata(issuer);
  if (strict && !checked?.token_endpoint) {
    throw new Error(`the authorization server ${issuer.href} named by ${serverUrl}'s resource metadata publishes no metadata with that issuer and a token endpoint (RFC 8414), which this grant requires`);
  }
  const as = checked ?? (prm ? undefined : await looseMetadata(issuer)) ?? fallbackMetadata(issuer);
  const scopes = challenge?.scope ?? (Array.isArray(prm?.scopes_supported) ? prm.scopes_supported.join(' ') : undefined);
  return { as, resource, scope: scopes || undefined };
}

/** Whether resource `outer` covers `inner`: the same, or same origin with a parent path. */
function covers(outer: string, inner: string): boolean {
  if (outer === inner) return true;
  const o = new URL(outer);
  const i = new URL(inner);
  if (o.origin !== i.origin) return false;
  const base = o.pathname.endsWith('/') ? o.pathname : `${o.pathname}/`;
  return o.pathname === '/' || i.pathname.startsWith(base);
}

/** Metadata and registration answers are small; a server sending more is not read to the end. */
const MAX_JSON_BYTES = 256 * 1024;

/** A JSON body of at most MAX_JSON_BYTES; undefined when larger, absent or not JSON. */
export async function smallJson<T>(res: Response): Promise<T | undefined> {
  const body = await readBody(res, MAX_JSON_BYTES).catch(() => undefined);
  if (!body || !('text' in body)) return undefined;
  try {
    return JSON.parse(body.text) as T;
  } catch {
    return undefined;
  }
}

/** RFC 8414 metadata at the origin, read without the issuer check (2025-03-26 servers). */
async function looseMetadata(issuer: URL): Promise<oauth.AuthorizationServer | undefined> {
  const res = await fetch(new URL('/.well-known/oauth-authorization-server', issuer.origin), { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(15_000) }).catch(() => undefined);
  if (!res?.ok) return undefined;
  const m = await smallJson<oauth.AuthorizationServer>(res);
  if (typeof m?.authorization_endpoint !== 'string' || typeof m.token_endpoint !== 'string') return undefined;
  return { ...m, issuer: typeof m.issuer === 'string' ? m.issuer : issuer.origin };
}

async function resourceMetadata(server: URL, named: string | undefined): Promise<oauth.ResourceServer | undefined> {
  const candidates: URL[] = [];
  if (named) candidates.push(new URL(named));
  const p = server.pathname.replace(/\/$/, '');
  if (p) candidates.push(new URL(`/.well-known/oauth-protected-resource${p}`, server.origin));
  candidates.push(new URL('/.well-known/oauth-protected-resource', server.origin));
  for (const url of candidates) {
    const res = await fetch(url, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(15_000) }).catch(() => undefined);
    if (!res?.ok) {
      await res?.body?.cancel().catch(() => {});
      continue;
    }
    const body = await smallJson<oauth.ResourceServer>(res);
    if (body && typeof body.resource === 'string') return body;
  }
  return undefined;
}

async function asMetadata(issuer: URL): Promise<oauth.AuthorizationServer | undefined> {
  for (const algorithm of ['oauth2', 'oidc'] as const) {
    try {
      const res = await oauth.discoveryRequest(issuer, { algorithm, ...httpOptions(issuer), signal: AbortSignal.timeout(15_000) });
      return await oauth.processDiscoveryResponse(issuer, res);
    } catch {
      // Next kind of metadata, then the 2025-03-26 defaults.
    }
  }
  return undefined;
}

/** 2025-03-26: an authorization server without metadata has its endpoints at default paths. */
function fallbackMetadata(issuer: URL): oauth.AuthorizationServer {
  const at = (p: string) => new URL(p, issuer.origin).href;
  return { issuer: issuer.origin, authorization_endpoint: at('/authorize'), token_endpoint: at('/token'), registration_endpoint: at('/register'), code_challenge_methods_supported: ['S256'] };
}

/**
 * The server's 401 challenge, which says where to look (and perhaps which scope): asked with
 * an initialize, or the one the daemon kept. A server that wants no login is told so (throws).
 */
export async function challengeOf(server: RemoteServerConfig, key: string = server.name): Promise<Record<string, string> | undefined> {
  // Same origin only: the config's headers must not follow a redirect to another server.
  const res = await fetchSameOrigin(server.url, {
    method: 'POST',
    headers: { ...server.headers, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'mcpmux', version: '0' } } }),
    signal: AbortSignal.timeout(30_000),
  });
  await res.body?.cancel().catch(() => {});
  if (res.status === 401) return bearerChallenge(res.headers.get('www-authenticate'));
  // Some servers let initialize through and ask later (tools/list): the daemon kept that challenge.
  const kept = readChallenge(key);
  if (kept) return bearerChallenge(kept);
  throw new Error(`login to ${server.name}: the server answered ${res.status}, not 401: it asks for no login`);
}
