// Which config file a command reads, and reading it with every problem reported. Kept apart from
// runtime.ts (the router, sessions, logger…): `mcpmux stdio` reads its config and starts its
// upstreams before it loads any of that (upstream/prestart.ts).

import { loadConfig } from '../config/load.js';
import { ConfigError, type Config } from '../config/types.js';
import { UsageError } from './usage-error.js';

export interface GlobalOptions {
  config?: string;
  logLevel?: string;
  /** `--log-format json|pretty`; else pretty on a terminal, JSON otherwise (observe/log-format.ts). */
  logFormat?: string;
}

/** The config path from --config or MCPMUX_CONFIG; a usage error if neither is given. */
export function configPath(opts: GlobalOptions): string {
  const p = opts.config ?? process.env.MCPMUX_CONFIG;
  if (!p) throw new UsageError('no config file: pass --config FILE or set MCPMUX_CONFIG');
  return p;
}

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
