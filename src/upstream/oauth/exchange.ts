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
 * An exchange answered with a token of no stated or another type than asked for: asking again
 * with the same input would get the same, so it counts as a refusal (not asked again for a while).
 */
export class IssuedTypeError extends Error {}

/**
 * One exchange. `accepted`: the `issued_token_type`s the answer may name (RFC 8693 2.2.1 makes
 * it required; default the type asked for). `recognized`: token types the answer may carry beyond Bearer (an ID-JAG comes
 * as `N_A`: it is no access token). Throws the endpoint's refusal (oauth.ResponseBodyError).
 */
export async function exchangeToken(
  as: oauth.AuthorizationServer,
  client: oauth.Client,
  auth: oauth.ClientAuth,
  x: Exchange,
  opts: { signal: AbortSignal; [oauth.allowInsecureRequests]?: boolean },
  recognized?: oauth.RecognizedTokenTypes,
  accepted: string[] = [x.requested],
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
  // An exchange may issue another kind of token than asked for, and must say which: a token of
  // unknown kind (an ID token, another ID-JAG) is not sent on as if it were the one asked for.
  const issued = t.issued_token_type;
  if (issued === undefined) throw new IssuedTypeError(`its answer has no issued_token_type (required by RFC 8693 2.2.1; expected ${accepted.join(' or ')})`);
  if (!accepted.includes(String(issued))) throw new IssuedTypeError(`it issued a ${String(issued).slice(0, 100)}, not ${accepted.join(' or ')}`);
  return t;
}
