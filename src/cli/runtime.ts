// What every long-running command sets up: config, logger, router; and an orderly shutdown
// that stops every child process before the process exits.

import { loadConfig } from '../config/load.js';
import { ConfigError, type Config } from '../config/types.js';
import { createLogger, type Logger } from '../observe/logger.js';
import { ToolPolicy } from '../governance/policy.js';
import { Router } from '../router/router.js';
import { HostSession } from '../session/host-session.js';
import type { Transport } from '../transport/transport.js';
import { VERSION } from '../version.js';

export interface Runtime {
  config: Config;
  log: Logger;
  router: Router;
  /** A host session on a new host connection, with the config's limits (client: from its token). */
  openSession(transport: Transport, client?: string): HostSession;
}

export interface GlobalOptions {
  config?: string;
  logLevel?: string;
}

/** The config path from --config or MCPMUX_CONFIG; a usage error if neither is given. */
export function configPath(opts: GlobalOptions): string {
  const p = opts.config ?? process.env.MCPMUX_CONFIG;
  if (!p) throw new UsageError('no config file: pass --config FILE or set MCPMUX_CONFIG');
  return p;
}

export class UsageError extends Error {}

/** Loads the config, printing every problem and returning undefined when it is invalid. */
export async function loadOrReport(opts: GlobalOptions): Promise<Config | undefined> {
  try {
    return await loadConfig(configPath(opts));
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`mcpmux: ${err.message}\n`);
      return undefined;
    }
    throw err;
  }
}

export function createRuntime(config: Config, opts: GlobalOptions): Runtime {
  const log = createLogger(opts.logLevel ?? config.logLevel ?? 'info', config.secrets);
  const policy = new ToolPolicy(config.policy);
  const router = new Router(config, log, {
    interceptors: [policy.interceptor()],
    toolVisible: policy.open ? undefined : (client, name) => policy.allows(client, name),
  });
  const serverInfo = { name: 'mcpmux', version: VERSION };
  const openSession = (transport: Transport, client?: string): HostSession =>
    new HostSession(transport, router, {
      log,
      maxInFlight: config.limits.maxInFlightPerSession,
      maxMs: config.timeouts.maxMs,
      serverInfo,
      ...(client !== undefined && { client }),
    });
  return { config, log, router, openSession };
}

/**
 * For one-shot commands (`check --probe`, `tools`): a router with every upstream started and
 * answered (or failed), logging only warnings unless asked otherwise. The caller closes it.
 */
export async function startedRouter(config: Config, opts: GlobalOptions): Promise<Router> {
  const { router } = createRuntime(config, { ...opts, logLevel: opts.logLevel ?? 'warn' });
  router.start();
  await router.ready();
  return router;
}

/**
 * Makes `stop` run at most once, whoever calls it first: SIGTERM or SIGINT (after which the
 * process exits), or the caller (stdio when the host closes stdin). A second signal while
 * stopping exits at once. Returns the once-only `stop`.
 */
export function onShutdownSignals(log: Logger, stop: (why: string) => Promise<void>): (why: string) => Promise<void> {
  let stopped: Promise<void> | undefined;
  const once = (why: string): Promise<void> => (stopped ??= stop(why));
  const handler = (signal: NodeJS.Signals): void => {
    if (stopped) {
      log.warn({ signal }, 'second signal; exiting now');
      process.exit(1);
    }
    log.info({ signal }, 'shutting down');
    void once(signal).finally(() => process.exit(0));
  };
  process.on('SIGTERM', handler);
  process.on('SIGINT', handler);
  return once;
}

/**
 * For commands whose output may go to a pipe that closes early (`mcpmux tools | head`): a closed
 * stdout ends the output quietly instead of crashing with an unhandled EPIPE.
 */
export function tolerateClosedStdout(): void {
  process.stdout.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
}
