// `mcpmux stdio`: one host session on stdin/stdout, upstreams started in-process.
//
// What a host waits for is the answer to its initialize, which waits for the upstreams'
// handshakes. So this file loads only what reading the config needs, spawns the stdio upstreams
// (upstream/prestart.ts), and only then loads the rest of mcpmux (stdio-runtime.ts: the router,
// sessions, logger, execa…), while the children boot.

import { claimConfig } from '../config/self-reference.js';
import { unknownToolset } from '../config/suggest.js';
import { PrestartedChildren } from '../upstream/prestart.js';
import { loadOrReport, parsePort, type GlobalOptions } from './config-file.js';

export interface StdioOptions extends GlobalOptions {
  adminPort?: string;
  toolset?: string;
}

export async function runStdio(opts: StdioOptions): Promise<number> {
  const adminPortFlag = opts.adminPort === undefined ? undefined : parsePort(opts.adminPort, '--admin-port');
  const config = await loadOrReport(opts);
  if (!config) return 1;
  if (opts.toolset !== undefined && !Object.hasOwn(config.toolsets, opts.toolset)) {
    process.stderr.write(`mcpmux: --toolset: ${unknownToolset(opts.toolset, config.toolsets)}\n`);
    return 1;
  }
  // Started by an mcpmux that runs this same config: starting would start it again, and again.
  // (Checked before any spawn: it also marks this config for the children, self-reference.ts.)
  const nested = claimConfig(config.path);
  if (nested) {
    process.stderr.write(`mcpmux: ${nested}\n`);
    return 1;
  }
  const prestarted = PrestartedChildren.start(config);
  try {
    const { serveStdio } = await import('./stdio-runtime.js');
    return await serveStdio(config, opts, adminPortFlag, prestarted);
  } finally {
    // Serving ends the process itself; reaching here, it could not start (or threw): the
    // children it did not adopt go now, so nothing outlives this exit.
    await prestarted.stopUntaken();
  }
}
