// The grants that need no person and no browser (`oauth.grant`): mcpmux asks for a token itself
// whenever it has none or the one it has is about to expire.
//   client_credentials: the client's own identity; it proves itself with its secret
//     (client_secret_basic or _post) or a signed JWT (private_key_jwt).
//   token_exchange (RFC 8693, exchange.ts): the host's OIDC JWT for a token for this server.
//   jwt_bearer (Cross-App Access, id-jag.ts): an ID token for an ID-JAG at the IdP, the ID-JAG
//     for a token at this server's authorization server.
// Discovery (the server's 401, its resource metadata, its authorization server's metadata) is
// done once per server and URL in a process and kept in memory: a renewal is one token request
// (two for jwt_bearer), not four discovery requests and a probe of the server first.

import { createPrivateKey, webcrypto } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { OAuthSettings, RemoteServerConfig } from '../../config/types.js';
import { clientAuth, mergeScopes, secretMethod } from './client-auth.js';
import { canonicalResource, challengeOf, discover, httpOptions, type Discovered } from './discover.js';
import { exchangeToken, IssuedTypeError, TOKEN_TYPE } from './exchange.js';
import { idJag, jwtBearer } from './id-jag.js';
import { describe, tokensOf } from './responses.js';
import { readLogin, writeLogin, type StoredLogin } from './store.js';

const ALGORITHMS: Record<string, webcrypto.RsaHashedImportParams | webcrypto.EcKeyImportParams> = {
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
};

/** The grants mcpmux runs by itself. */
export type MachineGrant = 'client_credentials' | 'token_exchange' | 'jwt_bearer';

export function machineGrant(o: OAuthSettings | undefined): MachineGrant | undefined {
  const g = o?.grant;
  return g === 'client_credentials' || g === 'token_exchange' || g === 'jwt_bearer' ? g : undefined;
}

/** Whether the grant's input is the host's identity (its JWT from listen.auth.oidc): none without an OIDC session. */
export function needsSubject(o: OAuthSettings | undefined): boolean {
  return o?.grant === 'token_exchange' || (o?.grant === 'jwt_bearer' && o.idp?.idToken === undefined);
}

/** Discovery results per server and URL (a reload that moves the server discovers again). */
const found = new Map<string, Discovered>();

const foundKey = (server: RemoteServerConfig) => `${server.name}\n${server.url}`;

/** Where tokens for `server` come from: as discovered before, else discovered now and kept. */
async function discovered(server: RemoteServerConfig): Promise<Discovered> {
  const o = server.oauth!;
  // token_exchange: the host's JWT goes to the endpoint the config names (load.ts requires it),
  // never to one the upstream's metadata points at; nothing to discover.
  if (o.grant === 'token_exchange') {
    if (!o.tokenEndpoint) throw new Error(`${server.name}: token_exchange needs oauth.tokenEndpoint (the host's JWT goes only where the config says)`);
    const endpoint = new URL(o.tokenEndpoint);
    return { as: { issuer: endpoint.origin, token_endpoint: endpoint.href }, resource: canonicalResource(server.url), scope: undefined };
  }
  const kept = found.get(foundKey(server));
  if (kept) return kept;
  // jwt_bearer: the ID-JAG is minted for the authorization server the resource metadata names
  // and goes to that issuer's own token endpoint: strict discovery, no loose metadata.
  const fresh = await discover(server.url, await challengeOf(server), o.grant === 'jwt_bearer');
  found.set(foundKey(server), fresh);
  return fresh;
}

/**
 * Forgets what discovery found for `server` (after a refused or failed grant: the server may
 * have moved to another authorization server, whose metadata the next grant reads).
 */
export function forgetDiscovered(server: RemoteServerConfig): void {
  found.delete(foundKey(server));
}

/**
 * A machine grant that got no token, with a message that says what to fix (never a token: the
 * subject, ID token and ID-JAG are taken out of whatever the server answered). `refused`: the
 * token endpoint said no (an OAuth error), which asking again with the same input will not change.
 */
