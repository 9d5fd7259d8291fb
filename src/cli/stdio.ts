// `mcpmux stdio`: one host session on stdin/stdout, upstreams started in-process.
// stdout carries MCP messages only; logs go to stderr.

import { StreamTransport } from '../transport/stream.js';
import { createRuntime, loadOrReport, onShutdownSignals, type GlobalOptions } from './runtime.js';

export async function runStdio(opts: GlobalOptions): Promise<number> {
  const config = await loadOrReport(opts);
  if (!config) return 1;
  const { log, router, openSession } = createRuntime(config, opts);
  router.start();

  const transport = new StreamTransport(process.stdin, process.stdout, config.limits.maxMessageBytes);
  const session = openSession(transport);

  const stop = onShutdownSignals(log, async (why) => {
    log.info({ why }, 'stopping');
    await router.close();
  });

  // The host closing stdin ends the session, and with it mcpmux.
  await new Promise<void>((resolve) => (session.onclose = () => resolve()));
  await stop('host closed the connection');
  return 0;
}
