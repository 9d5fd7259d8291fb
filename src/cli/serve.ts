// `mcpmux serve`: the daemon. Streamable HTTP at /mcp, legacy HTTP+SSE at /sse + /messages,
// WebSocket at /ws, /healthz and /readyz; one router (and one set of upstreams) for all hosts.
//
// /healthz is 200 while the process runs. /readyz is 200 once the router's startup is over
// (every enabled upstream answered initialize or failed, or timeouts.startupMs passed) and
// 503 before that and while draining; later upstream restarts do not flip it (they show in its
// `detail`, as counts per upstream state). SIGTERM/SIGINT drain: stop accepting, close every session, close the router (and
// with it every child process), exit 0. A daemon with `cluster` first leaves its load balancer
// on SIGTERM (HttpServer.drain, for cluster.drainMs).

import type { HostTransport } from '../observe/events.js';
import { HttpServer } from '../transport/http/server.js';
import { DEFAULT_IDLE_SESSION_MS, IDLE_REPORT_MS, type SessionKind } from '../transport/http/sessions.js';
import { claimConfig } from '../config/self-reference.js';
import { loadOrReport, parsePort, type GlobalOptions } from './config-file.js';
import { addMetricsRoute, createRuntime, onShutdownSignals, reloaderFor, startObservers, startTracing, watchLoginsFor } from './runtime.js';
import { cannotListen } from './listen-error.js';
import { announceReady } from './ready-line.js';
import { addStatusRoutes, operatorInfo } from './status.js';
import { addConsoleRoutes } from '../console/routes.js';
import { ClusterRegistry } from '../cluster/registry.js';
import { ClusterForward } from '../transport/http/cluster-forward.js';

/** What each HTTP session kind is called in events, metrics and the audit log. */
const TRANSPORT: Record<SessionKind, HostTransport> = { streamable: 'http', sse: 'sse', ws: 'ws' };

export interface ServeOptions extends GlobalOptions {
  host?: string;
  port?: string;
}

/** Overrides the idle expiry of Streamable HTTP sessions (milliseconds). */
export const IDLE_ENV = 'MCPMUX_SESSION_IDLE_MS';
/** Override how long a client may take to send a request's headers, and the whole request (ms). */
export const HEADERS_TIMEOUT_ENV = 'MCPMUX_HEADERS_TIMEOUT_MS';
export const REQUEST_TIMEOUT_ENV = 'MCPMUX_REQUEST_TIMEOUT_MS';
/** Overrides how soon a session that said nothing after its initialize is closed (ms). */
export const UNFINISHED_ENV = 'MCPMUX_UNFINISHED_SESSION_MS';
/** Overrides how long a Streamable HTTP session must be quiet to count as idle in /status and /metrics (ms). */
export const IDLE_REPORT_ENV = 'MCPMUX_IDLE_REPORT_MS';
/** How long past timeouts.maxMs a forwarded call's owner may take to start its answer (the hop, a loaded machine). */
const FORWARD_GRACE_MS = 5_000;

