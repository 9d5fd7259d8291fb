// What every long-running command sets up: config, logger, governance, router, observers; and
// an orderly shutdown that stops every child process and writes out the audit log before the
// process exits.

import path from 'node:path';
import { loadConfig } from '../config/load.js';
import { ConfigError, type Config } from '../config/types.js';
import { createGovernance } from '../governance/governance.js';
import { stateDir, ToolPins } from '../governance/pins.js';
import { AuditLog } from '../observe/audit.js';
import type { HostTransport } from '../observe/events.js';
import { createLogger, flushLogs, type Logger } from '../observe/logger.js';
import { Metrics } from '../observe/metrics.js';
import { Router } from '../router/router.js';
import { HostSession } from '../session/host-session.js';
import type { OperatorRoutes } from '../transport/http/admin.js';
import type { Transport } from '../transport/transport.js';
import { VERSION } from '../version.js';

export interface Runtime {
  config: Config;
  log: Logger;
  router: Router;
  /** Tool-definition pins (governance/pins.ts). */
  pins: ToolPins;
  /** A host session on a new host connection, with the config's limits (client: from its token). */
  openSession(transport: Transport, kind: HostTransport, client?: string): HostSession;
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

/** A port flag's value: an integer from 0 (any free port) to 65535. */
export function parsePort(s: string, flag: string): number {
  const n = Number(s);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag} must be an integer from 0 to 65535, not ${JSON.stringify(s)}`);
  return n;
}

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
  let router: Router | undefined;
  const pins = new ToolPins({
    file: path.join(stateDir(), 'tool-pins.json'),
    pinned: new Set(config.servers.filter((s) => s.pinTools).map((s) => s.name)),
    log,
    onChange: () => router?.refreshTools(),
  });
  router = new Router(config, log, createGovernance(config, pins));
  const serverInfo = { name: 'mcpmux', version: VERSION };
  const openSession = (transport: Transport, kind: HostTransport, client?: string): HostSession =>
    new HostSession(transport, router, {
      log,
      maxInFlight: config.limits.maxInFlightPerSession,
      maxMs: config.timeouts.maxMs,
      serverInfo,
      transport: kind,
      ...(client !== undefined && { client }),
    });
  return { config, log, router, pins, openSession };
}

/** The subscribers on the event bus that the config asks for. Start them before the router. */
export interface Observers {
  metrics: Metrics | undefined;
  audit: AuditLog | undefined;
  /** Stops listening; the audit log writes out what it holds. Call after the router closed. */
  close(): Promise<void>;
}

/**
 * Starts the audit log (when `audit.path` is set; SIGUSR2 reopens it) and, when `withMetrics`,
 * the Prometheus metrics. When the audit file cannot be opened, says why on stderr and
 * returns undefined (the command then exits 1).
 */
export function startObservers(config: Config, log: Logger, withMetrics: boolean): Observers | undefined {
  const metrics = withMetrics ? new Metrics({ version: VERSION, toolLabel: config.metrics.toolLabel, toolLabelLimit: config.metrics.toolLabelLimit, log }) : undefined;
  let audit: AuditLog | undefined;
  if (config.audit.path) {
    try {
      audit = new AuditLog({ path: config.audit.path, arguments: config.audit.arguments, redact: config.audit.redact, secrets: config.secrets, log });
    } catch (err) {
      const e = new ConfigError(config.path ?? '(config)', [{ path: '/audit/path', message: `cannot open the audit log: ${(err as Error).message}` }]);
      process.stderr.write(`mcpmux: ${e.message}\n`);
      return undefined;
    }
  }
  metrics?.start();
  audit?.start();
  const reopen = (): void => audit?.reopen();
  if (audit) process.on('SIGUSR2', reopen);
  return {
    metrics,
    audit,
    async close() {
      process.off('SIGUSR2', reopen);
      metrics?.stop();
      await audit?.close();
    },
  };
}

/** `/metrics` on the operator routes. */
export function addMetricsRoute(routes: OperatorRoutes, metrics: Metrics): void {
  routes.set('/metrics', async (_req, res) => {
    const { contentType, body } = await metrics.text();
    res.writeHead(200, { 'content-type': contentType, 'content-length': Buffer.byteLength(body) });
    res.end(body);
  });
}

/**
 * For one-shot commands (`check --probe`, `tools`): a router with every upstream started and
 * answered (or failed), logging only warnings unless asked otherwise. The caller closes it.
 */
export async function startedRouter(config: Config, opts: GlobalOptions): Promise<{ router: Router; pins: ToolPins }> {
  const { router, pins } = createRuntime(config, { ...opts, logLevel: opts.logLevel ?? 'warn' });
  router.start();
  await router.ready();
  return { router, pins };
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
      void flushLogs(log, 200).finally(() => process.exit(1));
      return;
    }
    log.info({ signal }, 'shutting down');
    void once(signal)
      .then(() => flushLogs(log))
      .finally(() => process.exit(0));
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
