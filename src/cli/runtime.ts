// What every long-running command sets up: config, logger, governance, router, observers; and
// an orderly shutdown that stops every child process and writes out the audit log before the
// process exits.

import path from 'node:path';
import type { ReloadPlan } from '../config/diff.js';
import { ConfigError, type Config } from '../config/types.js';
import type { GlobalOptions } from './config-file.js';
import { createGovernance } from '../governance/governance.js';
import { ToolPins } from '../governance/pins.js';
import { stateDir } from '../state.js';
import { AuditLog } from '../observe/audit.js';
import { AuditRing } from '../observe/audit-ring.js';
import type { RateLimiter } from '../governance/rate-limit.js';
import type { SharedRateLimiter } from '../governance/shared-rate-limit.js';
import type { HostTransport } from '../observe/events.js';
import { logOutput } from '../observe/log-format.js';
import { addLogSecrets, createLogger, flushLogs, type Logger } from '../observe/logger.js';
import { Metrics } from '../observe/metrics.js';
import { unavailableLine } from '../router/merge.js';
import { Router } from '../router/router.js';
import { HostSession } from '../session/host-session.js';
import { ParkedCalls } from '../session/parked.js';
import { SharedStore } from '../store/store.js';
import { clusterIdentity, type ClusterIdentity } from '../cluster/identity.js';

import { chooseLoginStore } from '../upstream/oauth/shared-logins.js';
import { Reloader } from './reload.js';
import type { OperatorRoutes } from '../transport/http/admin.js';
import type { Transport } from '../transport/transport.js';
import { VERSION } from '../version.js';

/** Who a host session is for: its token's client, and the toolset chosen for it. */
export interface SessionOwner {
  client?: string;
  toolset?: string;
  /** An OIDC host's latest validated JWT (SessionPort.hostToken). */
  hostToken?: () => string | undefined;
  /** The id the host knows the session by, where its transport has one (HostSessionOptions.mcpSessionId). */
  mcpSessionId?: string;
}

export interface Runtime {
  /** The config in force (a reload replaces it). */
  readonly config: Config;
  log: Logger;
  router: Router;
  /** Tool-definition pins (governance/pins.ts). */
  pins: ToolPins;
  /** The rate limiter in force (a reload replaces it): what the console shows of the buckets. */
  readonly limiter: RateLimiter | SharedRateLimiter;
  /** The shared store (Redis) when the config has `store`; close it after the router. */
  store: SharedStore | undefined;
  /** This daemon's id and keys among the daemons of a cluster, when the config has `cluster`. */
  cluster: ClusterIdentity | undefined;
  /** 2026-07-28 calls waiting for their host's retry (a draining daemon waits for them too). */
  parked: ParkedCalls;
  /** A host session on a new host connection, with the config's limits (client: from its token). */
  /** `who`: the token's client and the session's toolset (both checked by the caller). */
  openSession(transport: Transport, kind: HostTransport, who?: SessionOwner, stateless?: boolean): HostSession;
  /**
   * A reload: governance, pinning, log level and secrets, timeouts and limits for new sessions,
   * and the upstreams the plan names. Resolves when new upstreams are ready or failed.
   */
  reconfigure(next: Config, plan: ReloadPlan): Promise<void>;
}