export async function runServe(opts: ServeOptions): Promise<number> {
  const port = opts.port === undefined ? undefined : parsePort(opts.port, '--port');
  const config = await loadOrReport(opts);
  if (!config) return 1;
  // Started by an mcpmux that runs this same config: starting would start it again, and again.
  const nested = claimConfig(config.path);
  if (nested) {
    process.stderr.write(`mcpmux: ${nested}\n`);
    return 1;
  }
  const host = opts.host ?? config.listen.host;
  const runtime = createRuntime(config, opts);
  const { log, router, pins, parked, openSession } = runtime;
  // Approvals (`mcpmux tools --approve`) and logins (`mcpmux login`) by another process apply at once.
  pins.watch();
  const unwatchLogins = await watchLoginsFor(runtime);
  const observers = startObservers(config, log, true);
  if (!observers) return 1;
  // Traces, when configured: loaded (with OpenTelemetry) before any upstream starts.
  const tracing = await startTracing(runtime);
  let started = false;
  // In a cluster: this daemon in Redis's list, and retries of calls other daemons hold sent there.
  const registry = runtime.cluster && runtime.store && new ClusterRegistry(runtime.store, runtime.cluster, log.child({ component: 'cluster' }));
  // A forwarded call may run as long as any call (timeouts.maxMs) before its answer starts.
  const forward = registry && new ClusterForward({ self: registry.self, lookup: (id) => registry.lookup(id), answerWithinMs: () => runtime.config.timeouts.maxMs + FORWARD_GRACE_MS, log });

  const server = new HttpServer({
    host,
    port: port ?? config.listen.port,
    adminPort: config.listen.adminPort,
    adminHost: config.listen.adminHost,
    allowedOrigins: config.listen.allowedOrigins,
    tokens: config.listen.auth.tokens,
    ...(config.listen.auth.oidc && { oidc: config.listen.auth.oidc }),
    toolsets: config.toolsets,
    maxMessageBytes: config.limits.maxMessageBytes,
    ...(tracing && { traceHeaders: true }),
    maxSessions: config.limits.maxSessions,
    maxSessionsPerClient: config.limits.maxSessionsPerClient,
    idleSessionMs: envMs(IDLE_ENV) ?? DEFAULT_IDLE_SESSION_MS,
    unfinishedSessionMs: envMs(UNFINISHED_ENV),
    headersTimeoutMs: envMs(HEADERS_TIMEOUT_ENV),
    requestTimeoutMs: envMs(REQUEST_TIMEOUT_ENV),
    log,
    ...(forward && { cluster: forward }),
    open: (transport, { kind, client, toolset, stateless, hostToken, mcpSessionId }) => openSession(transport, TRANSPORT[kind], { client, toolset, hostToken, mcpSessionId }, stateless),
    // Counts only: /healthz and /readyz need no token, so they name nothing of the config
    // (/status, which names servers, pids and errors, needs one when tokens are configured).
    readiness: () => {
      const upstreams: Record<string, number> = {};
      for (const u of router.list()) {
        const state = u.gaveUp ? 'given up' : u.state;
        upstreams[state] = (upstreams[state] ?? 0) + 1;
      }
      // An upstream mcpmux gave up on (a crash loop) makes the daemon not ready: it needs an admin.
      const gaveUp = upstreams['given up'] !== undefined;
      // A store that is down does not take the daemon out of the balancer: every daemon shares
      // it, so all would go; what needs it fails (or is skipped) as store.onError says.
      const store = runtime.store?.health;
      const degraded = gaveUp || (started && store === 'down');
      return { ready: started && !gaveUp, ...(degraded && { status: 'degraded' }), detail: { upstreams, ...(store && { store }) } };
    },
  });
  const reloader = reloaderFor(runtime, observers, (next) =>
    server.reconfigure({ ...next.listen, tokens: next.listen.auth.tokens, oidc: next.listen.auth.oidc, toolsets: next.toolsets, maxSessions: next.limits.maxSessions, maxSessionsPerClient: next.limits.maxSessionsPerClient }),
  );
  // Sessions a host never DELETEd linger until the idle expiry: reported as idle, not as active.
  const idleReportMs = envMs(IDLE_REPORT_ENV) ?? IDLE_REPORT_MS;
  const idleByTransport = (): [HostTransport, number][] => {
    const idle = server.registry.idleCounts(idleReportMs);
    return (Object.keys(TRANSPORT) as SessionKind[]).map((kind) => [TRANSPORT[kind], idle.get(kind) ?? 0]);
  };
  observers.metrics!.countIdleSessions(idleByTransport);
  observers.metrics!.countSurfaces(() => router.surfaceGroups());
  if (runtime.store) observers.metrics!.countStore(() => runtime.store!.health);
  addMetricsRoute(server.adminRoutes, observers.metrics!);
  addStatusRoutes(server.adminRoutes, router, {
    configPath: config.path,
    lastReload: () => reloader.last,
    idleSessions: () => idleByTransport().reduce((n, [, k]) => n + k, 0),
    ...(registry && { cluster: () => registry.status() }),
    ...operatorInfo(runtime, observers, reloader),
  });
  addConsoleRoutes(server.adminRoutes);

  // The ports first, the upstreams after: a port in use (another daemon running) must fail
  // before any server is spawned, not after each started and had to be stopped again.
  let bound;
  try {
    bound = await server.listen();
  } catch (err) {
    const why = cannotListen(err, host, port ?? config.listen.port);
    // The message stays what it always was (log filters match it); the explanation is a field,
    // which the pretty log shows after it.
    log.error({ err: (err as Error).message, code: (err as NodeJS.ErrnoException).code, host, port: port ?? config.listen.port, hint: why }, 'cannot listen');
    unwatchLogins();
    await pins.close();
    await runtime.store?.close();
    await observers.close();
    return 1;
  }
  router.start();
  registry?.start();
  void router.ready().then(() => (started = true));
  reloader.start();
  onShutdownSignals(log, async (why) => {
    reloader.stop();
    unwatchLogins();
    // The other daemons' /status says "draining" at once, not once the drain is over.
    registry?.setState('draining');
    // A daemon of a cluster, stopped by its supervisor (SIGTERM), leaves its load balancer
    // first: /readyz 503 at once, open sessions, calls and parked calls (their retries come
    // forwarded) served for cluster.drainMs (or until none is left); Ctrl-C (SIGINT) and a
    // lone daemon stop as they always have.
    if (config.cluster && why === 'SIGTERM') {
      log.info({ why, sessions: server.registry.size, parked: parked.size, drainMs: config.cluster.drainMs }, 'leaving the load balancer: /readyz answers 503, open sessions and parked calls are still served');
      await server.drain(config.cluster.drainMs, () => parked.size);
    }
    log.info({ why, sessions: server.registry.size }, 'draining');
    await server.close();
    await registry?.stop();
    await router.close();
    await pins.close();
    await runtime.store?.close();
    await observers.close();
    await tracing?.close();
    log.info('stopped');
  });
  const base = `http://${host.includes(':') ? `[${host}]` : host}:${bound.port}`;
  // Tests (and people) look for this line: msg "listening", the /mcp url and the bound port.
  // Said once SIGINT and SIGTERM are handled: whoever signals the daemon on seeing it (a test,
  // `npm start`'s Ctrl-C) gets the drain, not Node's default death by the signal.
  log.info(
    { url: `${base}/mcp`, port: bound.port, host, sse: `${base}/sse`, ws: `${base.replace('http', 'ws')}/ws`, adminPort: bound.adminPort, adminHost: bound.adminHost, ...(runtime.cluster && { daemon: runtime.cluster.id }) },
    'listening',
  );
  void announceReady(log, router, config, `${base}/mcp`);

  // Runs until a signal; onShutdownSignals exits the process once `stop` is done.
  await new Promise<void>(() => {});
  return 0;
}

/** A positive number of milliseconds from the environment, else undefined (the default applies). */
function envMs(name: string): number | undefined {
  const v = Number(process.env[name]);
  return Number.isFinite(v) && v > 0 ? v : undefined;
}
