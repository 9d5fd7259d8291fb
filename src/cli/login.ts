// `mcpmux login NAME` and `mcpmux logout NAME`: an OAuth login for one remote server of the
// config, stored where the daemon finds it (upstream/oauth/store.ts); a running daemon picks
// it up at once. What is printed names no token.

import type { RemoteServerConfig } from '../config/types.js';
import { login, revoke } from '../upstream/oauth/login.js';
import { deleteLogin, loginFile } from '../upstream/oauth/store.js';
import { loadOrReport, UsageError, type GlobalOptions } from './runtime.js';

async function remoteServer(name: string, opts: GlobalOptions): Promise<RemoteServerConfig | undefined> {
  const config = await loadOrReport(opts);
  if (!config) return undefined;
  const server = config.servers.find((s) => s.name === name);
  if (!server) throw new UsageError(`no server named ${JSON.stringify(name)} in ${config.path}`);
  if (server.transport !== 'http') throw new UsageError(`server ${name} is not a Streamable HTTP server (url); only those take an OAuth login`);
  return server;
}

export async function runLogin(name: string, opts: GlobalOptions & { browser?: boolean }): Promise<number> {
  const server = await remoteServer(name, opts);
  if (!server) return 1;
  // Its URL or OAuth settings would be missing a piece: say which variable instead of failing on it.
  if (server.unavailable) {
    process.stderr.write(`mcpmux login: server ${name} is disabled: ${server.unavailable.reason}; set it and try again\n`);
    return 1;
  }
  if (server.oauth?.grant === 'client_credentials') throw new UsageError(`server ${name} uses the client_credentials grant: mcpmux gets its tokens itself, there is no login`);
  try {
    const { scope } = await login(server, { noBrowser: opts.browser === false, say: (line) => process.stderr.write(`${line}\n`) });
    process.stdout.write(`logged in to ${name}${scope ? ` (scope: ${scope})` : ''}; the login is stored in ${loginFile(name)}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`mcpmux: ${(err as Error).message}\n`);
    return 1;
  }
}

export async function runLogout(name: string, opts: GlobalOptions): Promise<number> {
  const server = await remoteServer(name, opts);
  if (!server) return 1;
  const revoked = await revoke(name);
  const deleted = deleteLogin(name);
  process.stdout.write(deleted ? `logged out of ${name}${revoked ? ' (tokens revoked)' : ''}\n` : `no login stored for ${name}\n`);
  return 0;
}