export class GrantError extends Error {
  constructor(
    message: string,
    readonly refused: boolean,
  ) {
    super(message);
  }
}

/**
 * Whether a failed grant suggests the discovered metadata is stale: the upstream's authorization
 * server (never the IdP) did not answer as a token endpoint (unreachable, not found, not OAuth),
 * or refused the client or the grant itself, as one that is no longer ours would. A refusal of
 * one person's token (invalid_grant, invalid_target, ...) says nothing about where it lives.
 */
function movedAway(err: unknown, step: 'as' | 'idp'): boolean {
  if (step === 'idp' || err instanceof IssuedTypeError) return false;
  if (err instanceof oauth.ResponseBodyError) return ['invalid_client', 'unauthorized_client', 'unsupported_grant_type'].includes(err.error);
  return !(err instanceof oauth.WWWAuthenticateChallengeError);
}

/** The endpoint answered with a token of no stated or another type (exchange.ts). */
function wrongType(server: RemoteServerConfig, step: 'as' | 'idp'): string {
  const o = server.oauth!;
  return step === 'idp'
    ? `the identity provider ${o.idp!.issuer} issued no ID-JAG (urn:ietf:params:oauth:token-type:id-jag, SEP-990) for ${server.name}; check that it supports Cross-App Access for oauth.idp.clientId`
    : `the token exchange for ${server.name} at ${o.tokenEndpoint ?? 'its authorization server'} did not issue an access token`;
}

function refusal(err: unknown): boolean {
  return err instanceof oauth.ResponseBodyError || err instanceof oauth.WWWAuthenticateChallengeError;
}

/** What the endpoint said, in a line, with the secrets that went into the request taken out. */
function said(err: unknown, secrets: Array<string | undefined>): string {
  let text = describe(err);
  if (err instanceof oauth.WWWAuthenticateChallengeError) text = `HTTP ${err.status}${err.cause[0]?.parameters.error ? `: ${err.cause[0].parameters.error}` : ''}`;
  for (const s of secrets) if (s) text = text.split(s).join('[REDACTED]');
  return text;
}

function whatToFix(server: RemoteServerConfig, step: 'as' | 'idp'): string {
  const o = server.oauth!;
  if (step === 'idp') {
    return `the identity provider ${o.idp!.issuer} refused the ID token for ${server.name}; ${o.idp!.idToken !== undefined ? 'set a fresh oauth.idp.idToken (ID tokens expire) and check oauth.idp.clientId' : "check oauth.idp.clientId, and that the host signs in with a JWT this identity provider accepts as an ID token"}`;
  }
  switch (machineGrant(o)) {
    case 'token_exchange':
      return `the authorization server of ${server.name} refused the token exchange; check oauth.clientId, clientSecret, audience and subjectTokenType, and that it accepts the host's OIDC tokens`;
    case 'jwt_bearer':
      return `the authorization server of ${server.name} refused the ID-JAG; check oauth.clientId and oauth.clientSecret, and that it trusts the identity provider ${o.idp!.issuer}`;
    default:
      return `the authorization server of ${server.name} refused the client-credentials grant; check oauth.clientId and oauth.clientSecret (or privateKey)`;
  }
}

/**
 * Gets a token with the server's machine grant and stores it under `key` (the login key: a
 * per-client grant's token is that client's). `subject`: the host's JWT, for the grants that
 * act for the host. Throws GrantError.
 */
