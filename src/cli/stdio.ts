// `mcpmux stdio`: one host session on stdin/stdout, upstreams started in-process.
// stdout carries MCP messages only; logs go to stderr.

import { HostSession } from '../session/host-session.js';
import { StreamTransport } from '../transport/stream.js';
import { VERSION } from '../version.js';
import { createRuntime, loadOrReport, onShutdownSignals, type GlobalOptions } from './runtime.js';

export async function runStdio(opts: GlobalOptions): Promise<number> {
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const { log, router } = createRuntime(config, opts);
  router.start();

  const transport = new StreamTransport(process.stdin, process.stdout, config.limits.maxMessageBytes);
  const session = new HostSession(transport, router, {
    log,
    maxInFlight: config.limits.maxInFlightPerSession,
    maxMs: config.timeouts.maxMs,
    serverInfo: { name: 'mcpmux', version: VERSION },
  });

  let stopped: Promise<void> | undefined;
  const stop = (why: string): Promise<void> =>
    (stopped ??= (async () => {
      log.info({ why }, 'stopping');
      await router.close();
    })());
  onShutdownSignals(log, stop);

  // The host closing stdin ends the session, and with it mcpmux.
  await new Promise<void>((resolve) => (session.onclose = () => resolve()));
  await stop('host closed the connection');
  return 0;
}
