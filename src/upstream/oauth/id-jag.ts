// Cross-App Access (SEP-990, the identity assertion JWT authorization grant): an enterprise IdP
// vouches for a person to the upstream's authorization server. Two requests:
//   1. at the IdP's token endpoint, a token exchange (RFC 8693) of the person's ID token for an
//      ID-JAG (`urn:ietf:params:oauth:token-type:id-jag`), audience the upstream's authorization
//      server (its issuer), resource the MCP server;
//   2. at that authorization server, a JWT bearer grant (RFC 7523) with the ID-JAG as assertion,
//      mcpmux authenticating as its client there.
// The ID-JAG lives minutes and is used at once: it is never stored.

import * as oauth from 'oauth4webapi';
import type { IdpSettings } from '../../config/types.js';
import { clientAuth, secretMethod } from './client-auth.js';
import { httpOptions } from './discover.js';
import { exchangeToken, TOKEN_TYPE } from './exchange.js';

export const JWT_BEARER = 'urn:ietf:params:oauth:grant-type:jwt-bearer';

/** The IdP's metadata per issuer, when its token endpoint is not configured (discovered once a process). */
const idps = new Map<string, oauth.AuthorizationServer>();

async function idpServer(idp: IdpSettings, signal: AbortSignal): Promise<oauth.AuthorizationServer> {
  if (idp.tokenEndpoint) return { issuer: idp.issuer, token_endpoint: idp.tokenEndpoint };
  const kept = idps.get(idp.issuer);
  if (kept) return kept;
  const issuer = new URL(idp.issuer);
  let found: oauth.AuthorizationServer | undefined;
  let last: unknown;
  for (const algorithm of ['oidc', 'oauth2'] as const) {
    try {
      found = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { algorithm, ...httpOptions(issuer), signal }));
      break;
    } catch (err) {
      last = err;
    }
  }
  if (!found?.token_endpoint) throw new Error(`the IdP ${idp.issuer} publishes no token endpoint (${found ? 'none in its metadata' : (last as Error)?.message}); set oauth.idp.tokenEndpoint`);
  idps.set(idp.issuer, found);
  return found;
}

/** Step 1: the ID-JAG for `audience` (the upstream's authorization server) and `resource`. */
export async function idJag(idp: IdpSettings, want: { idToken: string; audience: string; resource: string; scope?: string }, signal: AbortSignal): Promise<string> {
  const as = await idpServer(idp, signal);
  const registered = { client_id: idp.clientId, ...(idp.clientSecret !== undefined && { client_secret: idp.clientSecret, token_endpoint_auth_method: secretMethod(as) }) };
  const client: oauth.Client = { client_id: idp.clientId };
  const t = await exchangeToken(
    as,
    client,
    clientAuth(registered),
    { subject: want.idToken, subjectType: TOKEN_TYPE('id_token'), requested: TOKEN_TYPE('id-jag'), audience: want.audience, resource: want.resource, ...(want.scope && { scope: want.scope }) },
    { ...httpOptions(new URL(as.token_endpoint!)), signal },
    // SEP-990: the ID-JAG's token_type is N_A (it is a grant, not an access token).
    { n_a: () => {} },
  );
  return t.access_token;
}

/** Step 2: the JWT bearer grant with the ID-JAG at the upstream's authorization server. */
export async function jwtBearer(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  auth: oauth.ClientAuth,
  assertion: string,
  want: { resource: string; scope?: string },
  opts: { signal: AbortSignal; [oauth.allowInsecureRequests]?: boolean },
): Promise<oauth.TokenEndpointResponse> {
  const res = await oauth.genericTokenEndpointRequest(as, client, auth, JWT_BEARER, { assertion, resource: want.resource, ...(want.scope && { scope: want.scope }) }, opts);
  return oauth.processGenericTokenEndpointResponse(as, client, res);
}
