// OAuth 2.0 Token Exchange (RFC 8693): a token the client holds (the subject token) for another
// one, at a token endpoint. mcpmux uses it twice: `oauth.grant: "token_exchange"`, where the
// host's OIDC JWT becomes a token for one upstream (its audience and resource), and the first
// step of Cross-App Access (id-jag.ts), where an ID token becomes an ID-JAG at the IdP. The
// subject token goes to the token endpoint only, never to the upstream.

import * as oauth from 'oauth4webapi';

export const TOKEN_EXCHANGE = 'urn:ietf:params:oauth:grant-type:token-exchange';

/** RFC 8693 3's token type identifiers (`access_token`, `jwt`, `id_token`; SEP-990's `id-jag`). */
export const TOKEN_TYPE = (name: 'access_token' | 'jwt' | 'id_token' | 'id-jag'): string => `urn:ietf:params:oauth:token-type:${name}`;

export interface Exchange {
  subject: string;
  subjectType: string;
  requested: string;
  audience?: string;
  resource?: string;
  scope?: string;
}

/**
 * One exchange. `recognized`: token types the answer may carry beyond Bearer (an ID-JAG comes
 * as `N_A`: it is no access token). Throws the endpoint's refusal (oauth.ResponseBodyError).
 */
export async function exchangeToken(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  auth: oauth.ClientAuth,
  x: Exchange,
  opts: { signal: AbortSignal; [oauth.allowInsecureRequests]?: boolean },
  recognized?: oauth.RecognizedTokenTypes,
): Promise<oauth.TokenEndpointResponse> {
  const params: Record<string, string> = {
    subject_token: x.subject,
    subject_token_type: x.subjectType,
    requested_token_type: x.requested,
    ...(x.audience && { audience: x.audience }),
    ...(x.resource && { resource: x.resource }),
    ...(x.scope && { scope: x.scope }),
  };
  const res = await oauth.genericTokenEndpointRequest(as, client, auth, TOKEN_EXCHANGE, params, opts);
  const t = await oauth.processGenericTokenEndpointResponse(as, client, res, recognized && { recognizedTokenTypes: recognized });
  // An exchange may issue another kind of token than asked for: it must be the kind asked for.
  if (t.issued_token_type !== undefined && t.issued_token_type !== x.requested) {
    throw new Error(`the token endpoint issued a ${String(t.issued_token_type)}, not the ${x.requested} asked for`);
  }
  return t;
}
