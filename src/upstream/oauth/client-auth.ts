// How mcpmux authenticates as an OAuth client at the token and revocation endpoints.

import * as oauth from 'oauth4webapi';

/** How the client authenticates at the token endpoint: as registered, else by what it holds. */
export function clientAuth(client: { client_secret?: unknown; token_endpoint_auth_method?: unknown; [key: string]: unknown }): oauth.ClientAuth {
  const secret = typeof client.client_secret === 'string' ? client.client_secret : undefined;
  if (!secret || client.token_endpoint_auth_method === 'none') return oauth.None();
  return client.token_endpoint_auth_method === 'client_secret_basic' ? basic(secret) : oauth.ClientSecretPost(secret);
}

/**
 * client_secret_basic with RFC 6749 2.3.1's form encoding of id and secret, which leaves the
 * unreserved characters (`-._~`) as they are; some servers do not decode, and a `-` encoded as
 * `%2D` then fails against them for nothing.
 */
function basic(secret: string): oauth.ClientAuth {
  const form = (v: string): string => encodeURIComponent(v).replace(/%20/g, '+');
  return (_as, client, _body, headers) => {
    headers.set('authorization', `Basic ${Buffer.from(`${form(client.client_id)}:${form(secret)}`).toString('base64')}`);
  };
}

/**
 * How a registered confidential client sends its secret: Basic unless the server lists only
 * Post (RFC 8414: Basic is the default when it lists nothing).
 */
export function secretMethod(as: oauth.AuthorizationServer): 'client_secret_basic' | 'client_secret_post' {
  const methods = as.token_endpoint_auth_methods_supported;
  return !methods || methods.includes('client_secret_basic') || !methods.includes('client_secret_post') ? 'client_secret_basic' : 'client_secret_post';
}

/** Space-separated scope lists as one, each scope once (undefined when there are none). */
export function mergeScopes(...lists: Array<string | undefined>): string | undefined {
  const scopes = new Set(lists.flatMap((l) => (l ?? '').split(' ')).filter(Boolean));
  return scopes.size > 0 ? [...scopes].join(' ') : undefined;
}
