// The one line that tells a person mcpmux is up and what it serves:
//   ready: http://127.0.0.1:7330/mcp (2 servers, 14 tools)      (serve)
//   ready (2 servers, 14 tools)                                   (stdio)
// logged once, when the router's startup is over (every upstream answered, failed, or
// timeouts.startupMs passed). Servers that are not up are named in it, those left unstarted for a
// missing variable included.
//
// Counting tools means listing them, which mcpmux otherwise leaves to the first host that asks.
// So only pretty logs (a person at a terminal) list them for this line; in JSON logs (a host's
// log file, a supervisor, tests that count an upstream's requests) the line gives servers only
// and mcpmux asks no upstream anything a host did not.

import { ANONYMOUS_CLIENT, type Config } from '../config/types.js';
import { logFormatOf, type Logger } from '../observe/logger.js';
import type { Router } from '../router/router.js';

/** How long the ready line waits for the tool count before it is said without it. */
const COUNT_WAIT_MS = 10_000;

/** Waits for the router's startup, then logs the ready line. `url`: the /mcp URL under serve. */
export async function announceReady(log: Logger, router: Router, config: Config, url?: string): Promise<void> {
  await router.ready();
  // Below info (--log-level warn) nobody would read it: list nothing for it either.
  if (!log.isLevelEnabled('info')) return;
  const shared = router.list();
  const up = shared.filter((u) => u.state === 'ready');
  const perSession = config.servers.filter((s) => !s.disabled && s.sharing === 'session').length;
  const parts = [`${up.length} ${up.length === 1 ? 'server' : 'servers'}`];
  const fields: Record<string, unknown> = { ...(url !== undefined && { url }), servers: up.length };
  if (logFormatOf(log) === 'pretty') {
    const tools = await countTools(router);
    if (tools !== undefined) {
      parts.push(`${tools} ${tools === 1 ? 'tool' : 'tools'}`);
      fields.tools = tools;
    }
  }
  const notUp = shared.filter((u) => u.state !== 'ready').map((u) => `${u.name} (${u.needsLogin ? 'needs login' : u.state})`);
  // Servers never started for want of a variable are not in the router's list, but not up either.
  for (const s of config.servers) if (s.unavailable) notUp.push(`${s.name} (unavailable)`);
  let said = parts.join(', ');
  if (perSession > 0) said += `; ${perSession} started per session`;
  if (notUp.length > 0) said += `; not up: ${notUp.join(', ')}`;
  log.info(fields, `ready${url === undefined ? '' : `: ${url}`} (${said})`);
}

/** The tools a host without a token is shown, or undefined if listing takes too long. */
async function countTools(router: Router): Promise<number | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), COUNT_WAIT_MS);
    timer.unref();
  });
  try {
    const counted = router.allTools(ANONYMOUS_CLIENT).then(
      ({ tools }) => tools.length,
      () => undefined,
    );
    return await Promise.race([counted, late]);
  } finally {
    clearTimeout(timer);
  }
}
