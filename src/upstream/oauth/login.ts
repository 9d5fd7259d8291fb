// `mcpmux login NAME`: the authorization code flow with PKCE (S256) for one remote server, run
// once by a person; the daemon then uses what it stores (tokens.ts). The client is the one the
// config names (`oauth.clientId`, pre-registered), else one registered on the spot (RFC 7591).
// The browser comes back to a loopback listener on 127.0.0.1; `state` is checked; the token
// request names the server as its resource (RFC 8707).

import { spawn } from 'node:child_process';
import { createServer, type Server } from 'node:http';
import * as oauth from 'oauth4webapi';
import type { RemoteServerConfig } from '../../config/types.js';
import { canonicalResource, challengeOf, discover, httpOptions, insecureOk, smallJson } from './discover.js';
import { exclusiveLogin, loginKey, readLogin, writeLogin } from './store.js';
import { clientAuth, mergeScopes, secretMethod } from './client-auth.js';
import { describe, tokensOf } from './responses.js';

/** How long the browser step may take. */
const LOGIN_TIMEOUT_MS = 5 * 60_000;

export interface LoginOptions {
  /** Print the URL instead of opening a browser. */
  noBrowser?: boolean;
  /** Where to tell the person what to do (stderr). */
  say(line: string): void;
  /** A perClient server's login for this host client (its own login key); absent: the server's one login. */
  client?: string;
  /** Ends the wait for the browser (a login that opened itself, replaced by a newer one). */
  signal?: AbortSignal;
}

export async function login(server: RemoteServerConfig, opts: LoginOptions): Promise<{ scope: string | undefined }> {
  // The server's own challenge says where to look (and perhaps which scope).
  const key = loginKey(server.name, opts.client);
  const challenge = await challengeOf(server, key);
  const found = await discover(server.url, challenge);
  const { as, resource } = found;
  // Step-up: what a server asked for beyond the last login (403 insufficient_scope) is added.
  // A stored login that cannot be read (sealed with another store key) is what this login replaces.
  const scope = mergeScopes(server.oauth?.scopes?.join(' ') || found.scope, (await readLogin(key).catch(() => undefined))?.scopeNeeded);

  opts.signal?.throwIfAborted();
  const state = oauth.generateRandomState();
  const callback = await loopback(server.oauth?.redirectPort ?? 0, () => state, opts.signal);
  try {
    const redirectUri = callback.uri;
    const client = await clientFor(server, as, redirectUri);
    const auth = clientAuth(client);
    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(as.authorization_endpoint!);
    // Metadata is the server's word: only a web address goes to the browser opener (not file:, smb:...).
    if (url.protocol !== 'https:' && !insecureOk(url)) throw new Error(`the authorization endpoint is not an https URL (${url.protocol})`);
    url.searchParams.set('response_type', 'code');
    url.searchParams.set('client_id', client.client_id);
    url.searchParams.set('redirect_uri', redirectUri);
    url.searchParams.set('code_challenge', await oauth.calculatePKCECodeChallenge(verifier));
    url.searchParams.set('code_challenge_method', 'S256');
    url.searchParams.set('state', state);
    url.searchParams.set('resource', resource);
    if (scope) url.searchParams.set('scope', scope);

    opts.say(`Open this URL to log in to ${server.name}:\n  ${url.href}`);
    if (!opts.noBrowser) openBrowser(url.href, opts.say);

    const back = await callback.result;
    const params = oauth.validateAuthResponse(as, client, back, state);
    const res = await oauth.authorizationCodeGrantRequest(as, client, auth, params, redirectUri, verifier, {
      additionalParameters: { resource },
      ...httpOptions(new URL(as.token_endpoint!)),
    });
    const tokens = await oauth.processAuthorizationCodeResponse(as, client, res);
    // After any refresh a daemon is making of the old login (else its write would replace this one).
    await exclusiveLogin(key, () => writeLogin(key, {
      server: canonicalResource(server.url),
      resource,
      as: { issuer: as.issuer, token_endpoint: as.token_endpoint!, ...(as.revocation_endpoint && { revocation_endpoint: as.revocation_endpoint }) },
      client: {
        client_id: client.client_id,
        ...(typeof client.client_secret === 'string' && { client_secret: client.client_secret }),
        ...(typeof client.token_endpoint_auth_method === 'string' && { token_endpoint_auth_method: client.token_endpoint_auth_method }),
      },
      tokens: tokensOf(tokens),
    }, 'login'));
    return { scope: tokens.scope ?? scope };
  } catch (err) {
    throw new Error(`login to ${server.name} failed: ${describe(err)}`);
  } finally {
    callback.close();
  }
}