/** `quiet.unavailable`: the caller tells the person about unavailable servers itself (check). */
export function createRuntime(initial: Config, opts: GlobalOptions, quiet: { unavailable?: boolean } = {}): Runtime {
  let config = initial;
  const log = createLogger(opts.logLevel ?? config.logLevel ?? 'info', config.secrets, logOutput(opts.logFormat));
  if (!quiet.unavailable) warnUnavailable(log, config);
  let router: Router | undefined;
  // Connects in the background: a Redis down at start is reported (once) and waited for, never fatal.
  const store = config.store && new SharedStore(config.store, log.child({ component: 'store' }));
  // OAuth logins: in the store when it has their key, else in this daemon's files.
  chooseLoginStore(config, store, log);
  const pinnedOf = (c: Config) => new Set(c.servers.filter((s) => s.pinTools).map((s) => s.name));
  const pins = new ToolPins({ file: path.join(stateDir(), 'tool-pins.json'), store, pinned: pinnedOf(config), log, onChange: () => router?.refreshTools() });
  // With a store, rate-limit buckets live in it, shared by every daemon (governance/shared-rate-limit.ts).
  const shared = store && { store, log: log.child({ component: 'rate-limit' }) };
  let governance = createGovernance(config, pins, undefined, shared);
  router = new Router(config, log, governance);
  const serverInfo = { name: 'mcpmux', version: VERSION };
  // In a cluster, requestState tokens are signed with the shared key and name this daemon (parked.ts).
  const cluster = config.cluster && clusterIdentity(config.cluster);
  // MCPMUX_INPUT_TTL_MS: how long a call waits for a 2026-07-28 host's retry (tests shorten it).
  const parked = new ParkedCalls(
    Number(process.env.MCPMUX_INPUT_TTL_MS) > 0 ? Number(process.env.MCPMUX_INPUT_TTL_MS) : undefined,
    cluster && { key: cluster.stateKey, owner: cluster.id, ownerUrl: cluster.advertiseUrl },
  );
  const openSession = (transport: Transport, kind: HostTransport, who: SessionOwner = {}, stateless?: boolean): HostSession =>
    new HostSession(transport, router, {
      ...(stateless && { stateless }),
      parked,
      log,
      // The config in force at each request, not at the session's start: a reload applies to open sessions.
      maxInFlight: () => config.limits.maxInFlightPerSession,
      maxMs: () => config.timeouts.maxMs,
      serverInfo,
      transport: kind,
      ...(who.client !== undefined && { client: who.client }),
      ...(who.toolset !== undefined && { toolset: who.toolset }),
      ...(who.hostToken !== undefined && { hostToken: who.hostToken }),
      ...(who.mcpSessionId !== undefined && { mcpSessionId: who.mcpSessionId }),
    });
  const reconfigure = async (next: Config, plan: ReloadPlan): Promise<void> => {
    const before = config;
    config = next;
    addLogSecrets(log, next.secrets);
    warnUnavailable(log, next, before);
    // --log-level wins over the file, as at start.
    if (!opts.logLevel) log.level = next.logLevel ?? 'info';
    pins.setPinned(pinnedOf(next), new Set(next.servers.map((s) => s.name)));
    // Rate-limit buckets of rules the reload leaves alone stay as drained as they are.
    governance = createGovernance(next, pins, governance.limiter, shared);
    await router.reload(next, governance, plan);
  };
  return {
    get config() {
      return config;
    },
    log,
    router,
    pins,
    get limiter() {
      return governance.limiter;
    },
    store,
    cluster,
    parked,
    openSession,
    reconfigure,
  };
}

/**
 * One warning per server not started for want of a variable (names, never values); on a
 * reload, only for servers that were not unavailable for the same variables before.
 */
function warnUnavailable(log: Logger, config: Config, before?: Config): void {
  for (const s of config.servers) {
    if (!s.unavailable) continue;
    const was = before?.servers.find((b) => b.name === s.name)?.unavailable;
    if (was && was.missing.join() === s.unavailable.missing.join()) continue;
    log.warn({ server: s.name, missing: s.unavailable.missing }, unavailableLine(s.name, s.unavailable.reason));
  }
}

/** The subscribers on the event bus that the config asks for. Start them before the router. */
export interface Observers {
  metrics: Metrics | undefined;
  readonly audit: AuditLog | undefined;
  /** The last audit lines as written (the web console), kept across reloads; empty while the audit log is off. */
  readonly auditRing: AuditRing;
  /**
   * A reload's audit settings: another file or other argument rules start a new writer, and the
   * old one writes out what it holds. Returns why not when the new file cannot be opened (the
   * old writer stays, and the caller refuses the reload).
   */
  reconfigure(next: Config): string | undefined;
  /** Stops listening; the audit log writes out what it holds. Call after the router closed. */
  close(): Promise<void>;
}

