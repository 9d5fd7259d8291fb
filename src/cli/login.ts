// `mcpmux login NAME` and `mcpmux logout NAME`: an OAuth login for one remote server of the
// config, stored where the daemon finds it (upstream/oauth/store.ts: the state folder, or the
// shared store when the config has one with its key); a running daemon (every daemon of a
// cluster) picks it up at once. What is printed names no token.

import type { Config, RemoteServerConfig } from '../config/types.js';
import { logOutput } from '../observe/log-format.js';
import { createLogger } from '../observe/logger.js';
import { SharedStore } from '../store/store.js';
import { login, revoke } from '../upstream/oauth/login.js';
import { chooseLoginStore } from '../upstream/oauth/shared-logins.js';
import { deleteLogin, loginWhere } from '../upstream/oauth/store.js';
import { loadOrReport, UsageError, type GlobalOptions } from './runtime.js';

async function remoteServer(name: string, opts: GlobalOptions): Promise<{ config: Config; server: RemoteServerConfig } | undefined> {
  const config = await loadOrReport(opts);
  if (!config) return undefined;
  const server = config.servers.find((s) => s.name === name);
  if (!server) throw new UsageError(`no server named ${JSON.stringify(name)} in ${config.path}`);
  if (server.transport !== 'http') throw new UsageError(`server ${name} is not a Streamable HTTP server (url); only those take an OAuth login`);
  return { config, server };
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

export async function runLogin(name: string, opts: GlobalOptions & { browser?: boolean }): Promise<number> {
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
  return withLogins(config, opts, 'login', async () => {
    try {
      const { scope } = await login(server, { noBrowser: opts.browser === false, say: (line) => process.stderr.write(`${line}\n`) });
      process.stdout.write(`logged in to ${name}${scope ? ` (scope: ${scope})` : ''}; the login is stored in ${loginWhere(name)}\n`);
      return 0;
    } catch (err) {
      process.stderr.write(`mcpmux: ${(err as Error).message}\n`);
      return 1;
    }
  });
}

export async function runLogout(name: string, opts: GlobalOptions): Promise<number> {
  const found = await remoteServer(name, opts);
  if (!found) return 1;
  return withLogins(found.config, opts, 'logout', async () => {
    const revoked = await revoke(name);
    const deleted = await deleteLogin(name);
    process.stdout.write(deleted ? `logged out of ${name}${revoked ? ' (tokens revoked)' : ''}\n` : `no login stored for ${name}\n`);
    return 0;
  });
}