/** `mcpmux logout NAME`: revokes the tokens where the server can (RFC 7009); the caller deletes the file. `key`: the login's key (store.ts). */
export async function revoke(key: string): Promise<boolean> {
  // One that cannot be read (the store is down, or another key sealed it) is not revoked; the caller still deletes it.
  const l = await readLogin(key).catch(() => undefined);
  const endpoint = l?.as.revocation_endpoint;
  if (!l || !endpoint || !l.tokens) return false;
  const as: oauth.AuthorizationServer = { issuer: l.as.issuer, revocation_endpoint: endpoint };
  const client: oauth.Client = { client_id: l.client.client_id };
  const auth = clientAuth(l.client);
  let revoked = false;
  for (const token of [l.tokens.refresh_token, l.tokens.access_token]) {
    if (!token) continue;
    try {
      await oauth.processRevocationResponse(await oauth.revocationRequest(as, client, auth, token, { ...httpOptions(new URL(endpoint)), signal: AbortSignal.timeout(15_000) }));
      revoked = true;
    } catch {
      // The server may refuse or be gone: the local copy is deleted anyway.
    }
  }
  return revoked;
}

/**
 * The client: the one configured (pre-registered), else a Client ID Metadata Document URL the
 * server takes, else one registered now (its redirect URI is this login's listener).
 */
async function clientFor(server: RemoteServerConfig, as: oauth.AuthorizationServer, redirectUri: string): Promise<oauth.Client> {
  const configured = server.oauth?.clientId;
  if (configured) {
    const secret = server.oauth?.clientSecret;
    if (!secret) return { client_id: configured, token_endpoint_auth_method: 'none' };
    return { client_id: configured, client_secret: secret, token_endpoint_auth_method: secretMethod(as) };
  }
  // A Client ID Metadata Document: the client is the URL of a document describing it, which the
  // authorization server fetches; preferred over registering when the server takes such ids.
  const cimd = server.oauth?.clientMetadataUrl;
  if (cimd && (as as { client_id_metadata_document_supported?: unknown }).client_id_metadata_document_supported === true) {
    return { client_id: cimd, token_endpoint_auth_method: 'none' };
  }
  if (!as.registration_endpoint) throw new Error('the authorization server offers no client registration: set oauth.clientId (and oauth.redirectPort) in the config');
  const res = await oauth.dynamicClientRegistrationRequest(
    as,
    { client_name: 'mcpmux', redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' },
    { ...httpOptions(new URL(as.registration_endpoint)), signal: AbortSignal.timeout(30_000) },
  );
  // Read leniently: servers in use omit fields RFC 7591 calls required (client_secret_expires_at
  // with a secret), and refusing the login for that helps nobody. client_id is a must.
  const body = await smallJson<oauth.Client>(res);
  if (!res.ok || typeof body?.client_id !== 'string') throw new Error(`client registration failed: HTTP ${res.status}${body && 'error' in body ? ` ${String(body.error)}` : ''}`);
  return body;
}


/** A one-shot listener on 127.0.0.1 for the browser's return. */
async function loopback(port: number, state: () => string, signal?: AbortSignal): Promise<{ uri: string; result: Promise<URL>; close(): void }> {
  let done!: (u: URL) => void;
  let fail!: (e: Error) => void;
  const result = new Promise<URL>((resolve, reject) => ((done = resolve), (fail = reject)));
  signal?.addEventListener('abort', () => fail(new Error('a newer login replaced this one')), { once: true });
  const server: Server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', `http://127.0.0.1`);
    if (url.pathname !== '/callback') return void res.writeHead(404).end();
    // Only the browser coming back from this login (its state) ends it; anything else that
    // finds the port is turned away without disturbing the wait.
    if (url.searchParams.get('state') !== state()) return void res.writeHead(400, { 'content-type': 'text/plain' }).end('mcpmux: not the login this listener waits for');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>mcpmux</title><p>mcpmux: you can close this page and return to the terminal.</p>');
    done(new URL(req.url!, uri));
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, '127.0.0.1', () => resolve()));
  const address = server.address();
  const uri = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : port}/callback`;
  const timer = setTimeout(() => fail(new Error(`no answer from the browser within ${LOGIN_TIMEOUT_MS / 60_000} minutes`)), LOGIN_TIMEOUT_MS);
  timer.unref();
  return {
    uri,
    result,
    close: () => {
      clearTimeout(timer);
      server.close();
      server.closeAllConnections?.();
    },
  };
}

/** $BROWSER (a command, with arguments if any, the URL is given to), else the platform's opener. */
function openBrowser(url: string, say: (line: string) => void): void {
  const [command, ...args] = (process.env.BROWSER?.trim() || (process.platform === 'darwin' ? 'open' : process.platform === 'win32' ? 'explorer' : 'xdg-open')).split(/\s+/);
  try {
    const child = spawn(command!, [...args, url], { stdio: 'ignore', detached: process.platform !== 'win32' });
    child.on('error', () => say(`(could not start ${command}; open the URL yourself)`));
    child.unref();
  } catch {
    say(`(could not start ${command}; open the URL yourself)`);
  }
}
