// `mcpmux login NAME` and `mcpmux logout NAME`: an OAuth login for one remote server of the
// config, stored where the daemon finds it (upstream/oauth/store.ts: the state folder, or the
// shared store when the config has one with its key); a running daemon (every daemon of a
// cluster) picks it up at once. What is printed names no token.
// A `perClient` server keeps one login per host client: `--client C` says whose.

import { ANONYMOUS_CLIENT, isPerClient, type Config, type RemoteServerConfig } from '../config/types.js';
import { nearest } from '../config/suggest.js';
import { logOutput } from '../observe/log-format.js';
import { createLogger } from '../observe/logger.js';
import { SharedStore } from '../store/store.js';
import { login, revoke } from '../upstream/oauth/login.js';
import { chooseLoginStore } from '../upstream/oauth/shared-logins.js';
import { deleteLogin, loginKey, loginWhere } from '../upstream/oauth/store.js';
import { loadOrReport, type GlobalOptions } from './config-file.js';
import { UsageError } from './usage-error.js';

async function remoteServer(name: string, opts: GlobalOptions): Promise<{ config: Config; server: RemoteServerConfig } | undefined> {
  const config = await loadOrReport(opts);
  if (!config) return undefined;
  const server = config.servers.find((s) => s.name === name);
  if (!server) throw new UsageError(`no server named ${JSON.stringify(name)} in ${config.path}`);
  if (server.transport !== 'http') throw new UsageError(`server ${name} is not a Streamable HTTP server (url); only those take an OAuth login`);
  return { config, server };
}

/** The host clients the config names: its token clients, and the clients its OIDC claims map to. */
function configuredClients(config: Config): string[] {
  const auth = config.listen.auth as { tokens: { client: string }[]; oidc?: { clients?: Record<string, string> } };
  return [...new Set([...auth.tokens.map((t) => t.client), ...Object.values(auth.oidc?.clients ?? {})])];
}

/**
 * Whose login `login`/`logout` handle: undefined for a server with one login; a host client for
 * a perClient server (`anonymous` when the config has no clients: stdio, serve without
 * listen.auth). A name that is no client is refused, with the nearest one.
 */
function clientFor(config: Config, server: RemoteServerConfig, client: string | undefined, command: string): string | undefined {
  const name = server.name;
  if (!isPerClient(server)) {
    if (client !== undefined) throw new UsageError(`server ${name} has one login for all clients (it has no "oauth": {"perClient": true}): run mcpmux ${command} ${name}`);
    return undefined;
  }
  const clients = configuredClients(config);
  const oidc = (config.listen.auth as { oidc?: unknown }).oidc !== undefined;
  if (client === undefined) {
    if (clients.length === 0 && !oidc) return ANONYMOUS_CLIENT;
    throw new UsageError(`server ${name} keeps one login per client: run mcpmux ${command} ${name} --client C, with C one of: ${[...clients, ...(oidc ? ['oidc:<claim value>'] : []), ANONYMOUS_CLIENT].join(', ')}`);
  }
  // An OIDC client without a mapping is `oidc:<claim value>`: any value can come.
  if (client === ANONYMOUS_CLIENT || clients.includes(client) || (oidc && client.startsWith('oidc:') && client.length > 'oidc:'.length)) return client;
  const near = nearest(client, clients);
  throw new UsageError(`no client named ${JSON.stringify(client)}${near ? ` (did you mean ${JSON.stringify(near)}?)` : ''}; clients: ${[...clients, ANONYMOUS_CLIENT].join(', ')}${oidc ? ', or oidc:<claim value>' : ''}`);
}

/**
 * Runs `fn` with logins kept where the config says. With the shared store, it must answer
 * first: a login that cannot be stored is not worth a trip to the browser.
 */
async function withLogins(config: Config, opts: GlobalOptions, command: string, fn: () => Promise<number>): Promise<number> {
  if (!config.store?.secret) return fn();
  const log = createLogger(opts.logLevel ?? 'warn', config.secrets, logOutput(opts.logFormat));
  const store = new SharedStore(config.store, log.child({ component: 'store' }));
  try {
    if ((await store.ready(5_000)) !== 'up') {
      process.stderr.write(`mcpmux ${command}: the shared store (Redis) is unreachable${store.reason ? ` (${store.reason})` : ''}; the login lives there (store.secretEnv is set): try again when it is back\n`);
      return 1;
    }
    chooseLoginStore(config, store, log);
    return await fn();
  } finally {
    await store.close();
  }
}

export async function runLogin(name: string, opts: GlobalOptions & { browser?: boolean; client?: string }): Promise<number> {
  const found = await remoteServer(name, opts);
  if (!found) return 1;
  const { config, server } = found;
  // Its URL or OAuth settings would be missing a piece: say which variable instead of failing on it.
  if (server.unavailable) {
    process.stderr.write(`mcpmux login: server ${name} is disabled: ${server.unavailable.reason}; set it and try again\n`);
    return 1;
  }
  const grant = server.oauth?.grant;
  if (grant === 'client_credentials') throw new UsageError(`server ${name} uses the client_credentials grant: mcpmux gets its tokens itself, there is no login`);
  if (grant === 'token_exchange' || grant === 'jwt_bearer') {
    const from = grant === 'jwt_bearer' && server.oauth?.idp?.idToken ? 'the ID token in oauth.idp.idToken' : "the host's OIDC sign-in (listen.auth.oidc)";
    throw new UsageError(`server ${name} uses the ${grant} grant: mcpmux gets its tokens itself from ${from}, there is no login`);
  }
  const client = clientFor(config, server, opts.client, 'login');
  const named = client !== undefined && client !== ANONYMOUS_CLIENT;
  return withLogins(config, opts, 'login', async () => {
    try {
      const { scope } = await login(server, { noBrowser: opts.browser === false, say: (line) => process.stderr.write(`${line}\n`), ...(client !== undefined && { client }) });
      process.stdout.write(`logged in to ${name}${named ? ` for client ${client}` : ''}${scope ? ` (scope: ${scope})` : ''}; the login is stored in ${loginWhere(loginKey(name, client))}\n`);
      return 0;
    } catch (err) {
      process.stderr.write(`mcpmux: ${(err as Error).message}\n`);
      return 1;
    }
  });
}

export async function runLogout(name: string, opts: GlobalOptions & { client?: string }): Promise<number> {
  const found = await remoteServer(name, opts);
  if (!found) return 1;
  const client = clientFor(found.config, found.server, opts.client, 'logout');
  const key = loginKey(name, client);
  const whose = client !== undefined && client !== ANONYMOUS_CLIENT ? ` for client ${client}` : '';
  return withLogins(found.config, opts, 'logout', async () => {
    const revoked = await revoke(key);
    const deleted = await deleteLogin(key);
    process.stdout.write(deleted ? `logged out of ${name}${whose}${revoked ? ' (tokens revoked)' : ''}\n` : `no login stored for ${name}${whose}\n`);
    return 0;
  });
}