export async function machineToken(server: RemoteServerConfig, key: string, subject: string | undefined, signal: AbortSignal): Promise<StoredLogin> {
  const o = server.oauth!;
  const secrets = [subject, o.idp?.idToken, o.clientSecret, o.idp?.clientSecret];
  let step: 'as' | 'idp' = 'as';
  let tokens: oauth.TokenEndpointResponse;
  let d: Discovered;
  let resource: string;
  try {
    d = await discovered(server);
    const { as } = d;
    resource = (o.grant === 'token_exchange' && o.resource) || d.resource;
    const scope = mergeScopes(o.scopes?.join(' ') || d.scope, (await readLogin(key))?.scopeNeeded);
    const { client, auth } = await asClient(o, as);
    const opts = { ...httpOptions(new URL(as.token_endpoint!)), signal };
    switch (machineGrant(o)) {
      case 'token_exchange':
        tokens = await exchangeToken(as, client, auth, {
          subject: subject!,
          subjectType: TOKEN_TYPE(o.subjectTokenType ?? 'access_token'),
          requested: TOKEN_TYPE('access_token'),
          ...(o.audience && { audience: o.audience }),
          resource,
          ...(scope && { scope }),
          // A JWT access token may be reported as such (RFC 8693 3).
        }, opts, undefined, [TOKEN_TYPE('access_token'), TOKEN_TYPE('jwt')]);
        break;
      case 'jwt_bearer': {
        step = 'idp';
        const assertion = await idJag(o.idp!, { idToken: o.idp!.idToken ?? subject!, audience: as.issuer, resource, scope }, signal);
        secrets.push(assertion);
        step = 'as';
        tokens = await jwtBearer(as, client, auth, assertion, { resource, scope }, opts);
        break;
      }
      default:
        tokens = await oauth.processClientCredentialsResponse(as, client, await oauth.clientCredentialsGrantRequest(as, client, auth, { resource, ...(scope && { scope }) }, opts));
    }
  } catch (err) {
    // The server may have moved to another authorization server: the next grant discovers
    // again. Only when its authorization server failed us so (not one person's refusal).
    if (movedAway(err, step)) forgetDiscovered(server);
    if (err instanceof IssuedTypeError) throw new GrantError(`${wrongType(server, step)}: ${said(err, secrets)}`, true);
    if (refusal(err)) throw new GrantError(`${whatToFix(server, step)} (${said(err, secrets)})`, true);
    throw new GrantError(`cannot get a token for ${server.name}${step === 'idp' ? ' from the identity provider' : ''}: ${said(err, secrets)}`, false);
  }
  const { as } = d;
  const client = { client_id: o.clientId! };
  const login: StoredLogin = {
    server: canonicalResource(server.url),
    resource,
    as: { issuer: as.issuer, token_endpoint: as.token_endpoint! },
    // The secret and the key stay in the config: the stored login names only the client.
    client: { client_id: client.client_id },
    // A new grant is the renewal: a refresh token some servers add anyway is not kept.
    tokens: withoutRefresh(tokensOf(tokens)),
  };
  await writeLogin(key, login);
  return login;
}

/** mcpmux's client at the server's authorization server, and how it proves itself there. */
async function asClient(o: OAuthSettings, as: oauth.AuthorizationServer): Promise<{ client: oauth.Client; auth: oauth.ClientAuth }> {
  const client: oauth.Client = { client_id: o.clientId! };
  if (o.privateKey) {
    const alg = o.signingAlgorithm ?? 'RS256';
    const pkcs8 = createPrivateKey(o.privateKey).export({ type: 'pkcs8', format: 'der' });
    const key = await webcrypto.subtle.importKey('pkcs8', pkcs8, ALGORITHMS[alg]!, false, ['sign']);
    return { client: { ...client, token_endpoint_auth_method: 'private_key_jwt' }, auth: oauth.PrivateKeyJwt(key as Parameters<typeof oauth.PrivateKeyJwt>[0]) };
  }
  // A public client (token_exchange without a secret) sends its id in the body.
  const registered = { ...client, ...(o.clientSecret !== undefined && { client_secret: o.clientSecret, token_endpoint_auth_method: secretMethod(as) }) };
  return { client: { client_id: registered.client_id, ...(registered.token_endpoint_auth_method && { token_endpoint_auth_method: registered.token_endpoint_auth_method }) }, auth: clientAuth(registered) };
}

function withoutRefresh(t: NonNullable<StoredLogin['tokens']>): NonNullable<StoredLogin['tokens']> {
  const { refresh_token: _, ...rest } = t;
  return rest;
}