function openAudit(config: Config, log: Logger, ring: AuditRing): AuditLog | undefined {
  if (!config.audit.path) return undefined;
  return new AuditLog({ path: config.audit.path, arguments: config.audit.arguments, redact: config.audit.redact, secrets: config.secrets, log, ring });
}

/**
 * Starts the audit log (when `audit.path` is set; SIGUSR2 reopens it) and, when `withMetrics`,
 * the Prometheus metrics. When the audit file cannot be opened, says why on stderr and
 * returns undefined (the command then exits 1).
 */
export function startObservers(config: Config, log: Logger, withMetrics: boolean): Observers | undefined {
  const metrics = withMetrics ? new Metrics({ version: VERSION, toolLabel: config.metrics.toolLabel, toolLabelLimit: config.metrics.toolLabelLimit, log }) : undefined;
  let audit: AuditLog | undefined;
  const auditRing = new AuditRing();
  try {
    audit = openAudit(config, log, auditRing);
  } catch (err) {
    const e = new ConfigError(config.path ?? '(config)', [{ path: '/audit/path', message: `cannot open the audit log: ${(err as Error).message}` }]);
    process.stderr.write(`mcpmux: ${e.message}\n`);
    return undefined;
  }
  let settings = JSON.stringify([config.audit, config.secrets]);
  const redaction = (c: Config): string => JSON.stringify([c.audit.arguments, c.audit.redact, c.secrets]);
  // The rules the kept lines were redacted under (not the whole config: only this is compared).
  let redactedUnder = redaction(config);
  metrics?.start();
  audit?.start();
  const reopen = (): void => audit?.reopen();
  process.on('SIGUSR2', reopen);
  return {
    metrics,
    get audit() {
      return audit;
    },
    auditRing,
    reconfigure(next) {
      const wanted = JSON.stringify([next.audit, next.secrets]);
      if (wanted === settings) return undefined;
      let fresh: AuditLog | undefined;
      try {
        fresh = openAudit(next, log, auditRing);
      } catch (err) {
        return `/audit/path: cannot open the audit log: ${(err as Error).message}`;
      }
      // Publishing is synchronous: between the old writer's last event and the new one's first
      // there is no gap and no overlap.
      // close() stops the old writer listening at once, then writes out what it holds.
      void audit?.close();
      // Lines kept under other redaction rules (or secrets) are not served under the new ones;
      // nor are any once the audit log is off. A new path alone keeps them.
      const rules = redaction(next);
      if (!fresh || rules !== redactedUnder) auditRing.clear();
      fresh?.start();
      audit = fresh;
      settings = wanted;
      redactedUnder = rules;
      return undefined;
    },
    async close() {
      process.off('SIGUSR2', reopen);
      metrics?.stop();
      await audit?.close();
    },
  };
}

/**
 * Traces (`telemetry` in the config, or OTEL_TRACES_EXPORTER=otlp): the tracer and the
 * OpenTelemetry packages are loaded only then, and the upstream connections are handed the
 * function that gives each request its trace context. Call before router.start(). Read once:
 * a reload does not change it (config/diff.ts lists it as needing a restart).
 */
export async function startTracing(runtime: Runtime): Promise<{ close(): Promise<void> } | undefined> {
  const telemetry = runtime.config.telemetry;
  if (!telemetry) return undefined;
  const { Tracing } = await import('../observe/tracing.js');
  const tracing = new Tracing({
    telemetry,
    version: VERSION,
    log: runtime.log.child({ component: 'traces' }),
    audit: () => runtime.config.audit,
    surfaceMode: (id) => runtime.router.surfaceModeOf(id),
  });
  tracing.start();
  runtime.router.traceWith(tracing.traceContext);
  runtime.log.info({ sampleRatio: telemetry.sampleRatio }, 'traces on: spans are exported over OTLP/HTTP');
  return tracing;
}

