// `mcpmux stdio` as hosts run it (`stdio --config F`, perhaps with --log-level, --log-format,
// --admin-port, --toolset), read without commander: importing and building commander's program
// came before the first upstream's spawn, on the path a host waits on (about a sixth of
// mcpmux's CPU before that spawn). Only well-formed command lines are read here; anything else
// (help, an unknown or repeated option, a missing or unknown value) goes to commander, which
// says what is wrong exactly as before.

import { LOG_FORMATS, LOG_LEVELS } from '../observe/log-format.js';
import type { StdioOptions } from './stdio.js';

/** Each option of `stdio`, by its flags, with the values it takes (undefined: any). */
const OPTIONS: Record<string, { key: keyof StdioOptions; choices?: readonly string[] }> = {
  '-c': { key: 'config' },
  '--config': { key: 'config' },
  '--log-level': { key: 'logLevel', choices: LOG_LEVELS },
  '--log-format': { key: 'logFormat', choices: LOG_FORMATS },
  '--admin-port': { key: 'adminPort' },
  '--toolset': { key: 'toolset' },
};

/** The options of a plain `stdio` command line (`args`: after the node and script paths); undefined: ask commander. */
export function plainStdio(args: readonly string[]): StdioOptions | undefined {
  if (args[0] !== 'stdio') return undefined;
  const opts: StdioOptions = {};
  for (let i = 1; i < args.length; i++) {
    const arg = args[i]!;
    const eq = arg.startsWith('--') ? arg.indexOf('=') : -1;
    const flag = eq > 0 ? arg.slice(0, eq) : arg;
    const option = Object.hasOwn(OPTIONS, flag) ? OPTIONS[flag] : undefined;
    if (!option || opts[option.key] !== undefined) return undefined;
    const value = eq > 0 ? arg.slice(eq + 1) : args[++i];
    if (value === undefined || value === '' || value.startsWith('-')) return undefined;
    if (option.choices && !option.choices.includes(value)) return undefined;
    opts[option.key] = value;
  }
  return opts;
}
