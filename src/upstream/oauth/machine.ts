// The client-credentials grant, for servers that machines use (`oauth.grant:
// "client_credentials"`): no person and no browser; mcpmux asks the authorization server for a
// token itself whenever it has none or the server refused the last one. The client proves
// itself with its secret (client_secret_basic or _post) or a signed JWT (private_key_jwt).

import { createPrivateKey, webcrypto } from 'node:crypto';
import * as oauth from 'oauth4webapi';
import type { RemoteServerConfig } from '../../config/types.js';
import { clientAuth, mergeScopes, secretMethod } from './client-auth.js';
import { canonicalResource, challengeOf, discover, httpOptions } from './discover.js';
import { tokensOf } from './responses.js';
import { readLogin, writeLogin, type StoredLogin } from './store.js';

const ALGORITHMS: Record<string, webcrypto.RsaHashedImportParams | webcrypto.EcKeyImportParams> = {
  RS256: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' },
  ES256: { name: 'ECDSA', namedCurve: 'P-256' },
};

export async function clientCredentials(server: RemoteServerConfig, signal: AbortSignal = AbortSignal.timeout(30_000)): Promise<StoredLogin> {
  const o = server.oauth!;
  const found = await discover(server.url, await challengeOf(server));
  const { as, resource } = found;
  const scope = mergeScopes(o.scopes?.join(' ') || found.scope, (await readLogin(server.name))?.scopeNeeded);
  let client: oauth.Client = { client_id: o.clientId! };
  let auth: oauth.ClientAuth;
  if (o.privateKey) {
    const alg = o.signingAlgorithm ?? 'RS256';
    const pkcs8 = createPrivateKey(o.privateKey).export({ type: 'pkcs8', format: 'der' });
    const key = await webcrypto.subtle.importKey('pkcs8', pkcs8, ALGORITHMS[alg]!, false, ['sign']);
    auth = oauth.PrivateKeyJwt(key as Parameters<typeof oauth.PrivateKeyJwt>[0]);
    client = { ...client, token_endpoint_auth_method: 'private_key_jwt' };
  } else {
    client = { ...client, client_secret: o.clientSecret, token_endpoint_auth_method: secretMethod(as) };
    auth = clientAuth(client);
  }
  const params: Record<string, string> = { resource, ...(scope && { scope }) };
  const res = await oauth.clientCredentialsGrantRequest(as, client, auth, params, { ...httpOptions(new URL(as.token_endpoint!)), signal });
  const tokens = await oauth.processClientCredentialsResponse(as, client, res);
  const login: StoredLogin = {
    server: canonicalResource(server.url),
    resource,
    as: { issuer: as.issuer, token_endpoint: as.token_endpoint! },
    // The secret and the key stay in the config: the stored login names only the client.
    client: { client_id: client.client_id },
    tokens: tokensOf(tokens),
  };
  await writeLogin(server.name, login);
  return login;
}
