// `mcpmux stdio` once its config is read and its first upstreams spawned (stdio.ts): one host
// session on stdin/stdout, upstreams started in-process. stdout carries MCP messages only; logs
// go to stderr. With an admin port (`--admin-port` or `listen.adminPort`, bound to
// `listen.adminHost`), the operator routes are served on it, so a desktop host's mcpmux can be
// scraped too; /status and restart there need a token when `listen.auth.tokens` is set, as
// under serve.

import type { Guard } from '../transport/http/guard.js';
import type { AdminListener } from '../transport/http/admin.js';
import { StreamTransport } from '../transport/stream.js';
import type { StopGrace } from '../upstream/connect.js';
import { flushLogs } from '../observe/logger.js';
import type { Config } from '../config/types.js';
import type { PrestartedChildren } from '../upstream/prestart.js';
import { addMetricsRoute, createRuntime, onShutdownSignals, reloaderFor, startObservers, startTracing, watchLoginsFor } from './runtime.js';
import type { StdioOptions } from './stdio.js';
import { announceReady } from './ready-line.js';
import { InteractiveLogins } from '../upstream/oauth/interactive.js';

/**
 * How each child is stopped when mcpmux stops under a host. The SDK's stdio client (Inspector,
 * and the hosts built on it) ends mcpmux's stdin, waits 2 s, then SIGTERMs it: every child must
 * be gone well before, so mcpmux exits 0 by itself. All children at once: stdin closed, SIGTERM
 * after 500 ms, SIGKILL 500 ms later (a daemon gives them 2 s at each step).
 */
const WITHIN_HOST_GRACE: StopGrace = { afterEofMs: 500, afterTermMs: 500 };

/**
 * Serves the host until it closes (then exits the process); returns 1 when it cannot start.
 * `adminPortFlag`: --admin-port. `prestarted`: the children the upstreams adopt.
 */
export async function serveStdio(config: Config, opts: StdioOptions, adminPortFlag: number | undefined, prestarted: PrestartedChildren): Promise<number> {
  // In the config, 0 means "none" (as under serve); `--admin-port 0` picks a free port.
  const adminPort = adminPortFlag ?? (config.listen.adminPort || undefined);
  const runtime = createRuntime(config, opts);
  const { log, router, pins, openSession } = runtime;
  // Approvals (`mcpmux tools --approve`) and logins (`mcpmux login`) by another process apply at once.
  pins.watch();
  const unwatchLogins = await watchLoginsFor(runtime);
  const observers = startObservers(config, log, adminPort !== undefined);
  if (!observers) return 1;
  // Traces, when configured: loaded (with OpenTelemetry) before any upstream starts.
  const tracing = await startTracing(runtime);
  let guard: Guard | undefined;
  // A reload's tokens and origins apply to the admin listener at once, as under serve.
  const reloader = reloaderFor(runtime, observers, (next) => guard?.admit({ allowedOrigins: next.listen.allowedOrigins, tokens: next.listen.auth.tokens }));

  let admin: AdminListener | undefined;
  let started = false;
  let connected = true;
  if (adminPort !== undefined) {
    // The admin listener's modules (HTTP, the guard and its OIDC verifier with jose, /status)
    // load only when there is one: most hosts run mcpmux without, and wait for its start-up.
    const [{ Guard }, { AdminListener, addHealthRoutes, OperatorRoutes }, { cannotListen }, { addStatusRoutes, operatorInfo }, { addConsoleRoutes }] = await Promise.all([
      import('../transport/http/guard.js'),
      import('../transport/http/admin.js'),
      import('./listen-error.js'),
      import('./status.js'),
      import('../console/routes.js'),
    ]);
    const host = config.listen.adminHost;
    const routes = new OperatorRoutes(log);
    addHealthRoutes(routes, () => ({ ready: started && connected, status: connected ? (started ? 'ready' : 'starting') : 'draining', sessions: connected ? 1 : 0 }));
    addMetricsRoute(routes, observers.metrics!);
    observers.metrics!.countSurfaces(() => router.surfaceGroups());
    addStatusRoutes(routes, router, { configPath: config.path, lastReload: () => reloader.last, ...operatorInfo(runtime, observers, reloader) });
    addConsoleRoutes(routes);
    guard = new Guard({ host, allowedOrigins: config.listen.allowedOrigins, tokens: config.listen.auth.tokens });
    admin = new AdminListener(host, adminPort, routes, guard);
    try {
      const port = await admin.listen();
      log.info({ url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`, port }, 'admin listening');
    } catch (err) {
      // The message stays what it always was; the explanation is a field (shown after it when pretty).
      log.error({ err: (err as Error).message, code: (err as NodeJS.ErrnoException).code, host, port: adminPort, hint: cannotListen(err, host, adminPort) }, 'cannot listen on the admin port');
      await observers.close();
      return 1;
    }
  }
  router.stopChildrenWithin(WITHIN_HOST_GRACE);
  // A person is at the screen: an upstream that needs a login opens it in the browser (oauth.interactive).
  // MCPMUX_LOGIN_REOPEN_MS: how soon a login may open again (tests shorten the minute).
  const logins = new InteractiveLogins(log, Number(process.env.MCPMUX_LOGIN_REOPEN_MS) > 0 ? Number(process.env.MCPMUX_LOGIN_REOPEN_MS) : undefined);
  router.openLoginsWith(logins);
  router.adoptChildren(prestarted);
  // The host's initialize has waited since this process started (performance's time origin).
  router.start(performance.now());
  // Every upstream has made its first start by then: a child not adopted (none, normally) is no one's.
  void router.ready().then(() => prestarted.stopUntaken());
  void router.ready().then(() => (started = true));
  void announceReady(log, router, config);

  const transport = new StreamTransport(process.stdin, process.stdout, config.limits.maxMessageBytes, true, { log });
  const session = openSession(transport, 'stdio', opts.toolset === undefined ? {} : { toolset: opts.toolset });

  reloader.start();
  const stop = onShutdownSignals(log, async (why) => {
    reloader.stop();
    unwatchLogins();
    log.info({ why }, 'stopping');
    connected = false;
    logins.close();
    await router.close();
    await prestarted.stopUntaken();
    await pins.close();
    await runtime.store?.close();
    await observers.close();
    await tracing?.close();
    await admin?.close();
  });

  // The host closing stdin ends the session, and with it mcpmux.
  const why = await new Promise<string>((resolve) => (session.onclose = resolve));
  // Writes to a host that stopped reading can never complete, and would keep the process
  // alive: once everything is stopped and the logs are out, exit. A drain that fails exits 1
  // (as after a signal), and still exits: thrown from here it would leave the process up.
  let code = 0;
  try {
    await stop(why === 'input ended' ? 'host closed the connection' : why);
  } catch (err) {
    log.error({ err: (err as Error).message }, 'drain failed');
    code = 1;
  }
  await flushLogs(log);
  process.exit(code);
}