/**
 * The reloader of a long-running command: the new config goes to the observers first (a new
 * audit file that cannot be opened refuses the reload before anything changed), then to
 * `listeners` (the HTTP front's tokens, origins and quotas), then to the runtime.
 */
export function reloaderFor(runtime: Runtime, observers: Observers, listeners?: (next: Config) => void): Reloader {
  return new Reloader({
    file: runtime.config.path!,
    log: runtime.log,
    current: () => runtime.config,
    apply: async (next, plan) => {
      const refused = observers.reconfigure(next);
      if (refused) throw new Error(refused);
      listeners?.(next);
      await runtime.reconfigure(next, plan);
    },
  });
}

/** OAuth logins stored by `mcpmux login` while this runs: an upstream waiting for one starts again. */
export async function watchLoginsFor(runtime: Runtime): Promise<() => void> {
  if (!runtime.config.servers.some((s) => s.transport === 'http')) return () => {};
  const { watchLogins } = await import('../upstream/oauth/store.js');
  return watchLogins(
    (server) => runtime.router.loginChanged(server),
    (err) => runtime.log.warn({ err: err.message }, 'cannot watch the OAuth logins folder; restart an upstream after a login with mcpmux restart'),
  );
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
export async function startedRouter(config: Config, opts: GlobalOptions, quiet: { unavailable?: boolean } = {}): Promise<{ router: Router; pins: ToolPins; store: SharedStore | undefined }> {
  const { router, pins, store } = createRuntime(config, { ...opts, logLevel: opts.logLevel ?? 'warn' }, quiet);
  router.start();
  await router.ready();
  return { router, pins, store };
}

/**
 * How close together two signals are taken as one. Ctrl-C under `npm start` delivers SIGINT
 * twice within milliseconds (the terminal sends it to the whole foreground group, and npm
 * relays its own copy to its child); a person pressing Ctrl-C again to cut a slow drain short
 * does so well after a second.
 */
export const SIGNAL_REPEAT_MS = 1000;

/**
 * Makes `stop` run at most once, whoever calls it first: SIGTERM or SIGINT (after which the
 * process exits), or the caller (stdio when the host closes stdin). A second signal while
 * stopping exits at once, unless it is the same signal as the first and came within
 * SIGNAL_REPEAT_MS of it (the same Ctrl-C delivered twice); the first signal during a stop
 * the caller began (a host that closed stdin, then signals mcpmux as the SDK's client does)
 * waits for that drain and exits 0.
 * Returns the once-only `stop`.
 */
export function onShutdownSignals(log: Logger, stop: (why: string) => Promise<void>): (why: string) => Promise<void> {
  let stopped: Promise<void> | undefined;
  let first: { signal: NodeJS.Signals; at: number } | undefined;
  const once = (why: string): Promise<void> => (stopped ??= stop(why));
  const handler = (signal: NodeJS.Signals): void => {
    if (first !== undefined) {
      // Only the same signal is the same Ctrl-C delivered twice; a SIGTERM right after a
      // SIGINT is somebody (a supervisor, a person) wanting it gone now.
      if (signal === first.signal && performance.now() - first.at < SIGNAL_REPEAT_MS) {
        log.debug({ signal }, 'the same signal again (the terminal and npm both send it); still draining');
        return;
      }
      log.warn({ signal }, 'second signal; exiting now');
      void flushLogs(log, 200).finally(() => process.exit(1));
      return;
    }
    first = { signal, at: performance.now() };
    log.info({ signal, ...(stopped && { draining: true }) }, 'shutting down');
    // A drain that fails (a child that would not stop, an audit log that could not be written
    // out) exits 1, so a supervisor knows the stop was not clean.
    void once(signal).then(
      () => flushLogs(log).finally(() => process.exit(0)),
      (err: Error) => {
        log.error({ err: err.message }, 'drain failed');
        void flushLogs(log).finally(() => process.exit(1));
      },
    );
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
